"""examples/chat in Chromium: pages of a room see each other's messages over
WebSocket, a page forced onto server-sent events (?transport=sse) sees them
and is seen, a REST POST reaches every page of the room, a page of another
room sees none of it, markup in a message is shown as text, a refused
message says why, and a page whose WebSocket fails falls back to
server-sent events by itself.

The server is `example-chat` (run.py builds it; EXAMPLE_CHAT_BIN overrides).
"""

import json
import os
import subprocess
import urllib.request

from harness import ROOT, BrowserTest, wait_until


def example_chat():
    """Path of the example-chat binary: $EXAMPLE_CHAT_BIN, else the debug build."""
    path = os.environ.get("EXAMPLE_CHAT_BIN") or os.path.join(
        os.environ.get("CARGO_TARGET_DIR", os.path.join(ROOT, "target")), "debug", "example-chat"
    )
    if not os.access(path, os.X_OK):
        raise RuntimeError(
            f"no example-chat binary at {path}: run `cargo build -p example-chat` in examples/ "
            "or set EXAMPLE_CHAT_BIN"
        )
    return path


def open_room(browser, server, room, transport):
    """Opens the room's page and waits until it is connected; checks that it
    connected with `transport` ("websocket" or "sse")."""
    query = "?transport=sse" if transport == "sse" else ""
    browser.get(server.url(f"/rooms/{room}{query}"))
    wait_until(lambda: status(browser)["state"] == "open", f"the page of {room} to connect")
    assert status(browser)["transport"] == transport, status(browser)


def status(browser):
    return browser.js(
        "const s = document.getElementById('status');"
        "return {state: s.dataset.state, transport: s.dataset.transport, text: s.textContent};"
    )


def say(browser, name, text):
    """Types a name and a message into the page's form and submits it."""
    browser.js(
        "document.getElementById('name').value = arguments[0];"
        "document.getElementById('text').value = arguments[1];"
        "document.getElementById('send').requestSubmit();",
        name,
        text,
    )


def messages(browser):
    """The messages the page shows, as [from, text] pairs, oldest first."""
    return browser.js(
        "return [...document.querySelectorAll('#log li.message')]"
        ".map(li => [li.querySelector('.from').textContent, li.querySelector('.text').textContent]);"
    )


def wait_shown(browser, who, name, text):
    wait_until(lambda: [name, text] in messages(browser), f"{who} to show {name}: {text!r}")


def post(server, room, body):
    """POSTs a JSON body to the room as a REST client; returns (status, answer)."""
    req = urllib.request.Request(
        server.url(f"/rooms/{room}/messages"),
        data=json.dumps(body).encode(),
        headers={"Content-Type": "application/json"},
        method="POST",
    )
    try:
        with urllib.request.urlopen(req, timeout=10) as res:
            return res.status, json.loads(res.read())
    except urllib.error.HTTPError as err:
        return err.code, json.loads(err.read())


