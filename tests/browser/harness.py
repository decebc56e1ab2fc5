"""Browser-test harness: a server on a free loopback port, headless Chromium
driven over WebDriver (chromedriver + selenium), both torn down with bounded
timeouts even when a test fails or hangs.

    from harness import BrowserTest, celer

    class Welcome(BrowserTest):
        def test_renders(self):
            server = self.server([celer(), "serve", "--listen", "tcp://127.0.0.1:{port}"])
            browser = self.browser()
            browser.get(server.url("/"))
            self.assertEqual(browser.driver.title, "Celer")
            self.assertEqual(browser.console_errors(), [])

See README.md in this directory.
"""

import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
import unittest

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))

CHROMIUM = os.environ.get("CHROMIUM", "/usr/bin/chromium")
CHROMEDRIVER = os.environ.get("CHROMEDRIVER", "/usr/bin/chromedriver")

# Every wait below is bounded by one of these (seconds). They are limits on
# how long to wait for an outcome, never assertions on how long it took.
SERVER_READY_TIMEOUT = 20
SERVER_STOP_TIMEOUT = 5
BROWSER_START_TIMEOUT = 30
BROWSER_STOP_TIMEOUT = 10
PAGE_LOAD_TIMEOUT = 20
SCRIPT_TIMEOUT = 15
WAIT_TIMEOUT = 15
# A whole test method (servers, browsers, pages) is interrupted past this.
TEST_TIMEOUT = 60

# Flags every Chromium gets: headless, and no background connections (the
# network is closed; without them start-up stalls on them).
CHROMIUM_FLAGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--disable-dev-shm-usage",
    "--window-size=1280,900",
]

# Process groups started by the harness and still running; killed by
# kill_everything() (the run's watchdog) if a test cannot clean up itself.
_live_groups = set()
_live_lock = threading.Lock()
# Set by kill_everything(): what registers afterwards is killed at once.
_dying = False


def _register(pid):
    with _live_lock:
        if _dying:
            _kill_group(pid)
            return
        _live_groups.add(pid)


def _unregister(pid):
    with _live_lock:
        _live_groups.discard(pid)


