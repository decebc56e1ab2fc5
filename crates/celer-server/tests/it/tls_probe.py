"""TLS probe for the engine's tests (Python 3 standard library only).

    tls_probe.py HOST PORT [--sni NAME] [--cafile F] [--tls 1.2|1.3]
                 [--alpn P1,P2] [--ciphers TLS1.2-LIST] [--path /hello] [--resume]

Connects, completes the handshake, sends one GET and prints one JSON line:
version, alpn, the SHA-256 of the server's certificate, status, body,
and with --resume whether a second connection resumed the session. A
failed handshake prints {"error": ...}.
"""

import argparse
import hashlib
import json
import socket
import ssl

p = argparse.ArgumentParser()
p.add_argument("host")
p.add_argument("port", type=int)
p.add_argument("--sni")
p.add_argument("--cafile")
p.add_argument("--tls")
p.add_argument("--alpn")
p.add_argument("--ciphers")
p.add_argument("--path", default="/hello")
p.add_argument("--resume", action="store_true")
a = p.parse_args()

ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
if a.cafile and a.sni:
    ctx.load_verify_locations(a.cafile)
else:
    ctx.check_hostname = False
    ctx.verify_mode = ssl.CERT_NONE
if a.tls == "1.2":
    ctx.minimum_version = ctx.maximum_version = ssl.TLSVersion.TLSv1_2
elif a.tls == "1.3":
    ctx.minimum_version = ctx.maximum_version = ssl.TLSVersion.TLSv1_3
if a.alpn:
    ctx.set_alpn_protocols(a.alpn.split(","))
if a.ciphers:
    ctx.set_ciphers(a.ciphers)


def once(session=None):
    raw = socket.create_connection((a.host, a.port), timeout=10)
    s = ctx.wrap_socket(raw, server_hostname=a.sni, session=session)
    facts = {
        "version": s.version(),
        "alpn": s.selected_alpn_protocol(),
        "cipher": s.cipher()[0],
        "sha256": hashlib.sha256(s.getpeercert(binary_form=True)).hexdigest().upper(),
        "reused": s.session_reused,
    }
    req = f"GET {a.path} HTTP/1.1\r\nHost: {a.sni or a.host}\r\nConnection: close\r\n\r\n"
    s.sendall(req.encode())
    data = b""
    while True:
        chunk = s.recv(65536)
        if not chunk:
            break
        data += chunk
    head, _, body = data.partition(b"\r\n\r\n")
    out = dict(
        facts,
        status=int(head.split(b" ")[1]) if head else 0,
        head=head.decode("latin-1"),
        body=body.decode("latin-1"),
    )
    session = s.session
    s.close()
    return out, session


try:
    out, session = once()
    if a.resume:
        again, _ = once(session)
        out["resumed"] = again["reused"]
    print(json.dumps(out))
except (ssl.SSLError, OSError) as e:
    print(json.dumps({"error": str(e)}))
