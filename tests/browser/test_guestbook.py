"""examples/guestbook in Chromium: sign in through the form, post
`<script>alert(1)</script>` and see it as text (no script element, no
alert, nothing blocked by the CSP because nothing ran), switch the theme
through its signed cookie, and a POST from the page without the CSRF
token is refused with 403 while the same POST with it passes.

The server is `example-guestbook` (run.py builds it; EXAMPLE_GUESTBOOK_BIN
overrides).
"""

import os

from harness import ROOT, BrowserTest, wait_until

ATTACK = "<script>alert(1)</script>"


def example_guestbook():
    """Path of the example-guestbook binary: $EXAMPLE_GUESTBOOK_BIN, else the debug build."""
    path = os.environ.get("EXAMPLE_GUESTBOOK_BIN") or os.path.join(
        os.environ.get("CARGO_TARGET_DIR", os.path.join(ROOT, "target")), "debug", "example-guestbook"
    )
    if not os.access(path, os.X_OK):
        raise RuntimeError(
            f"no example-guestbook binary at {path}: run `cargo build -p example-guestbook` in examples/ "
            "or set EXAMPLE_GUESTBOOK_BIN"
        )
    return path


def post_from_page(browser, body):
    """POSTs an urlencoded `body` to /posts with fetch() from the page (same
    origin, with the page's cookies); returns the final status."""
    result = browser.driver.execute_async_script(
        """
        const [body, done] = arguments;
        fetch('/posts', {method: 'POST', body: new URLSearchParams(body), credentials: 'same-origin'})
          .then(r => done({status: r.status}))
          .catch(e => done({error: String(e)}));
        """,
        body,
    )
    if "error" in result:
        raise AssertionError(f"fetch failed: {result['error']}")
    return result["status"]


def alert_open(browser):
    from selenium.common.exceptions import NoAlertPresentException

    try:
        browser.driver.switch_to.alert
        return True
    except NoAlertPresentException:
        return False


class Guestbook(BrowserTest):
    def start(self):
        server = self.server([example_guestbook(), "--listen", "tcp://127.0.0.1:{port}"], exit_status=0)
        browser = self.browser()
        browser.get(server.url("/"))
        return server, browser

    def sign_in(self, browser):
        browser.js(
            "document.getElementById('user-name').value = 'demo';"
            "document.getElementById('password').value = 'guestbook';"
            "document.getElementById('sign-in').click();"
        )
        wait_until(
            lambda: browser.js("const u = document.getElementById('user'); return u && u.textContent") == "demo",
            "the page to say who is signed in",
        )
        browser.wait_loaded()

    def test_markup_posted_is_shown_as_text(self):
        server, browser = self.start()
        self.assertTrue(browser.js("return !!document.getElementById('login')"))
        self.sign_in(browser)
        browser.js(
            "document.getElementById('text').value = arguments[0];"
            "document.getElementById('send').click();",
            ATTACK,
        )
        wait_until(
            lambda: browser.js(
                "return [...document.querySelectorAll('#posts .post .text')].map(p => p.textContent)"
            )
            == [ATTACK],
            "the post to be shown",
        )
        browser.wait_loaded()
        # Shown as text: visible, no element made of it, no alert.
        self.assertIn(ATTACK, browser.js("return document.getElementById('posts').innerText"))
        self.assertEqual(browser.js("return document.querySelectorAll('#posts script, main script').length"), 0)
        self.assertFalse(alert_open(browser))
        self.assertEqual(browser.js("return document.querySelector('#posts .author').textContent"), "demo")
        # No console error: nothing was blocked by the CSP, since nothing
        # tried to run.
        self.assertEqual(browser.console_errors(), [])
        # A second visitor sees it as text too.
        other = self.browser()
        other.get(server.url("/"))
        self.assertEqual(other.js("return document.querySelector('#posts .post .text').textContent"), ATTACK)
        self.assertFalse(alert_open(other))

    def test_a_post_without_the_csrf_token_is_refused(self):
        server, browser = self.start()
        self.sign_in(browser)
        self.assertEqual(post_from_page(browser, {"text": "forged"}), 403)
        self.assertEqual(post_from_page(browser, {"text": "forged", "csrf_token": "A" * 86}), 403)
        token = browser.js("return document.querySelector('#post input[name=csrf_token]').value")
        # The same request with the page's token passes (and is followed to the page).
        self.assertEqual(post_from_page(browser, {"text": "with the token", "csrf_token": token}), 200)
        browser.get(server.url("/"))
        texts = browser.js("return [...document.querySelectorAll('#posts .post .text')].map(p => p.textContent)")
        self.assertEqual(texts, ["with the token"])

    def test_the_theme_is_kept_across_pages(self):
        server, browser = self.start()
        self.assertEqual(browser.js("return document.body.className"), "theme-light")
        light = browser.js("return getComputedStyle(document.body).backgroundColor")
        browser.js("document.querySelector('#theme button').click()")
        wait_until(lambda: browser.js("return document.body.className") == "theme-dark", "the dark theme")
        browser.wait_loaded()
        self.assertNotEqual(browser.js("return getComputedStyle(document.body).backgroundColor"), light)
        # The cookie is HttpOnly: the page's scripts cannot read it.
        self.assertNotIn("theme=", browser.js("return document.cookie"))
        browser.get(server.url("/"))
        self.assertEqual(browser.js("return document.body.className"), "theme-dark")
        self.assertEqual(browser.console_errors(), [])
