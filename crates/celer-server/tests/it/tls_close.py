"""How a TLS connection ends, as a client sees it (Python 3 standard library).

    tls_close.py HOST PORT MODE

MODE is `close` (an HTTP/1.1 request with `Connection: close`), `http10`
(an HTTP/1.0 request) or `idle` (a keep-alive HTTP/1.1 request, then
silence until the server closes). Prints `answered STATUS` once the
response is read, then reads until the server ends the connection, never
closing or shutting down first itself, and prints one JSON line: the
status and how the stream ended: "close_notify" when the server sent it
(RFC 8446 §6.1), or the error the client saw otherwise (OpenSSL 3 reports
"unexpected eof" for a TCP close without it).
"""

import json
import socket
import ssl
import sys

host, port, mode = sys.argv[1], int(sys.argv[2]), sys.argv[3]
ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
ctx.check_hostname = False
ctx.verify_mode = ssl.CERT_NONE
ctx.set_alpn_protocols(["http/1.1"])
raw = socket.create_connection((host, port), timeout=10)
# A ragged EOF must be reported, not read as a clean end.
s = ctx.wrap_socket(raw, suppress_ragged_eofs=False)
request = {
    "close": b"GET /hello HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n",
    "http10": b"GET /hello HTTP/1.0\r\nHost: x\r\n\r\n",
    "idle": b"GET /hello HTTP/1.1\r\nHost: x\r\n\r\n",
}[mode]
s.sendall(request)
data = b""
while b"\r\n\r\n" not in data:
    chunk = s.recv(65536)
    if not chunk:
        break
    data += chunk
head, _, body = data.partition(b"\r\n\r\n")
length = 0
for line in head.split(b"\r\n")[1:]:
    name, _, value = line.partition(b":")
    if name.strip().lower() == b"content-length":
        length = int(value)
status = int(head.split(b" ")[1]) if head else 0
ended = None
try:
    while len(body) < length:
        chunk = s.recv(65536)
        if not chunk:
            break
        body += chunk
    print(f"answered {status}", flush=True)
    while True:
        chunk = s.recv(65536)
        if not chunk:
            ended = "close_notify"
            break
        body += chunk
except (ssl.SSLError, OSError) as e:
    ended = f"{type(e).__name__}: {e}"
print(json.dumps({"status": status, "body": body.decode("latin-1"), "ended": ended}), flush=True)
