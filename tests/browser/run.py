#!/usr/bin/env python3
"""Runs the browser tests (test_*.py here) in headless Chromium.

    python3 tests/browser/run.py             every test
    python3 tests/browser/run.py -k listing  tests whose name contains "listing"

Builds the debug `celer` first (`cargo build -p celer-cli`; a no-op when it is
up to date) unless CELER_BIN names a binary, and the debug `example-chat`
and `example-guestbook` (in examples/) unless EXAMPLE_CHAT_BIN and
EXAMPLE_GUESTBOOK_BIN name them. Exits 0 when every test passed,
1 when one failed, 2 when what the tests need is missing. The whole run is
bounded by RUN_TIMEOUT: past it every server and browser is killed and the
run fails.
"""

import argparse
import os
import shutil
import subprocess
import sys
import threading
import time
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
sys.dont_write_bytecode = True  # no __pycache__ in the source tree

import harness  # noqa: E402

# Bound on the whole run, seconds (not counting the build): a hang guard
# with room for a loaded two-core machine, not a duration anyone asserts.
RUN_TIMEOUT = 300


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("-k", dest="pattern", help="run only tests whose id contains this")
    parser.add_argument("-v", dest="verbose", action="store_true", help="name each test as it runs")
    args = parser.parse_args()

    missing = [p for p in (harness.CHROMIUM, harness.CHROMEDRIVER) if not os.access(p, os.X_OK)]
    try:
        import selenium  # noqa: F401
    except ImportError:
        missing.append("the selenium Python package")
    if missing:
        print(f"browser tests: missing {', '.join(missing)} (scripts/test installs them)", file=sys.stderr)
        return 2

    if not os.environ.get("CELER_BIN"):
        cargo = shutil.which("cargo")
        if cargo is None:
            print("browser tests: no cargo to build celer; set CELER_BIN", file=sys.stderr)
            return 2
        build = subprocess.run([cargo, "build", "-q", "-p", "celer-cli"], cwd=harness.ROOT)
        if build.returncode != 0:
            print("browser tests: `cargo build -p celer-cli` failed", file=sys.stderr)
            return 2
    harness.celer()  # fails clearly when the binary is not there
    # test_chat.py serves examples/chat, test_guestbook.py examples/guestbook,
    # built in the examples workspace.
    for package, variable in (("example-chat", "EXAMPLE_CHAT_BIN"), ("example-guestbook", "EXAMPLE_GUESTBOOK_BIN")):
        if os.environ.get(variable):
            continue
        cargo = shutil.which("cargo")
        examples = os.path.join(harness.ROOT, "examples")
        if cargo is None or subprocess.run([cargo, "build", "-q", "-p", package], cwd=examples).returncode:
            print(f"browser tests: `cargo build -p {package}` in examples/ failed", file=sys.stderr)
            return 2

    def watchdog():
        print(f"\nbrowser tests: still running after {RUN_TIMEOUT} s; killing them", file=sys.stderr)
        harness.kill_everything()
        # A browser or server being started right now registers within
        # moments and is killed as it does.
        time.sleep(0.5)
        harness.kill_everything()
        os._exit(1)

    timer = threading.Timer(RUN_TIMEOUT, watchdog)
    timer.daemon = True
    timer.start()
    try:
        suite = unittest.defaultTestLoader.discover(HERE, pattern="test_*.py", top_level_dir=HERE)
        if args.pattern:
            suite = unittest.TestSuite(t for t in _flatten(suite) if args.pattern in t.id())
        result = unittest.TextTestRunner(verbosity=2 if args.verbose else 1).run(suite)
    finally:
        timer.cancel()
        harness.kill_everything()
    if result.testsRun == 0:
        print("browser tests: no test ran", file=sys.stderr)
        return 1
    return 0 if result.wasSuccessful() else 1


def _flatten(suite):
    for item in suite:
        if isinstance(item, unittest.TestSuite):
            yield from _flatten(item)
        else:
            yield item


if __name__ == "__main__":
    sys.exit(main())
