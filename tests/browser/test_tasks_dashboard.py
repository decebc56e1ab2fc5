"""The task API's dashboard (`celer serve --tasks`, /tasks/ui) in Chromium,
with API keys required: the page asks for a key, then follows the
store-wide event stream (a streamed fetch carrying the key); an `echo`
task submitted through the form reaches `succeeded` in the list without a
reload, a long one is cancelled with its button and shows `cancelled`, the
counts follow, and nothing is blocked by the page's Content-Security-Policy.
"""

import json
import subprocess

from selenium.webdriver.common.by import By

from harness import BrowserTest, celer, wait_until


def text(browser, selector):
    return browser.js("const e = document.querySelector(arguments[0]); return e ? e.textContent : null", selector)


def row_state(browser, task_id):
    return text(browser, f'tr[data-id="{task_id}"] td.state')


class TasksDashboard(BrowserTest):
    def test_submit_watch_and_cancel(self):
        data = self.tempdir()
        created = subprocess.run(
            [celer(), "tasks", "keys", "create", "--data-dir", data, "--name", "browser", "--json"],
            capture_output=True,
            timeout=20,
            check=True,
        )
        token = json.loads(created.stdout)["token"]
        server = self.server(
            [celer(), "serve", "--listen", "tcp://127.0.0.1:{port}", "--tasks", "--tasks-require-key", "--data-dir", data],
            exit_status=0,
        )
        browser = self.browser()
        browser.get(server.url("/tasks/ui"))
        driver = browser.driver
        self.assertEqual(driver.title, "Tasks · Celer")

        # No key yet: the page asks for one.
        wait_until(lambda: browser.js("return !document.querySelector('#auth').hidden"), "the key form")
        driver.find_element(By.ID, "token").send_keys(token)
        driver.find_element(By.CSS_SELECTOR, "#auth-form button").click()
        wait_until(lambda: text(browser, "#live") == "live", "the event stream to be live")
        wait_until(lambda: text(browser, "#count-succeeded") == "0", "the counts")
        # The style sheet applied (no inline style to block).
        self.assertNotEqual(browser.js("return getComputedStyle(document.querySelector('.counts')).display"), "block")

        # An echo task with a delay: queued when submitted, then succeeded,
        # through the event stream alone.
        field = driver.find_element(By.ID, "input")
        field.clear()
        field.send_keys('{"value": "hello", "delay_ms": 1500}')
        driver.find_element(By.CSS_SELECTOR, "#submit-form button").click()
        wait_until(lambda: text(browser, "#submit-status") == "Submitted task #1.", "the submit")
        self.assertIn(row_state(browser, 1), ("queued", "running"))
        wait_until(lambda: row_state(browser, 1) == "succeeded", "task 1 to succeed in the list")
        wait_until(lambda: text(browser, "#count-succeeded") == "1", "the succeeded count")
        self.assertEqual(text(browser, 'tr[data-id="1"] td.actions a.result'), "result")

        # A long one, cancelled with its button while it runs.
        field.clear()
        field.send_keys('{"value": "long", "delay_ms": 600000}')
        driver.find_element(By.CSS_SELECTOR, "#submit-form button").click()
        wait_until(lambda: row_state(browser, 2) == "running", "task 2 to run")
        driver.find_element(By.CSS_SELECTOR, 'tr[data-id="2"] button.cancel').click()
        wait_until(lambda: row_state(browser, 2) == "cancelled", "task 2 to be cancelled")
        wait_until(lambda: text(browser, "#count-cancelled") == "1", "the cancelled count")
        self.assertEqual(row_state(browser, 1), "succeeded")
        self.assertFalse(browser.js("return !!document.querySelector('tr[data-id=\"2\"] button.cancel')"))

        # Bad input is refused with the API's reason, shown on the page.
        field.clear()
        field.send_keys('{"delay_ms": 1}')
        driver.find_element(By.CSS_SELECTOR, "#submit-form button").click()
        wait_until(lambda: "invalid input" in (text(browser, "#submit-status") or ""), "the refusal")

        # The only errors: the first requests without a key (401) and the
        # bad submit (422); no script or style was blocked.
        for message in browser.console_errors():
            self.assertTrue(
                "401 (Unauthorized)" in message or "422 (Unprocessable" in message, message
            )
