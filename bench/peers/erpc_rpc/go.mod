module tern.local/bench/peers/erpc_rpc

go 1.23

require (
	github.com/henrylee2cn/erpc/v6 v6.3.5
	tern.bench v0.0.0
)

require (
	git.apache.org/thrift.git v0.13.0 // indirect
	github.com/gogo/protobuf v1.2.1 // indirect
	github.com/henrylee2cn/ameda v1.3.6 // indirect
	github.com/henrylee2cn/cfgo v0.0.0-20180417024816-e6c3cc325b21 // indirect
	github.com/henrylee2cn/goutil v0.0.0-20200416032639-974f5b4094a2 // indirect
	github.com/klauspost/cpuid v1.2.2 // indirect
	github.com/klauspost/reedsolomon v1.9.3 // indirect
	github.com/lucas-clemente/quic-go v0.18.0 // indirect
	github.com/pkg/errors v0.8.1 // indirect
	github.com/templexxx/cpu v0.0.1 // indirect
	github.com/templexxx/xorsimd v0.4.1 // indirect
	github.com/tjfoc/gmsm v1.0.1 // indirect
	github.com/xtaci/kcp-go/v5 v5.5.12 // indirect
	golang.org/x/crypto v0.0.0-20191206172530-e9b2fee46413 // indirect
	golang.org/x/net v0.0.0-20191209160850-c0dbc17a3553 // indirect
	golang.org/x/sys v0.0.0-20200519105757-fe76b779f299 // indirect
	google.golang.org/protobuf v1.36.12 // indirect
	gopkg.in/yaml.v2 v2.2.2 // indirect
)

replace tern.bench => ../go_rpc_common

// erpc v6.3.5 links quic-go v0.18.0 (for its QUIC transport), whose qtls-go1-15 panics at start
// on any Go after 1.15 ("qtls.ConnectionState doesn't match"). The benchmark runs over TCP, so
// quic-go is replaced by quic_off, a module that declares what erpc's quic package names and
// fails every QUIC dial and listen.
replace github.com/lucas-clemente/quic-go => ./quic_off
