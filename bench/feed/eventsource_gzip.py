#!/usr/bin/env python3
"""A gzip-encoded event stream in a real browser: does EventSource read it?

Serves a page whose EventSource reads /events, a `text/event-stream` sent
with `Content-Encoding: gzip` (one gzip stream for the response, each event
a deflate block ended by a full flush, as decision 138 weighs), three
5 KiB events 0.3 s apart, the stream left open. The page's last script is
held back 3 s, so `--dump-dom` prints what the page received while the
stream was still open:

    python3 bench/feed/eventsource_gzip.py 18931 &
    chromium --headless --no-sandbox --disable-gpu --no-first-run \
        --user-data-dir="$(mktemp -d)" --dump-dom http://127.0.0.1:18931/ | grep got
    kill %1

Chromium 156 (Debian) prints `got 1 5016 ...` to `got 3 5016 ...`.
"""
import http.server, socketserver, zlib, time, sys
class H(http.server.BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    def log_message(self, *a): pass
    def do_GET(self):
        if self.path == "/":
            body = b"""<!doctype html><html><body><pre id=o></pre><script>
var es = new EventSource('/events');
es.onmessage = function(e){ document.getElementById('o').textContent += 'got ' + e.lastEventId + ' ' + e.data.length + ' ' + e.data.slice(0,12) + '\\n'; };
es.onerror = function(){ document.getElementById('o').textContent += 'error\\n'; };
</script><script src="/wait.js"></script></body></html>"""
            self.send_response(200); self.send_header("Content-Type","text/html"); self.send_header("Content-Length",str(len(body))); self.end_headers(); self.wfile.write(body)
        elif self.path == "/wait.js":
            time.sleep(3)
            body = b"1;"
            self.send_response(200); self.send_header("Content-Type","application/javascript"); self.send_header("Content-Length",str(len(body))); self.end_headers(); self.wfile.write(body)
        elif self.path == "/events":
            self.send_response(200); self.send_header("Content-Type","text/event-stream"); self.send_header("Content-Encoding","gzip"); self.send_header("Cache-Control","no-cache"); self.send_header("Transfer-Encoding","chunked"); self.end_headers()
            c = zlib.compressobj(6, zlib.DEFLATED, 31)
            def chunk(b):
                if b: self.wfile.write(b"%x\r\n%s\r\n" % (len(b), b)); self.wfile.flush()
            for n in range(1, 4):
                ev = b"id: %d\ndata: %s\n\n" % (n, (b'{"n":%d,"pad":"' % n) + b"x" * 5000 + b'"}')
                chunk(c.compress(ev) + c.flush(zlib.Z_FULL_FLUSH))
                time.sleep(0.3)
            time.sleep(5)
socketserver.ThreadingTCPServer.allow_reuse_address = True
socketserver.ThreadingTCPServer.daemon_threads = True
with socketserver.ThreadingTCPServer(("127.0.0.1", int(sys.argv[1])), H) as s: s.serve_forever()
