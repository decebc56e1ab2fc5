module celer.bench/peer-go-fcgi

go 1.21
