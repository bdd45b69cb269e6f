"""Spark's start-up for RDD jobs, A/B: the JVM with or without Spark SQL, and the Python
worker daemon with or without the decode stack pre-imported (docs/decisions/
spark-context-and-warm-workers.md).

Each round starts one fresh process per variant (interleaved, so the machine's load falls on
every variant alike); each process starts Spark as a bounded local run does
(``SessionStart``, ``local[2]``), runs a first RDD job of two tasks that import the decode
stack (as a decode task does), then ``--jobs`` more, and reports:

- ``ready``: SessionStart -> ``context()`` (or ``session()``) returned, s;
- ``first_job``: the first job's wall (Python daemon, its workers, their imports), s;
- ``to_first``: ready + first_job, the start-up a run waits for before its first batch;
- ``per_job``: the later jobs' mean wall, s;
- ``jvm_cpu``, ``workers_cpu``, ``driver_cpu``: CPU seconds of the JVM, of the Python
  daemon and its workers, and of this process, at the end (``spark-class``'s launcher JVM,
  exited by then, is not counted).

    python -m bench.spark_start --rounds 5 [--variants session,context,context+daemon]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time

VARIANTS = {
    # (sql, the daemon module): what runs started before this change, and the two steps.
    "session": (True, "pyspark.daemon"),
    "context": (False, "pyspark.daemon"),
    "context+daemon": (False, None),  # None: SessionStart's default (engine.job.python_daemon)
    "session+daemon": (True, None),
}
KEYS = ("ready", "first_job", "to_first", "per_job", "jvm_cpu", "workers_cpu", "driver_cpu")


def _decode_like_task(rows):  # runs in a Python worker
    """What a decode task imports before it decodes (engine.job.python_daemon.DECODE_STACK:
    the daemon variants have it already)."""
    import importlib

    from replicator.engine.job.python_daemon import DECODE_STACK

    for name in DECODE_STACK:
        importlib.import_module(name)
    yield sum(1 for _ in rows)


def one(variant: str, jobs: int) -> dict[str, float]:
    """One fresh start of ``variant`` in this process."""
    import psutil

    from replicator.engine.job.python_workers import DAEMON_MODULE_KEY
    from replicator.engine.job.session import SessionStart

    sql, daemon = VARIANTS[variant]
    conf = {} if daemon is None else {DAEMON_MODULE_KEY: daemon}
    started = time.perf_counter()
    start = SessionStart("local[2]", conf, bounded=True, sql=sql)
    context = start.session().sparkContext if sql else start.context()
    ready = time.perf_counter()
    context.parallelize(range(2), 2).mapPartitions(_decode_like_task).collect()
    first = time.perf_counter()
    for _ in range(jobs):
        context.parallelize(range(2), 2).mapPartitions(_decode_like_task).collect()
    done = time.perf_counter()
    jvm = workers = 0.0
    for child in psutil.Process().children(recursive=True):
        try:
            times = child.cpu_times()
            name = child.name()
        except psutil.Error:
            continue
        if "java" in name:
            jvm += times.user + times.system
        else:
            workers += times.user + times.system
    own = psutil.Process().cpu_times()
    return {"ready": ready - started, "first_job": first - ready, "to_first": first - started,
            "per_job": (done - first) / max(jobs, 1), "jvm_cpu": jvm, "workers_cpu": workers,
            "driver_cpu": own.user + own.system}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--jobs", type=int, default=10)
    parser.add_argument("--variants", default="session,context,context+daemon")
    parser.add_argument("--one", help=argparse.SUPPRESS)  # the child process
    args = parser.parse_args()
    if args.one:
        print(json.dumps(one(args.one, args.jobs)))
        return 0
    names = args.variants.split(",")
    rows: dict[str, list[dict[str, float]]] = {name: [] for name in names}
    for _ in range(args.rounds):
        for name in names:
            done = subprocess.run([sys.executable, "-m", "bench.spark_start", "--one", name,
                                   "--jobs", str(args.jobs)],
                                  capture_output=True, text=True, check=False)
            lines = [line for line in done.stdout.splitlines() if line.startswith("{")]
            if done.returncode != 0 or not lines:
                print(f"{name}: failed\n{done.stderr[-2000:]}", file=sys.stderr)
                continue
            rows[name].append(json.loads(lines[-1]))
    print(f"medians of {args.rounds} rounds, load {os.getloadavg()[0]:.1f} at the end")
    print(f"{'variant':16}" + "".join(f"{key:>12}" for key in KEYS))
    for name, found in rows.items():
        if found:
            print(f"{name:16}" + "".join(
                f"{statistics.median(r[key] for r in found):12.3f}" for key in KEYS))
    return 0


if __name__ == "__main__":
    sys.exit(main())
