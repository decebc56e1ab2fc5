"""The peer of bench/tasks: Celery with a Redis broker and result backend,
its own client submitting no-op tasks and waiting for every result.

    python celery_noop.py --tasks N --port P   (redis-server already on P)

Prints one CSV row: celery,e2e,<tasks/s>,tasks/s.
"""
import argparse
import os
import subprocess
import sys
import time

from celery import Celery

PORT = int(os.environ.get("PEER_REDIS_PORT", "6399"))
app = Celery("celery_noop", broker=f"redis://127.0.0.1:{PORT}/0", backend=f"redis://127.0.0.1:{PORT}/1")
app.conf.update(worker_prefetch_multiplier=64, task_acks_late=True, result_expires=3600)


@app.task
def noop(value=None):
    return value


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--tasks", type=int, default=20000)
    args = parser.parse_args()
    here = os.path.dirname(os.path.abspath(__file__))
    worker = subprocess.Popen(
        [sys.executable, "-m", "celery", "-A", "celery_noop", "worker", "--pool=solo",
         "--concurrency=1", "--loglevel=WARNING", "--without-gossip", "--without-mingle",
         "--without-heartbeat"],
        cwd=here, env=dict(os.environ, PEER_REDIS_PORT=str(PORT)),
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
    )
    try:
        # Warm-up: the worker is up when a task comes back.
        noop.delay(0).get(timeout=60)
        start = time.monotonic()
        results = [noop.delay(None) for _ in range(args.tasks)]
        for result in results:
            result.get(timeout=600)
        elapsed = time.monotonic() - start
        print(f"celery,e2e,{args.tasks / elapsed:.0f},tasks/s", flush=True)
    finally:
        worker.terminate()
        worker.wait(timeout=30)


if __name__ == "__main__":
    main()
