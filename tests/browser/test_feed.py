"""`celer serve --feed NAME=file:PATH`: the /feeds/ page lists the feeds and
shows one live over SSE; a change to the file shows up on the page, an
invalid one does not."""

import json
import os

from selenium.webdriver.common.by import By

from harness import BrowserTest, celer, wait_until


def write_atomically(path, text):
    with open(path + ".tmp", "w") as f:
        f.write(text)
    os.replace(path + ".tmp", path)


class FeedPage(BrowserTest):
    def test_the_page_shows_each_new_version_of_the_file(self):
        root = self.tempdir()
        scores, weather = os.path.join(root, "scores.json"), os.path.join(root, "weather.json")
        write_atomically(scores, json.dumps({"home": 1, "away": 0}))
        write_atomically(weather, json.dumps({"sky": "clear"}))
        server = self.server(
            [
                celer(), "serve", "--listen", "tcp://127.0.0.1:{port}",
                "--feed", f"scores=file:{scores}", "--feed", f"weather=file:{weather}",
            ],
            exit_status=0,
        )
        browser = self.browser()
        browser.get(server.url("/feeds/"))
        driver = browser.driver
        self.assertEqual(driver.title, "Live feeds")

        def shown():
            return browser.js("return JSON.parse(document.getElementById('doc').textContent || 'null')")

        wait_until(lambda: shown() == {"home": 1, "away": 0}, "the first version on the page")
        buttons = [b.get_attribute("data-feed") for b in driver.find_elements(By.CSS_SELECTOR, "nav button")]
        self.assertEqual(buttons, ["scores", "weather"])
        first = browser.js("return document.getElementById('doc').dataset.version")
        self.assertEqual(len(first), 32)
        # The browser offered gzip: the event stream came gzip-coded (each
        # version deflated once for every subscriber) and EventSource
        # decoded each event as it arrived.
        stream = [r for r in browser.responses() if r["url"].endswith("/feeds/scores/events")]
        self.assertTrue(stream, "the page's event stream")
        headers = {k.lower(): v for k, v in stream[-1]["headers"].items()}
        self.assertEqual(headers.get("content-encoding"), "gzip")
        self.assertEqual(headers.get("content-type"), "text/event-stream")

        # The file changes: the page shows the new version, pushed.
        write_atomically(scores, json.dumps({"home": 2, "away": 0}))
        wait_until(lambda: shown() == {"home": 2, "away": 0}, "the second version on the page")
        second = browser.js("return document.getElementById('doc').dataset.version")
        self.assertNotEqual(second, first)

        # Not JSON: refused, the page keeps the last good version, the
        # status counts the refusal.
        write_atomically(scores, '{"home": 3,')
        status_url = server.url("/feeds/scores/status")
        wait_until(lambda: json.loads(browser.fetch_text(status_url)[1])["rejected_invalid"] >= 1, "the refusal")
        self.assertEqual(shown(), {"home": 2, "away": 0})
        write_atomically(scores, json.dumps({"home": 3, "away": 1}))
        wait_until(lambda: shown() == {"home": 3, "away": 1}, "the third version on the page")

        # The other feed, chosen by a click.
        driver.find_element(By.CSS_SELECTOR, 'nav button[data-feed="weather"]').click()
        wait_until(lambda: shown() == {"sky": "clear"}, "the weather feed on the page")
        self.assertTrue(driver.current_url.endswith("#weather"))
        self.assertEqual(browser.console_errors(), [])
