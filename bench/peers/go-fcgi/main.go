// A FastCGI responder on Go's net/http/fcgi, the peer of `bench/gateway`:
// the TechEmpower plaintext endpoint, as example-hello-engine serves it.
//
//	peer-go-fcgi -listen unix:/tmp/go.sock | -listen tcp:127.0.0.1:9000
package main

import (
	"flag"
	"log"
	"net"
	"net/http"
	"net/http/fcgi"
	"os"
	"strings"
)

func main() {
	listen := flag.String("listen", "unix:/tmp/peer-go-fcgi.sock", "unix:PATH or tcp:HOST:PORT")
	flag.Parse()

	plaintext := []byte("Hello, World!")
	mux := http.NewServeMux()
	mux.HandleFunc("/plaintext", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/plain")
		w.Write(plaintext)
	})

	var l net.Listener
	var err error
	if path, ok := strings.CutPrefix(*listen, "unix:"); ok {
		os.Remove(path)
		l, err = net.Listen("unix", path)
		if err == nil {
			os.Chmod(path, 0o666)
		}
	} else {
		l, err = net.Listen("tcp", strings.TrimPrefix(*listen, "tcp:"))
	}
	if err != nil {
		log.Fatal(err)
	}
	log.Fatal(fcgi.Serve(l, mux))
}
