module tern.local/bench/peers/go_echo

go 1.22
