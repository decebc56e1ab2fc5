#!/usr/bin/env python3
"""The connection limit is exact (issue: with per-core workers the last
permit could sit with an idle worker's accept loop).

`celer serve --workers W --max-connections N`; N clients connect one after
another, each sends one request, reads its answer and stays connected
(keep-alive). All N must be answered; client N+1 must wait; once one
client leaves, client N+1 must be answered.

    tests/hostile/exact_limit.py                  # N=50, W=2 and W=4
    tests/hostile/exact_limit.py --limit 200 --workers 2

Exit status 1 when a client within the limit is not answered, when the
client past the limit is answered while the limit is full, or when it is
not answered after a client leaves. (Each wait is bounded by --wait
seconds; a server that needs longer counts as not answering.)
"""

import argparse
import os
import socket
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import common  # noqa: E402

REQUEST = b"GET /a.txt HTTP/1.1\r\nHost: x\r\n\r\n"


def ask(sock, wait):
    """Sends one request; True when a whole answer comes within `wait`."""
    sock.settimeout(wait)
    try:
        sock.sendall(REQUEST)
        got = b""
        while not (b"\r\n\r\n" in got and got.endswith(b"alpha")):
            chunk = sock.recv(4096)
            if not chunk:
                return False
            got += chunk
        return True
    except (socket.timeout, ConnectionResetError, BrokenPipeError):
        return False


def run(root, work, limit, workers, threading, wait):
    server = common.start_celer(root, work, ["--workers", str(workers), "--threading", threading,
                                             "--max-connections", str(limit), "--log-level", "error"])
    clients, answered = [], 0
    try:
        for _ in range(limit):
            s = socket.create_connection(("127.0.0.1", server.port), timeout=wait)
            clients.append(s)
            answered += ask(s, wait)
        extra = socket.create_connection(("127.0.0.1", server.port), timeout=wait)
        early = ask(extra, min(wait, 1.0))
        clients.pop(0).close()
        late = early or ask_again(extra, wait)
        extra.close()
    finally:
        for s in clients:
            s.close()
        server.stop()
    ok = answered == limit and not early and late
    print(f"{'ok  ' if ok else 'FAIL'} --workers {workers} --threading {threading} --max-connections {limit}: "
          f"{answered} of {limit} answered; client {limit + 1} "
          f"{'answered while full' if early else 'waited'}"
          f"{'' if early else (' and was answered once one left' if late else ' and was NOT answered once one left')}")
    return ok


def ask_again(sock, wait):
    """The request already sent on `sock` is answered within `wait`."""
    sock.settimeout(wait)
    got = b""
    try:
        while not (b"\r\n\r\n" in got and got.endswith(b"alpha")):
            chunk = sock.recv(4096)
            if not chunk:
                return False
            got += chunk
        return True
    except (socket.timeout, ConnectionResetError):
        return False


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--limit", type=int, default=50)
    ap.add_argument("--workers", type=int, action="append")
    ap.add_argument("--wait", type=float, default=3.0)
    args = ap.parse_args()
    work = common.workdir()
    root = os.path.join(work, "root")
    os.makedirs(root)
    with open(os.path.join(root, "a.txt"), "w") as f:
        f.write("alpha")
    results = []
    for workers in args.workers or [2, 4]:
        results.append(run(root, work, args.limit, workers, "per-core", args.wait))
    results.append(run(root, work, args.limit, 2, "work-stealing", args.wait))
    return 0 if all(results) else 1


if __name__ == "__main__":
    sys.exit(main())
