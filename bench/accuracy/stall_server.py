#!/usr/bin/env python3
"""A keep-alive HTTP/1.1 server that stops answering for one second.

Usage: stall_server.py PORT [STALL_AFTER_SECONDS] [STALL_SECONDS]

Every request gets a tiny 200 response at once, except that from
STALL_AFTER seconds after the first request (default 2) and for STALL
seconds (default 1) the whole server answers nothing; the requests that
arrive then are answered when the stall ends. This is the wrk2 test of
coordinated omission: an open-loop load generator must show the stall in
its high percentiles.
"""
import asyncio
import sys
import time

RESPONSE = b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\nContent-Type: text/plain\r\n\r\nok"


class Clock:
    first = None


async def handle(reader, writer, stall_after, stall):
    try:
        while True:
            head = await reader.readuntil(b"\r\n\r\n")
            now = time.monotonic()
            if Clock.first is None:
                Clock.first = now
            start = Clock.first + stall_after
            if start <= now < start + stall:
                await asyncio.sleep(start + stall - now)
            writer.write(RESPONSE)
            await writer.drain()
            if b"connection: close" in head.lower():
                break
    except (asyncio.IncompleteReadError, ConnectionError):
        pass
    finally:
        writer.close()


async def main():
    port = int(sys.argv[1])
    stall_after = float(sys.argv[2]) if len(sys.argv) > 2 else 2.0
    stall = float(sys.argv[3]) if len(sys.argv) > 3 else 1.0
    server = await asyncio.start_server(
        lambda r, w: handle(r, w, stall_after, stall), "127.0.0.1", port, backlog=1024
    )
    async with server:
        await server.serve_forever()


if __name__ == "__main__":
    asyncio.run(main())
