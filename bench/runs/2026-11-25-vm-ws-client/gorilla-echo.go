package main

import (
	"net/http"
	"os"

	"github.com/gorilla/websocket"
)

var upgrader = websocket.Upgrader{ReadBufferSize: 4096, WriteBufferSize: 4096}

func echo(w http.ResponseWriter, r *http.Request) {
	c, err := upgrader.Upgrade(w, r, nil)
	if err != nil {
		return
	}
	defer c.Close()
	for {
		t, m, err := c.ReadMessage()
		if err != nil {
			return
		}
		if c.WriteMessage(t, m) != nil {
			return
		}
	}
}

func main() {
	http.HandleFunc("/echo", echo)
	http.ListenAndServe(os.Args[1], nil)
}
