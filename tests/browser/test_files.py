"""`celer serve --root DIR`: directory listings a user clicks through,
downloads, and precompressed siblings the browser decodes."""

import gzip
import os
import struct
import urllib.parse

import brotli
import zstandard
from selenium.webdriver.common.by import By

from harness import BrowserTest, celer

# A 1x1 icon: ICONDIR, one ICONDIRENTRY, a 32-bit BMP (header, one pixel,
# the AND mask row padded to 4 bytes).
FAVICON = (
    struct.pack("<HHH", 0, 1, 1)
    + struct.pack("<BBBBHHII", 1, 1, 0, 0, 1, 32, 40 + 4 + 4, 22)
    + struct.pack("<IiiHHIIiiII", 40, 1, 2, 1, 32, 0, 8, 0, 0, 0, 0)
    + bytes([0x1B, 0x54, 0xD2, 0xFF])
    + bytes(4)
)
README = "Notes\n\nA file inside a subdirectory, shown as text.\n"
SPACED = "spaces, an ampersand & a percent sign: 100%\n"
UMLAUT = "Grüße aus dem Verzeichnis\n"
# Compressible: the siblings are far smaller than the file, so which one
# travelled shows in the transfer size as well as in Content-Encoding.
SCRIPT = (
    "// generated\n"
    + "".join(f"const line{i} = 'the same words on line {i}';\n" for i in range(300))
    + "document.getElementById('out').textContent = 'script ran: ' + line299;\n"
)
PAGE = '<!doctype html><meta charset="utf-8"><title>Compressed</title><link rel="icon" href="data:,"><p id="out">waiting</p><script src="app.js"></script>\n'
TEXT = "".join(f"{i:05} the quick brown fox jumps over the lazy dog\n" for i in range(2000))


def write(path, data):
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, "wb") as f:
        f.write(data.encode() if isinstance(data, str) else data)


def serve_dir(test, root, *flags, tls=False):
    args = [celer(), "serve", "--root", root, "--listen", "tcp://127.0.0.1:{port}", *flags]
    if tls:
        args.append("--self-signed")
    return test.server(args, tls=tls, exit_status=0)


def link_texts(browser):
    return [a.text for a in browser.driver.find_elements(By.CSS_SELECTOR, "ul a")]


def shown_text(browser):
    """The text of a text/plain document as Chromium renders it (in a <pre>),
    exactly."""
    return browser.js("return document.querySelector('pre').textContent")


class Listing(BrowserTest):
    def make_tree(self):
        root = self.tempdir()
        write(os.path.join(root, "a b & c.txt"), SPACED)
        write(os.path.join(root, "grüße.txt"), UMLAUT)
        write(os.path.join(root, "notes", "readme.txt"), README)
        write(os.path.join(root, "notes", "data.bin"), os.urandom(200_000))
        write(os.path.join(root, ".secret"), "not for listing\n")
        # Chromium asks every page's origin for /favicon.ico when the page
        # names no icon (a listing does not); a site has one.
        write(os.path.join(root, "favicon.ico"), FAVICON)
        return root

    def test_listing_navigates_and_downloads(self):
        root = self.make_tree()
        server = serve_dir(self, root, "--listing")
        downloads = self.tempdir()
        browser = self.browser(downloads=downloads)

        browser.get(server.url("/"))
        self.assertEqual(browser.driver.title, "Index of /")
        self.assertEqual(browser.driver.find_element(By.TAG_NAME, "h1").text, "Index of /")
        # Sorted by name; hidden names left out; directories end in '/'.
        self.assertEqual(link_texts(browser), ["../", "a b & c.txt", "favicon.ico", "grüße.txt", "notes/"])

        # Into the subdirectory by its link.
        browser.click_link("notes/")
        browser.wait_navigated(server.url("/notes/"))
        self.assertEqual(browser.driver.title, "Index of /notes/")
        self.assertEqual(link_texts(browser), ["../", "data.bin", "readme.txt"])

        # A binary file downloads, byte for byte.
        browser.click_link("data.bin")
        with open(os.path.join(root, "notes", "data.bin"), "rb") as f:
            self.assertEqual(browser.wait_download("data.bin"), f.read())
        self.assertEqual(browser.driver.current_url, server.url("/notes/"))

        # A text file opens as text.
        browser.click_link("readme.txt")
        browser.wait_navigated(server.url("/notes/readme.txt"))
        self.assertEqual(shown_text(browser), README)
        self.assertEqual(browser.response(server.url("/notes/readme.txt"))["mimeType"], "text/plain")

        # Back up with "../".
        browser.driver.back()
        browser.wait_navigated(server.url("/notes/"))
        browser.click_link("../")
        browser.wait_navigated(server.url("/"))

        # Names that need escaping in a URL lead to their file.
        for name, content in [("a b & c.txt", SPACED), ("grüße.txt", UMLAUT)]:
            href = browser.click_link(name)
            browser.wait_navigated(href)
            path = urllib.parse.urlsplit(href).path
            self.assertEqual(urllib.parse.unquote(path), "/" + name)
            self.assertEqual(shown_text(browser), content, name)
            browser.driver.back()
            browser.wait_navigated(server.url("/"))

        self.assertEqual(browser.console_errors(), [])

    def test_without_listing_a_directory_is_not_found(self):
        root = self.make_tree()
        server = serve_dir(self, root)
        browser = self.browser()
        browser.get(server.url("/notes/"))
        self.assertEqual(browser.response(server.url("/notes/"))["status"], 404)
        self.assertEqual(browser.driver.find_elements(By.CSS_SELECTOR, "ul a"), [])

    def test_listing_over_https(self):
        root = self.make_tree()
        server = serve_dir(self, root, "--listing", tls=True)
        browser = self.browser(insecure_tls=True)
        browser.get(server.url("/"))
        self.assertEqual(browser.driver.title, "Index of /")
        browser.click_link("notes/")
        browser.wait_navigated(server.url("/notes/"))
        browser.click_link("readme.txt")
        browser.wait_navigated(server.url("/notes/readme.txt"))
        self.assertEqual(shown_text(browser), README)
        self.assertEqual(browser.js("return performance.getEntries()[0].nextHopProtocol"), "h2")
        self.assertEqual(browser.console_errors(), [])


