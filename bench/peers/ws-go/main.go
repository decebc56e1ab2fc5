// Echo and broadcast server on gorilla/websocket: on /broadcast every message
// received is written to every connection of that path (one writer goroutine
// and a buffered channel per connection); on /echo (and /) it is sent back as
// it came. GOMAXPROCS=1: one thread runs Go code, like the other peers.
//
//	peer-ws-go -listen 127.0.0.1:PORT
package main

import (
	"flag"
	"log"
	"net/http"
	"runtime"
	"sync"

	"github.com/gorilla/websocket"
)

type message struct {
	kind int
	data []byte
}

var (
	upgrader = websocket.Upgrader{CheckOrigin: func(*http.Request) bool { return true }}
	mu       sync.Mutex
	clients  = map[chan message]struct{}{}
)

func echo(w http.ResponseWriter, r *http.Request) {
	c, err := upgrader.Upgrade(w, r, nil)
	if err != nil {
		return
	}
	defer c.Close()
	for {
		kind, data, err := c.ReadMessage()
		if err != nil {
			return
		}
		if c.WriteMessage(kind, data) != nil {
			return
		}
	}
}

func broadcast(w http.ResponseWriter, r *http.Request) {
	c, err := upgrader.Upgrade(w, r, nil)
	if err != nil {
		return
	}
	out := make(chan message, 256)
	mu.Lock()
	clients[out] = struct{}{}
	mu.Unlock()
	go func() {
		for m := range out {
			if c.WriteMessage(m.kind, m.data) != nil {
				c.Close()
			}
		}
	}()
	defer func() {
		mu.Lock()
		delete(clients, out)
		mu.Unlock()
		close(out)
		c.Close()
	}()
	for {
		kind, data, err := c.ReadMessage()
		if err != nil {
			return
		}
		mu.Lock()
		for ch := range clients {
			select {
			case ch <- message{kind, data}:
			default: // a slow receiver misses the message
			}
		}
		mu.Unlock()
	}
}

func main() {
	addr := flag.String("listen", "127.0.0.1:9004", "address to listen on")
	flag.Parse()
	runtime.GOMAXPROCS(1)
	http.HandleFunc("/echo", echo)
	http.HandleFunc("/", echo)
	http.HandleFunc("/broadcast", broadcast)
	log.Printf("peer-ws-go listening on %s", *addr)
	log.Fatal(http.ListenAndServe(*addr, nil))
}
