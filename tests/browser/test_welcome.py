"""The embedded welcome site of `celer serve`, as Chromium shows it."""

from selenium.webdriver.common.by import By

from harness import BrowserTest, celer


def serve_welcome(test, *flags, tls=False):
    return test.server([celer(), "serve", "--listen", "tcp://127.0.0.1:{port}", *flags], tls=tls, exit_status=0)


class WelcomeSite(BrowserTest):
    def check_renders(self, server, browser):
        browser.get(server.url("/"))
        driver = browser.driver
        self.assertEqual(driver.title, "Celer")
        self.assertEqual(driver.current_url, server.url("/"))

        # The visible content, as a user sees it (rendered text, not source).
        h1 = driver.find_element(By.TAG_NAME, "h1")
        self.assertTrue(h1.is_displayed())
        self.assertEqual(h1.text, "Celer")
        text = driver.find_element(By.TAG_NAME, "body").text
        self.assertIn("A native web server and web application framework in Rust.", text)
        self.assertIn("If you can read this, celer serve is running.", text)
        headings = [h.text for h in driver.find_elements(By.TAG_NAME, "h2")]
        self.assertEqual(headings, ["Serve a directory", "Listen anywhere", "What is inside"])

        # Every resource the page refers to was fetched and used: the style
        # sheet applied (its custom property and layout), the logo decoded.
        refs = browser.js(
            "return [...document.querySelectorAll('link[href], img[src], script[src], a[href]')]"
            ".map(e => e.href || e.src)"
        )
        self.assertIn(server.url("/style.css"), refs)
        self.assertIn(server.url("/celer.svg"), refs)
        for ref in refs:
            if ref.startswith(server.origin):
                status = browser.response(ref)["status"]
                self.assertEqual(status, 200, ref)
        self.assertEqual(browser.js("return document.styleSheets.length"), 1)
        accent = browser.js(
            "return getComputedStyle(document.documentElement).getPropertyValue('--accent').trim()"
        )
        self.assertNotEqual(accent, "", "style.css did not apply")
        self.assertNotEqual(browser.js("return getComputedStyle(document.querySelector('main')).maxWidth"), "none")
        logo = driver.find_element(By.CSS_SELECTOR, "header img")
        self.assertTrue(browser.js("return arguments[0].complete && arguments[0].naturalWidth > 0", logo))
        self.assertEqual(browser.response(server.url("/celer.svg"))["mimeType"], "image/svg+xml")

        # Anchors on the page lead somewhere that answers 200.
        for href in browser.js("return [...document.querySelectorAll('a[href]')].map(a => a.href)"):
            status, _ = browser.fetch_text(href)
            self.assertEqual(status, 200, href)

        self.assertEqual(browser.console_errors(), [])

    def test_renders_over_http(self):
        server = serve_welcome(self)
        browser = self.browser()
        self.check_renders(server, browser)
        self.assertEqual(browser.response(server.url("/"))["protocol"], "http/1.1")

    def test_renders_over_https_with_a_self_signed_certificate(self):
        server = serve_welcome(self, "--self-signed", tls=True)
        browser = self.browser(insecure_tls=True)
        self.check_renders(server, browser)
        self.assertEqual(browser.js("return location.protocol"), "https:")
        self.assertTrue(browser.js("return window.isSecureContext"))

    def test_uses_http2_over_tls(self):
        server = serve_welcome(self, "--self-signed", tls=True)
        browser = self.browser(insecure_tls=True)
        browser.get(server.url("/"))
        protocols = browser.js("return performance.getEntries().map(e => [e.name, e.nextHopProtocol])")
        self.assertEqual(protocols[0], [server.url("/"), "h2"])
        # The sub-resources share the connection: h2 too.
        by_name = dict(protocols)
        self.assertEqual(by_name[server.url("/style.css")], "h2")
        self.assertEqual(by_name[server.url("/celer.svg")], "h2")
        self.assertEqual(browser.driver.title, "Celer")
        self.assertEqual(browser.console_errors(), [])

    def test_no_http2_flag_makes_the_browser_use_http1_over_tls(self):
        server = serve_welcome(self, "--self-signed", "--no-http2", tls=True)
        browser = self.browser(insecure_tls=True)
        browser.get(server.url("/"))
        protocol = browser.js("return performance.getEntries()[0].nextHopProtocol")
        self.assertEqual(protocol, "http/1.1")
        self.assertEqual(browser.driver.title, "Celer")
        self.assertEqual(browser.console_errors(), [])

    def test_a_missing_page_is_a_404_the_browser_reports(self):
        server = serve_welcome(self)
        browser = self.browser()
        browser.get(server.url("/no-such-page"))
        self.assertEqual(browser.response(server.url("/no-such-page"))["status"], 404)
        errors = browser.console_errors()
        self.assertTrue(any("404" in e for e in errors), errors)

    def test_http_redirects_to_https(self):
        server = self.server(
            [
                celer(), "serve", "--self-signed",
                "--listen", "tcp://127.0.0.1:{port}",
                "--redirect-http", "tcp://127.0.0.1:{port1}",
            ],
            tls=True,
            ports=2,
            exit_status=0,
        )
        browser = self.browser(insecure_tls=True)
        plain = server.url("/style.css?v=1", port=server.ports[1]).replace("https:", "http:")
        browser.get(plain)
        # 308 to https on the same host and target, at the TLS listener's port.
        self.assertEqual(browser.response(plain)["status"], 308)
        self.assertEqual(browser.driver.current_url, server.url("/style.css?v=1"))
        self.assertEqual(browser.response(server.url("/style.css?v=1"))["status"], 200)
        self.assertIn("--accent", browser.js("return document.body.innerText"))
