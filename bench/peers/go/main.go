// The Go net/http server of the "Adventures in Go land" seed, as a peer for
// `bench/run tls`: one payload read once at start-up and served to every
// request, over HTTP or HTTPS (ListenAndServeTLS), plus the TechEmpower
// plaintext endpoint.
//
//	peer-go -listen 127.0.0.1:8443 [-cert cert.pem -key key.pem] [-no-resumption] [-json FILE]
package main

import (
	"crypto/tls"
	"flag"
	"log"
	"net/http"
	"os"
)

func main() {
	listen := flag.String("listen", "127.0.0.1:8080", "address to listen on")
	cert := flag.String("cert", "", "PEM certificate: serve HTTPS")
	key := flag.String("key", "", "PEM private key of -cert")
	noResumption := flag.Bool("no-resumption", false, "turn TLS session tickets off")
	jsonFile := flag.String("json", "", "JSON payload file (default: a built-in message)")
	flag.Parse()

	// The seed reads its payload from disk once and serves it to everyone.
	payload := []byte(`{"message":"Hello, World!"}`)
	if *jsonFile != "" {
		data, err := os.ReadFile(*jsonFile)
		if err != nil {
			log.Fatal(err)
		}
		payload = data
	}
	plaintext := []byte("Hello, World!")

	mux := http.NewServeMux()
	mux.HandleFunc("/plaintext", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/plain")
		w.Write(plaintext)
	})
	mux.HandleFunc("/json", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		w.Write(payload)
	})
	mux.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		w.Write(payload)
	})

	server := &http.Server{Addr: *listen, Handler: mux}
	if *cert == "" {
		log.Fatal(server.ListenAndServe())
	}
	server.TLSConfig = &tls.Config{SessionTicketsDisabled: *noResumption}
	log.Fatal(server.ListenAndServeTLS(*cert, *key))
}
