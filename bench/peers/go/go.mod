module celer.invalid/bench/peer-go

go 1.21
