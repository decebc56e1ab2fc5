// The Go service of the "Adventures in Go land" seed, as a peer for
// bench/feed: one JSON document read from a file every second and kept in
// memory with its gzip-compressed copy, served by net/http over HTTP or
// HTTPS. It is given the same HTTP semantics the feed has, so the two are
// compared on equal work: a strong ETag from the content hash, 304 on
// If-None-Match, Cache-Control: max-age=1, gzip when Accept-Encoding asks
// for it.
//
//	peer-go-feed -listen 127.0.0.1:8443 -file doc.json [-cert cert.pem -key key.pem]
package main

import (
	"bytes"
	"compress/gzip"
	"crypto/sha256"
	"crypto/tls"
	"encoding/hex"
	"flag"
	"log"
	"net/http"
	"os"
	"strconv"
	"strings"
	"sync/atomic"
	"time"
)

// version is one document and what is served of it, made once per refresh.
type version struct {
	body     []byte
	gzipped  []byte
	etag     string
	gzipETag string
}

func load(path string) (*version, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	sum := sha256.Sum256(data)
	id := hex.EncodeToString(sum[:16])
	var buf bytes.Buffer
	zw, _ := gzip.NewWriterLevel(&buf, gzip.BestCompression)
	zw.Write(data)
	zw.Close()
	return &version{
		body:     data,
		gzipped:  buf.Bytes(),
		etag:     `"` + id + `"`,
		gzipETag: `"` + id + `.gzip"`,
	}, nil
}

func main() {
	listen := flag.String("listen", "127.0.0.1:8080", "address to listen on")
	cert := flag.String("cert", "", "PEM certificate: serve HTTPS")
	key := flag.String("key", "", "PEM private key of -cert")
	file := flag.String("file", "", "the JSON document, read every second")
	flag.Parse()

	var current atomic.Pointer[version]
	first, err := load(*file)
	if err != nil {
		log.Fatal(err)
	}
	current.Store(first)
	go func() {
		for range time.Tick(time.Second) {
			if v, err := load(*file); err == nil && v.etag != current.Load().etag {
				current.Store(v)
			}
		}
	}()

	http.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		v := current.Load()
		body, etag := v.body, v.etag
		gz := strings.Contains(r.Header.Get("Accept-Encoding"), "gzip")
		if gz {
			body, etag = v.gzipped, v.gzipETag
		}
		h := w.Header()
		h.Set("Content-Type", "application/json")
		h.Set("Cache-Control", "max-age=1")
		h.Set("Vary", "Accept-Encoding")
		h.Set("ETag", etag)
		if r.Header.Get("If-None-Match") == etag {
			w.WriteHeader(http.StatusNotModified)
			return
		}
		if gz {
			h.Set("Content-Encoding", "gzip")
		}
		h.Set("Content-Length", strconv.Itoa(len(body)))
		w.Write(body)
	})

	server := &http.Server{Addr: *listen}
	if *cert == "" {
		log.Fatal(server.ListenAndServe())
	}
	server.TLSConfig = &tls.Config{}
	log.Fatal(server.ListenAndServeTLS(*cert, *key))
}