class Chat(BrowserTest):
    def start(self):
        return self.server([example_chat(), "--listen", "tcp://127.0.0.1:{port}"], exit_status=0)

    def test_websocket_and_sse_pages_see_each_other(self):
        server = self.start()
        ann, bob, sue, olga = (self.browser() for _ in range(4))

        # Olga is in another room the whole time.
        open_room(olga, server, "elsewhere", "websocket")
        say(olga, "olga", "anyone here?")
        wait_shown(olga, "olga", "olga", "anyone here?")

        # Ann comes through the lobby's form.
        ann.get(server.url("/"))
        ann.js(
            "document.getElementById('room-name').value = 'Tea Break';"
            "document.querySelector('form').requestSubmit();"
        )
        ann.wait_navigated(server.url("/rooms/tea-break"))
        wait_until(lambda: status(ann)["state"] == "open", "ann's page to connect")
        self.assertEqual(status(ann)["transport"], "websocket")
        self.assertEqual(ann.driver.title, "#tea-break · Chat")
        # A page is in the room once it sees its own message come back.
        say(ann, "ann", "hello from ann")
        wait_shown(ann, "ann", "ann", "hello from ann")

        open_room(bob, server, "tea-break", "websocket")
        say(bob, "bob", "hello from bob")
        wait_shown(bob, "bob", "bob", "hello from bob")
        wait_shown(ann, "ann", "bob", "hello from bob")
        say(ann, "ann", "hi bob")
        wait_shown(bob, "bob", "ann", "hi bob")

        # Sue's page is forced onto server-sent events, and sends by POST.
        open_room(sue, server, "tea-break", "sse")
        say(sue, "sue", "hello from sse")
        for page, who in ((sue, "sue"), (ann, "ann"), (bob, "bob")):
            wait_shown(page, who, "sue", "hello from sse")
        say(bob, "bob", "hi sue")
        wait_shown(sue, "sue", "bob", "hi sue")
        wait_shown(ann, "ann", "bob", "hi sue")

        # A REST client posts into the room: every page shows it.
        code, answer = post(server, "tea-break", {"from": "cron", "text": "tea is ready"})
        self.assertEqual(code, 202, answer)
        self.assertEqual(answer, {"room": "tea-break", "delivered": {"websocket": 2, "sse": 1}})
        for page, who in ((ann, "ann"), (bob, "bob"), (sue, "sue")):
            wait_shown(page, who, "cron", "tea is ready")

        # Markup in a message is text: shown as it was typed, and nothing of
        # it becomes an element or runs.
        attack = '<img src=x onerror="window.pwned = 1"><script>window.pwned = 2</script>'
        say(ann, '<i onclick="pwned=3">ann</i>', attack)
        for page, who in ((ann, "ann"), (bob, "bob"), (sue, "sue")):
            wait_shown(page, who, '<i onclick="pwned=3">ann</i>', attack)
            self.assertEqual(
                page.js("return [document.querySelectorAll('#log img, #log script, #log i').length, window.pwned]"),
                [0, None],
            )

        # Every page shows the room's messages in the one order they were said.
        said = [
            ["bob", "hello from bob"],
            ["ann", "hi bob"],
            ["sue", "hello from sse"],
            ["bob", "hi sue"],
            ["cron", "tea is ready"],
            ['<i onclick="pwned=3">ann</i>', attack],
        ]
        self.assertEqual(messages(ann), [["ann", "hello from ann"]] + said)
        self.assertEqual(messages(bob), said)
        self.assertEqual(messages(sue), said[2:])

        # The other room saw none of it: its last message, said after all of
        # the above were shown, comes right after its first.
        say(olga, "olga", "quiet here")
        wait_shown(olga, "olga", "olga", "quiet here")
        self.assertEqual(messages(olga), [["olga", "anyone here?"], ["olga", "quiet here"]])

        for page in (ann, bob, sue, olga):
            self.assertEqual(page.console_errors(), [])

    def test_a_refused_message_says_why(self):
        server = self.start()
        ws, sse = self.browser(), self.browser()
        open_room(ws, server, "r", "websocket")
        open_room(sse, server, "r", "sse")
        for page in (ws, sse):
            say(page, " ", "nameless")
            wait_until(
                lambda: "Not sent: from is empty" in page.js("return document.getElementById('log').innerText"),
                "the page to say why its message was not sent",
            )
            self.assertEqual(messages(page), [])
        # The SSE page's refusal is a 422 the browser logs; nothing else is.
        self.assertEqual(ws.console_errors(), [])
        errors = sse.console_errors()
        self.assertEqual(len(errors), 1, errors)
        self.assertIn("422", errors[0])

    def test_a_page_falls_back_to_sse_when_websocket_fails(self):
        server = self.start()
        blocked, ws = self.browser(), self.browser()
        # This page's WebSocket handshakes fail, as behind a proxy that does
        # not pass WebSockets: they are sent to a path that answers 404.
        blocked.driver.execute_cdp_cmd(
            "Page.addScriptToEvaluateOnNewDocument",
            {
                "source": "window.WebSocket = class extends WebSocket {"
                " constructor(url, ...rest) { super(url + '-blocked', ...rest); } };"
            },
        )
        blocked.get(server.url("/rooms/fallback"))
        wait_until(lambda: status(blocked)["state"] == "open", "the blocked page to connect")
        self.assertEqual(status(blocked)["transport"], "sse")
        self.assertIn(
            "WebSocket unavailable; using server-sent events.",
            blocked.js("return document.getElementById('log').innerText"),
        )
        open_room(ws, server, "fallback", "websocket")
        say(ws, "ws", "over a WebSocket")
        wait_shown(blocked, "the fallen-back page", "ws", "over a WebSocket")
        say(blocked, "sse", "over events and POST")
        wait_shown(ws, "the WebSocket page", "sse", "over events and POST")
        # The only errors are the failed handshake's.
        self.assertEqual(ws.console_errors(), [])
        errors = blocked.console_errors()
        self.assertTrue(errors and all("/rooms/fallback/ws-blocked" in e for e in errors), errors)


class ChatOverHttp2(BrowserTest):
    """The chat served over TLS: Chromium speaks HTTP/2 (ALPN) and opens its
    WebSockets on that connection (RFC 8441 extended CONNECT), which the
    room's member list reports."""

    def test_websocket_over_http2_pages_see_each_other(self):
        tmp = self.tempdir()
        cert, key = os.path.join(tmp, "cert.pem"), os.path.join(tmp, "key.pem")
        subprocess.run(
            ["openssl", "req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256",
             "-nodes", "-keyout", key, "-out", cert, "-days", "1", "-subj", "/CN=localhost",
             "-addext", "subjectAltName=IP:127.0.0.1,DNS:localhost"],
            check=True, capture_output=True, timeout=30,
        )
        server = self.server(
            [example_chat(), "--listen-tls", "tcp://127.0.0.1:{port}", "--tls-cert", cert, "--tls-key", key],
            tls=True, exit_status=0,
        )
        ann, bob = self.browser(insecure_tls=True), self.browser(insecure_tls=True)
        for page in (ann, bob):
            open_room(page, server, "h2-room", "websocket")
            self.assertEqual(page.js("return performance.getEntries()[0].nextHopProtocol"), "h2")
        say(ann, "ann", "over one connection")
        wait_shown(bob, "bob", "ann", "over one connection")
        say(bob, "bob", "multiplexed")
        wait_shown(ann, "ann", "bob", "multiplexed")
        # The server lists each WebSocket with the HTTP version it came on.
        status_code, text = ann.fetch_text(server.url("/rooms/h2-room/members"))
        self.assertEqual(status_code, 200, text)
        members = json.loads(text)
        self.assertEqual([m["http"] for m in members["websocket"]], ["HTTP/2", "HTTP/2"], members)
        for page in (ann, bob):
            self.assertEqual(page.console_errors(), [])
