// Stands in for github.com/lucas-clemente/quic-go in erpc_rpc's build (see ../go.mod).
module github.com/lucas-clemente/quic-go

go 1.23
