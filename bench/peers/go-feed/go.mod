module celer.invalid/bench/peer-go-feed

go 1.21
