"""A local run's Python worker daemon (engine/job/python_daemon.py): Spark starts ours, it has
the decode stack imported, and it is still one thread when it forks a worker."""

from __future__ import annotations

import json
import os
import subprocess
import sys


def test_the_preloaded_daemon_is_one_thread_with_the_decode_stack() -> None:
    script = ("import json, os, sys\n"
              "from replicator.engine.job import python_daemon\n"
              "python_daemon.preload()\n"
              "print(json.dumps([len(os.listdir('/proc/self/task')),"
              " [n for n in python_daemon.DECODE_STACK if n not in sys.modules]]))\n")
    env = {k: v for k, v in os.environ.items()
           if k not in ("OPENBLAS_NUM_THREADS", "JE_ARROW_MALLOC_CONF")}
    done = subprocess.run([sys.executable, "-c", script], env=env, capture_output=True,
                          text=True, check=True, timeout=60)
    threads, missing = json.loads(done.stdout.strip().splitlines()[-1])
    assert missing == []
    assert threads == 1  # numpy's and pyarrow's threads not started: fork() is safe


def _daemon_of_this_worker(_: int) -> tuple[str, int]:
    daemon = os.getppid()
    with open(f"/proc/{daemon}/cmdline", "rb") as handle:
        command = handle.read().replace(b"\0", b" ").decode()
    return command, len(os.listdir(f"/proc/{daemon}/task"))


def test_spark_forks_local_workers_from_our_daemon(spark) -> None:
    [(command, threads)] = (spark.sparkContext.parallelize([0], 1)
                            .map(_daemon_of_this_worker).collect())
    assert "-m replicator.engine.job.python_daemon" in command
    assert threads == 1
