#!/usr/bin/env python3
"""User-space instructions per WebSocket message of an echo server binary,
from valgrind --tool=callgrind (counts repeat exactly from run to run).

    instructions-ws.py echo BIN...      64-byte text echo on one connection:
                                        (I(18,000) - I(2,000)) / 16,000
    instructions-ws.py fanout BIN...    one 100-byte message on /broadcast to
                                        1,000 receivers, (I(12 rounds) -
                                        I(2 rounds)) / 10,000 deliveries

CALLGRIND_KEEP=DIR keeps every run's callgrind output in DIR (for
callgrind_annotate). Each BIN is an `example-ws-echo` build, started as
`BIN --listen tcp://127.0.0.1:PORT --workers 1` under callgrind."""
import os, socket, struct, subprocess, sys, tempfile, time, base64, re

def free_port():
    s = socket.socket(); s.bind(("127.0.0.1", 0)); p = s.getsockname()[1]; s.close(); return p

def connect(port, path):
    s = socket.create_connection(("127.0.0.1", port), timeout=60)
    s.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    key = base64.b64encode(os.urandom(16)).decode()
    s.sendall((f"GET {path} HTTP/1.1\r\nHost: 127.0.0.1\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n"
               f"Sec-WebSocket-Key: {key}\r\nSec-WebSocket-Version: 13\r\n\r\n").encode())
    head = b""
    while b"\r\n\r\n" not in head:
        chunk = s.recv(4096)
        if not chunk:
            raise SystemExit("handshake: connection closed")
        head += chunk
    assert head.startswith(b"HTTP/1.1 101"), head[:40]
    return s, head[head.index(b"\r\n\r\n") + 4:]

def frame(payload, opcode=1):
    mask = os.urandom(4)
    n = len(payload)
    head = bytes([0x80 | opcode]) + (bytes([0x80 | n]) if n < 126 else bytes([0x80 | 126]) + struct.pack(">H", n))
    return head + mask + bytes(b ^ mask[i % 4] for i, b in enumerate(payload))

def read_frame(s, buf):
    while True:
        if len(buf) >= 2:
            n = buf[1] & 0x7F; off = 2
            if n == 126:
                if len(buf) < 4: n = None
                else: n = struct.unpack(">H", buf[2:4])[0]; off = 4
            if n is not None and len(buf) >= off + n:
                return buf[off:off + n], buf[off + n:]
        chunk = s.recv(65536)
        if not chunk:
            raise SystemExit("connection closed")
        buf += chunk

def total(out):
    for line in open(out):
        if line.startswith("summary:") or line.startswith("totals:"):
            return int(line.split()[1])
    raise SystemExit("no totals in " + out)

def run(bin_, mode, n):
    port = free_port()
    out = tempfile.mktemp(prefix="cg-ws.")
    srv = subprocess.Popen(["valgrind", "--tool=callgrind", f"--callgrind-out-file={out}", bin_,
                            "--listen", f"tcp://127.0.0.1:{port}", "--workers", "1"],
                           stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        for _ in range(600):
            try:
                socket.create_connection(("127.0.0.1", port), 1).close(); break
            except OSError:
                time.sleep(0.1)
        if mode == "echo":
            s, buf = connect(port, "/echo")
            msg = b"x" * 64
            for _ in range(n):
                s.sendall(frame(msg))
                got, buf = read_frame(s, buf)
                assert got == msg
            s.sendall(frame(struct.pack(">H", 1000), opcode=8))
            read_frame(s, buf)
            s.close()
        else:
            receivers = [connect(port, "/broadcast") for _ in range(1000)]
            pub, pbuf = connect(port, "/broadcast")
            for r in range(n):
                msg = (b"round %06d " % r).ljust(100, b"y")
                pub.sendall(frame(msg))
                _, pbuf = read_frame(pub, pbuf)   # the publisher is in the group too
                for i, (s, b) in enumerate(receivers):
                    got, b = read_frame(s, b)
                    assert got == msg
                    receivers[i] = (s, b)
            for s, _ in receivers + [(pub, pbuf)]:
                s.close()
        time.sleep(0.5)
    finally:
        srv.terminate(); srv.wait(timeout=120)
    t = total(out)
    keep = os.environ.get("CALLGRIND_KEEP")
    if keep:
        os.makedirs(keep, exist_ok=True)
        os.replace(out, os.path.join(keep, f"callgrind.{mode}.{n}.{os.path.basename(bin_)}"))
    else:
        os.unlink(out)
    return t

def main():
    if len(sys.argv) < 3 or sys.argv[1] not in ("echo", "fanout"):
        raise SystemExit(__doc__)
    mode = sys.argv[1]
    small, big, per = ((2000, 18000, 16000) if mode == "echo" else (2, 12, 10 * 1001))
    for b in sys.argv[2:]:
        a, z = run(b, mode, small), run(b, mode, big)
        print(f"{b}: {mode}: {(z - a) / per:,.0f} instructions per {'message' if mode == 'echo' else 'delivery'}")

main()
