"""WebSocket peer for celer-bench's tests, on the `websockets` package.

Paths: /echo sends every message back as it came; /room broadcasts every
message to every socket in the room (the sender too); /mangle echoes with
the first byte changed; /big answers every message with one of 16 MiB + 1
bytes (over celer-bench's limit); /refuse answers 403; /bye closes with 1001 after
the upgrade. An HTTP server beside it takes POST /post (the body is
broadcast to /room) and GET /stats (counters as JSON).

Prints "READY <ws port> <http port>" once listening; runs until killed.
Usage: ws_peer.py [CERT KEY]   (with a certificate: wss:// and https://)
"""

import asyncio
import http
import http.server
import json
import ssl
import sys
import threading

from websockets.asyncio.server import broadcast, serve

room = set()
stats = {"connections": 0, "deflate": 0, "echoed": 0, "posted": 0}
loop = None


def reject(connection, request):
    if request.path == "/refuse":
        return connection.respond(http.HTTPStatus.FORBIDDEN, "refused\n")
    return None


async def handler(ws):
    stats["connections"] += 1
    extensions = ws.protocol.extensions
    if any(e.name == "permessage-deflate" for e in extensions):
        stats["deflate"] += 1
    path = ws.request.path
    if path == "/bye":
        await ws.close(1001, "going away")
        return
    if path == "/room":
        room.add(ws)
        try:
            async for message in ws:
                broadcast(room, message)
        finally:
            room.discard(ws)
        return
    async for message in ws:
        if path == "/big":
            await ws.send(b"x" * (16 * 1024 * 1024 + 1))
            continue
        if path == "/mangle":
            message = ("X" + message[1:]) if isinstance(message, str) else (b"X" + message[1:])
        stats["echoed"] += 1
        await ws.send(message)


class Http(http.server.BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def do_POST(self):
        body = self.rfile.read(int(self.headers.get("Content-Length", "0")))
        stats["posted"] += 1
        text = body.decode()
        loop.call_soon_threadsafe(broadcast, room, text)
        self.send_response(204)
        self.send_header("Content-Length", "0")
        self.end_headers()

    def do_GET(self):
        body = json.dumps(stats).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args):
        pass


async def main():
    global loop
    loop = asyncio.get_running_loop()
    context = None
    if len(sys.argv) == 3:
        context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        context.load_cert_chain(sys.argv[1], sys.argv[2])
    httpd = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Http)
    if context:
        httpd.socket = context.wrap_socket(httpd.socket, server_side=True)
    threading.Thread(target=httpd.serve_forever, daemon=True).start()
    async with serve(handler, "127.0.0.1", 0, ssl=context, process_request=reject,
                     max_size=None, max_queue=None) as server:
        port = server.sockets[0].getsockname()[1]
        print(f"READY {port} {httpd.server_address[1]}", flush=True)
        await asyncio.get_running_loop().create_future()


asyncio.run(main())