class Precompressed(BrowserTest):
    def make_site(self):
        root = self.tempdir()
        write(os.path.join(root, "index.html"), PAGE)
        write(os.path.join(root, "favicon.ico"), FAVICON)  # asked for by the text pages
        # Every sibling: the server picks by the browser's Accept-Encoding.
        write(os.path.join(root, "app.js"), SCRIPT)
        write(os.path.join(root, "app.js.gz"), gzip.compress(SCRIPT.encode()))
        write(os.path.join(root, "app.js.br"), brotli.compress(SCRIPT.encode()))
        write(os.path.join(root, "app.js.zst"), zstandard.compress(SCRIPT.encode()))
        # One sibling each.
        for ext, compress in [("gz", gzip.compress), ("br", brotli.compress), ("zst", zstandard.compress)]:
            write(os.path.join(root, f"only-{ext}.txt"), TEXT)
            write(os.path.join(root, f"only-{ext}.txt.{ext}"), compress(TEXT.encode()))
        return root

    def accepted(self, browser, url):
        """The codings the browser offered for `url`, in its order."""
        headers = browser.request_headers(url)
        value = next((v for k, v in headers.items() if k.lower() == "accept-encoding"), None)
        self.assertIsNotNone(value, f"no Accept-Encoding recorded for {url}")
        return [c.split(";")[0].strip() for c in value.split(",")]

    def encoding(self, browser, url):
        headers = browser.response(url)["headers"]
        return next((v for k, v in headers.items() if k.lower() == "content-encoding"), None)

    def check(self, server, browser):
        browser.get(server.url("/"))
        # The script was decoded and ran.
        self.assertEqual(
            browser.driver.find_element(By.ID, "out").text, "script ran: the same words on line 299"
        )
        app = server.url("/app.js")
        offered = self.accepted(browser, app)
        preference = ["br", "zstd", "gzip"]  # the server's order
        expected = next(c for c in preference if c in offered)
        self.assertEqual(self.encoding(browser, app), expected)
        self.assertEqual(browser.js("return document.scripts[0].src"), app)
        size = browser.js(
            "return performance.getEntriesByName(arguments[0]).map(e => [e.encodedBodySize, e.decodedBodySize])[0]",
            app,
        )
        self.assertEqual(size[1], len(SCRIPT))
        self.assertLess(size[0], len(SCRIPT) // 4)

        # A file whose only sibling is in one coding, opened by a user.
        for ext, coding in [("gz", "gzip"), ("br", "br"), ("zst", "zstd")]:
            url = server.url(f"/only-{ext}.txt")
            browser.get(url)
            self.assertEqual(shown_text(browser), TEXT, url)
            if coding in self.accepted(browser, url):
                self.assertEqual(self.encoding(browser, url), coding, url)
            else:
                self.assertIsNone(self.encoding(browser, url), url)
            # fetch() decodes the same way.
            self.assertEqual(browser.fetch_text(url), (200, TEXT))
        self.assertEqual(browser.console_errors(), [])
        return offered

    def test_siblings_decoded_over_http(self):
        server = serve_dir(self, self.make_site())
        browser = self.browser()
        offered = self.check(server, browser)
        self.assertIn("gzip", offered)

    def test_siblings_decoded_over_https(self):
        server = serve_dir(self, self.make_site(), tls=True)
        browser = self.browser(insecure_tls=True)
        offered = self.check(server, browser)
        # Over HTTPS Chromium offers brotli: the .br sibling is what travels.
        self.assertIn("br", offered)
        self.assertEqual(self.encoding(browser, server.url("/app.js")), "br")

    def test_no_precompressed_serves_the_file_itself(self):
        server = serve_dir(self, self.make_site(), "--no-precompressed", tls=True)
        browser = self.browser(insecure_tls=True)
        browser.get(server.url("/"))
        self.assertEqual(
            browser.driver.find_element(By.ID, "out").text, "script ran: the same words on line 299"
        )
        self.assertIsNone(self.encoding(browser, server.url("/app.js")))
        # The plain file travels even though the browser accepts gzip.
        browser.get(server.url("/only-gz.txt"))
        self.assertEqual(shown_text(browser), TEXT)
        self.assertIsNone(self.encoding(browser, server.url("/only-gz.txt")))