def _kill_group(pid):
    try:
        os.killpg(pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass


def kill_everything():
    """SIGKILLs every process group the harness started and has not stopped,
    and any it registers from now on (for the end of a run)."""
    global _dying
    with _live_lock:
        _dying = True
        groups = list(_live_groups)
        _live_groups.clear()
    for pid in groups:
        _kill_group(pid)


def celer():
    """Path of the `celer` binary under test: $CELER_BIN, else the debug build
    (run.py builds it first)."""
    path = os.environ.get("CELER_BIN") or os.path.join(
        os.environ.get("CARGO_TARGET_DIR", os.path.join(ROOT, "target")), "debug", "celer"
    )
    if not os.access(path, os.X_OK):
        raise RuntimeError(f"no celer binary at {path}: run `cargo build -p celer-cli` or set CELER_BIN")
    return path


def free_ports(n):
    """`n` distinct TCP ports free on 127.0.0.1 right now."""
    socks = []
    try:
        for _ in range(n):
            s = socket.socket()
            s.bind(("127.0.0.1", 0))
            socks.append(s)
        return [s.getsockname()[1] for s in socks]
    finally:
        for s in socks:
            s.close()


def _listening_inodes(port):
    """Socket inodes listening on TCP `port` (IPv4 or IPv6), from /proc/net."""
    inodes = set()
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        try:
            with open(table) as f:
                next(f)
                for line in f:
                    fields = line.split()
                    # local_address is HEXADDR:HEXPORT; state 0A is LISTEN.
                    if int(fields[1].rsplit(":", 1)[1], 16) == port and fields[3] == "0A":
                        inodes.add(fields[9])
        except FileNotFoundError:
            pass
    return inodes


def _group_socket_inodes(pgid):
    """Inodes of the sockets open in the processes of process group `pgid`:
    tells a server's own listener from another process's on the same port."""
    inodes = set()
    for pid in os.listdir("/proc"):
        if not pid.isdigit():
            continue
        try:
            with open(f"/proc/{pid}/stat") as f:
                # pgrp is the 3rd field after the parenthesised command name.
                if int(f.read().rsplit(")", 1)[1].split()[2]) != pgid:
                    continue
            for fd in os.listdir(f"/proc/{pid}/fd"):
                target = os.readlink(f"/proc/{pid}/fd/{fd}")
                if target.startswith("socket:["):
                    inodes.add(target[8:-1])
        except OSError:
            continue  # exited meanwhile
    return inodes


def wait_until(condition, what, timeout=WAIT_TIMEOUT, interval=0.05):
    """Polls `condition()` until it returns a true value, which is returned;
    fails the test naming `what` if it has not after `timeout` seconds."""
    deadline = time.monotonic() + timeout
    last_error = None
    while True:
        try:
            value = condition()
            if value:
                return value
        except AssertionError:
            raise
        except Exception as err:  # the page may be mid-navigation
            last_error = err
        if time.monotonic() >= deadline:
            detail = f" (last error: {last_error})" if last_error else ""
            raise AssertionError(f"timed out waiting for {what}{detail}")
        time.sleep(interval)


class Server:
    """A server process on free loopback ports.

    `cmd` is an argument list; `{port}` in it becomes the first port, `{port1}`,
    `{port2}`... the following ones (`ports` of them in all). The process runs in
    its own process group with its output captured; it is ready when every port
    has a listening socket opened in that group (read from /proc: another
    process's listener on the port does not count). If it exits before that
    saying an address is in use (a port taken since it was found free), it is
    started again on new ports, up to 3 times.
    """

    def __init__(self, cmd, tls=False, ports=1, cwd=None, env=None):
        self.tls = tls
        self.cwd = cwd
        self.env = env
        self.template = list(cmd)
        self.nports = ports
        self.proc = None
        self.ports = []
        self._log = None
        for attempt in range(3):
            failure = self._start()
            if failure is None:
                return
            # Only a port taken since free_ports() is worth another try.
            if "in use" not in failure.lower() or attempt == 2:
                raise RuntimeError(f"server did not start: {failure}")

    @property
    def port(self):
        """The first port (the one `{port}` named)."""
        return self.ports[0]

    @property
    def origin(self):
        """`http://127.0.0.1:PORT` or `https://...` for a TLS server."""
        return f"{'https' if self.tls else 'http'}://127.0.0.1:{self.port}"

    def url(self, path="/", port=None):
        """Absolute URL of `path` on the server (on `port`, default the first)."""
        if port is None:
            return self.origin + path
        return f"{'https' if self.tls else 'http'}://127.0.0.1:{port}{path}"

    def output(self):
        """Everything the server wrote to stdout and stderr so far."""
        if self._log is None:
            return ""
        self._log.flush()
        with open(self._log.name, "rb") as f:
            return f.read().decode("utf-8", "replace")

    def _start(self):
        self.ports = free_ports(self.nports)
        names = {"port": self.ports[0]}
        names.update({f"port{i}": p for i, p in enumerate(self.ports) if i > 0})
        cmd = [arg.format(**names) for arg in self.template]
        self._drop_log()
        self._log = tempfile.NamedTemporaryFile(prefix="server-", suffix=".log", delete=False)
        self.proc = subprocess.Popen(
            cmd,
            cwd=self.cwd,
            env=self.env,
            stdin=subprocess.DEVNULL,
            stdout=self._log,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
        _register(self.proc.pid)
        deadline = time.monotonic() + SERVER_READY_TIMEOUT
        pending = list(self.ports)
        while pending:
            if self.proc.poll() is not None:
                _unregister(self.proc.pid)
                return f"{cmd} exited with {self.proc.returncode}: {self.output().strip()}"
            listeners = _listening_inodes(pending[0])
            if listeners:
                if listeners & _group_socket_inodes(self.proc.pid):
                    pending.pop(0)
                    continue
                if time.monotonic() >= deadline:
                    # Someone else took the port between free_ports() and the bind.
                    self.stop()
                    return f"port {pending[0]} in use by another process"
            if time.monotonic() >= deadline:
                self.stop()
                raise RuntimeError(f"{cmd} not listening on port {pending[0]} after {SERVER_READY_TIMEOUT} s")
            time.sleep(0.05)
        return None

    def stop(self):
        """SIGTERM, then SIGKILL to the group after SERVER_STOP_TIMEOUT; returns
        the exit status (negative: killed by that signal)."""
        if self.proc is None:
            return None
        if self.proc.poll() is None:
            try:
                os.killpg(self.proc.pid, signal.SIGTERM)
            except ProcessLookupError:
                pass
            try:
                self.proc.wait(SERVER_STOP_TIMEOUT)
            except subprocess.TimeoutExpired:
                _kill_group(self.proc.pid)
                self.proc.wait(SERVER_STOP_TIMEOUT)
        _kill_group(self.proc.pid)  # anything it left behind
        _unregister(self.proc.pid)
        self._drop_log()
        return self.proc.returncode

    def _drop_log(self):
        if self._log is not None:
            self._log.close()
            try:
                os.unlink(self._log.name)
            except OSError:
                pass
            self._log = None


class Browser:
    """Headless Chromium driven by chromedriver, with a fresh empty profile.

    `insecure_tls` adds `--ignore-certificate-errors` (for self-signed
    servers). `downloads` is a directory where downloads land without a prompt.
    `driver` is the selenium WebDriver; the helpers below cover the common
    checks. The browser log (console messages, uncaught exceptions, failed
    loads) and the network log (responses with their headers) are recorded.
    """

    def __init__(self, insecure_tls=False, downloads=None, extra_flags=()):
        # Imported here so that `run.py` can report a missing selenium clearly.
        from selenium import webdriver
        from selenium.webdriver.chrome.service import Service

        self._profile = tempfile.mkdtemp(prefix="chromium-profile-")
        self.downloads = downloads
        self._service = None
        self.driver = None
        self._console = []
        self._network = []
        self._requests = []
        self._sent_headers = {}
        options = webdriver.ChromeOptions()
        options.binary_location = CHROMIUM
        for flag in CHROMIUM_FLAGS + [f"--user-data-dir={self._profile}"] + list(extra_flags):
            options.add_argument(flag)
        if insecure_tls:
            options.add_argument("--ignore-certificate-errors")
        options.set_capability("goog:loggingPrefs", {"browser": "ALL", "performance": "ALL"})
        options.add_experimental_option("perfLoggingPrefs", {"enableNetwork": True, "enablePage": False})
        if downloads:
            options.add_experimental_option(
                "prefs",
                {
                    "download.default_directory": downloads,
                    "download.prompt_for_download": False,
                    "safebrowsing.enabled": False,
                },
            )
        # chromedriver and the Chromium it starts share a new process group,
        # killed as a whole on teardown.
        self._service = Service(
            CHROMEDRIVER,
            popen_kw={"start_new_session": True},
            log_output=subprocess.DEVNULL,
        )
        started = {}

        def start():
            try:
                started["driver"] = webdriver.Chrome(service=self._service, options=options)
            except Exception as err:
                started["error"] = err

        t = threading.Thread(target=start, daemon=True)
        t.start()
        # Register chromedriver's group as soon as it exists (before it starts
        # Chromium), so that the run's watchdog can kill a start that hangs.
        deadline = time.monotonic() + BROWSER_START_TIMEOUT
        registered = False
        while time.monotonic() < deadline:
            t.join(0.02)
            proc = getattr(self._service, "process", None)
            if proc is not None and not registered:
                _register(proc.pid)
                registered = True
            if not t.is_alive():
                break
        if "driver" not in started:
            self.close()
            raise RuntimeError(f"Chromium did not start: {started.get('error', 'timed out')}")
        self.driver = started["driver"]
        self.driver.set_page_load_timeout(PAGE_LOAD_TIMEOUT)
        self.driver.set_script_timeout(SCRIPT_TIMEOUT)
        if downloads:
            self.driver.execute_cdp_cmd(
                "Page.setDownloadBehavior", {"behavior": "allow", "downloadPath": downloads}
            )

    def get(self, url):
        """Navigates to `url` and waits for the document to be complete."""
        self.driver.get(url)
        self.wait_loaded()

    def wait_loaded(self):
        """Waits until the current document's readyState is `complete`."""
        wait_until(
            lambda: self.driver.execute_script("return document.readyState") == "complete",
            "the page to load",
        )

    def click_link(self, text):
        """Clicks the link whose visible text is exactly `text`; returns the
        absolute URL it points to (for `wait_navigated`)."""
        from selenium.webdriver.common.by import By

        link = self.driver.find_element(By.LINK_TEXT, text)
        href = link.get_property("href")
        link.click()
        return href

    def wait_navigated(self, url, what=None):
        """Waits until the current URL is `url` and the document is complete."""
        wait_until(
            lambda: self.driver.current_url == url
            and self.driver.execute_script("return document.readyState") == "complete",
            what or f"navigation to {url} (at {self.driver.current_url})",
        )

    def js(self, script, *args):
        """Runs `script` (a function body; `arguments` holds `args`) in the page."""
        return self.driver.execute_script(script, *args)

    def fetch_text(self, url):
        """`fetch(url)` from the page; returns (status, body decoded as text)."""
        result = self.driver.execute_async_script(
            """
            const [url, done] = arguments;
            fetch(url, {cache: 'no-store'})
              .then(async r => done({status: r.status, body: await r.text()}))
              .catch(e => done({error: String(e)}));
            """,
            url,
        )
        if "error" in result:
            raise AssertionError(f"fetch({url}) failed: {result['error']}")
        return result["status"], result["body"]

    def _drain_logs(self):
        self._console.extend(self.driver.get_log("browser"))
        for entry in self.driver.get_log("performance"):
            message = json.loads(entry["message"])["message"]
            method, params = message.get("method"), message.get("params", {})
            if method == "Network.responseReceived":
                self._network.append(params["response"])
            elif method == "Network.requestWillBeSent":
                if "redirectResponse" in params:
                    self._network.append(params["redirectResponse"])
                self._requests.append((params["requestId"], params["request"]["url"]))
            elif method == "Network.requestWillBeSentExtraInfo":
                # The headers as sent, Accept-Encoding and cookies included.
                self._sent_headers.setdefault(params["requestId"], []).append(params["headers"])

    def console(self):
        """Every browser log entry so far: console messages, uncaught
        exceptions, failed loads (dicts with level, source, message)."""
        self._drain_logs()
        return list(self._console)

    def console_errors(self):
        """The browser log entries at level SEVERE (console.error, uncaught
        exceptions, failed requests), as their messages."""
        return [e["message"] for e in self.console() if e["level"] == "SEVERE"]

    def responses(self):
        """Every response the browser received so far, as CDP Network.Response
        dicts (url, status, headers, protocol, mimeType, ...), oldest first."""
        self._drain_logs()
        return list(self._network)

    def response(self, url):
        """The last response received for `url`; fails if there is none."""
        matching = [r for r in self.responses() if r["url"] == url]
        if not matching:
            seen = [r["url"] for r in self._network]
            raise AssertionError(f"no response for {url}; responses: {seen}")
        return matching[-1]

    def request_headers(self, url):
        """The headers Chromium sent on its last request for `url`, as it sent
        them (names as on the wire); fails if there is none."""
        self._drain_logs()
        # A redirect keeps the request id: the n-th URL of an id is paired
        # with the n-th headers sent under it.
        position = {}
        found = None
        for request_id, request_url in self._requests:
            n = position.get(request_id, 0)
            position[request_id] = n + 1
            sent = self._sent_headers.get(request_id, [])
            if request_url == url and n < len(sent):
                found = sent[n]
        if found is None:
            raise AssertionError(f"no request headers recorded for {url}")
        return found

    def wait_download(self, name, timeout=WAIT_TIMEOUT):
        """Waits until `name` is completely downloaded; returns its bytes."""
        path = os.path.join(self.downloads, name)
        wait_until(
            lambda: os.path.exists(path) and not os.path.exists(path + ".crdownload"),
            f"the download of {name} (directory has {os.listdir(self.downloads)})",
            timeout=timeout,
        )
        with open(path, "rb") as f:
            return f.read()

    def close(self):
        """Quits the browser (bounded), then kills whatever is left of it."""
        if self.driver is not None:
            t = threading.Thread(target=self.driver.quit, daemon=True)
            t.start()
            t.join(BROWSER_STOP_TIMEOUT)
            self.driver = None
        proc = getattr(self._service, "process", None) if self._service else None
        if proc is not None:
            _kill_group(proc.pid)
            try:
                proc.wait(BROWSER_STOP_TIMEOUT)
            except subprocess.TimeoutExpired:
                pass
            _unregister(proc.pid)
        shutil.rmtree(self._profile, ignore_errors=True)


class _TestTimeout(Exception):
    pass


class BrowserTest(unittest.TestCase):
    """A TestCase whose `server()` and `browser()` are stopped after the test,
    pass or fail, and whose test methods are interrupted after TEST_TIMEOUT."""

    def setUp(self):
        def on_alarm(signum, frame):
            raise _TestTimeout(f"{self.id()} still running after {TEST_TIMEOUT} s")

        self._previous_alarm = signal.signal(signal.SIGALRM, on_alarm)
        signal.alarm(TEST_TIMEOUT)
        self.addCleanup(self._disarm)

    def _disarm(self):
        signal.alarm(0)
        signal.signal(signal.SIGALRM, self._previous_alarm)

    def server(self, cmd, exit_status=None, **kwargs):
        """Starts a `Server` (other arguments as its own) stopped at cleanup.
        The test fails if the server exited before that (a crash), or, with
        `exit_status`, if stopping it (SIGTERM) did not end with that status.
        A failing test prints what the server wrote."""
        server = Server(cmd, **kwargs)

        def stop():
            output = server.output()
            crashed = server.proc.poll()
            status = server.stop()
            if self._outcome_failed() or crashed is not None or (exit_status is not None and status != exit_status):
                if output:
                    sys.stderr.write(f"\n--- server output ({' '.join(cmd)}) ---\n{output}\n")
            if crashed is not None:
                raise AssertionError(f"the server exited during the test with status {crashed}")
            if exit_status is not None and status != exit_status:
                raise AssertionError(f"the server exited with status {status} on SIGTERM, not {exit_status}")

        self.addCleanup(stop)
        return server

    def browser(self, **kwargs):
        """Starts a `Browser` (same arguments) closed at cleanup."""
        browser = Browser(**kwargs)
        self.addCleanup(browser.close)
        return browser

    def tempdir(self):
        """A new temporary directory removed at cleanup."""
        path = tempfile.mkdtemp(prefix="browser-test-")
        self.addCleanup(shutil.rmtree, path, True)
        return path

    def _outcome_failed(self):
        outcome = getattr(self, "_outcome", None)
        return outcome is None or not getattr(outcome, "success", False)
