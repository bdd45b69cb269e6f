"""Start-up time of ``replicator validate FILE`` and ``replicator plan --offline FILE``, and
of a ``replicator run FILE --until-caught-up`` with nothing to apply against ``replicator
status FILE``, which reads the same binlog head and target state without Spark (issue 30:
the idle run within 2x status).

Wall time of the whole command as a user (or CI) runs it, median of several runs after one
unmeasured warm-up (so the OS file cache is warm, as in CI's second step onwards). Neither
command may import pyspark, duckdb, pymysql ... (the import-hygiene test checks that; this
measures what is left).
"""

from __future__ import annotations

import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from bench.context import BenchContext, replicator_command


def _time(command: list[str], env: dict[str, str], cwd: str) -> tuple[float, int]:
    started = time.perf_counter()
    completed = subprocess.run(command, env=env, cwd=cwd, stdout=subprocess.DEVNULL,
                               stderr=subprocess.DEVNULL, check=False)
    return time.perf_counter() - started, completed.returncode


def measure(command: list[str], env: dict[str, str], cwd: str, repeats: int) -> dict[str, Any]:
    _time(command, env, cwd)  # warm-up
    runs = [_time(command, env, cwd) for _ in range(repeats)]
    seconds = sorted(wall for wall, _ in runs)
    return {
        "median_s": round(statistics.median(seconds), 3),
        "min_s": round(seconds[0], 3),
        "max_s": round(seconds[-1], 3),
        "repeats": repeats,
        "returncodes": sorted({code for _, code in runs}),
    }


def run_startup(ctx: BenchContext, pipeline: Path) -> dict[str, Any]:
    env = ctx.environment()
    cwd = str(ctx.workdir)
    base = replicator_command()
    return {
        "pipeline": pipeline.name,
        "validate": measure([*base, "validate", str(pipeline)], env, cwd, ctx.sizes.startup_repeats),
        "plan_offline": measure([*base, "plan", "--offline", str(pipeline)], env, cwd,
                                ctx.sizes.startup_repeats),
        # the interpreter alone: the floor under both numbers
        "python_baseline": measure([sys.executable, "-c", "pass"], env, cwd,
                                   ctx.sizes.startup_repeats),
    }


def run_idle(ctx: BenchContext, pipeline: Path) -> dict[str, Any]:
    """``pipeline`` starts at the binlog head (``start: latest``): one run commits its start,
    then every bounded run finds nothing to apply. Measured back to back with ``status``."""
    from bench.workload import connect_root, create_tables

    with connect_root(ctx.server.socket) as connection, connection.cursor() as cursor:
        cursor.execute("CREATE DATABASE IF NOT EXISTS bench_idle")
    with connect_root(ctx.server.socket, "bench_idle") as connection:
        create_tables(connection, "bench_idle")  # empty: a stream from the head has no rows
    env = ctx.environment()
    cwd = str(ctx.workdir)
    base = replicator_command()
    first = subprocess.run([*base, "run", str(pipeline), "--until-caught-up"], env=env, cwd=cwd,
                           capture_output=True, text=True, check=False)
    if first.returncode != 0:
        raise RuntimeError(f"the first run failed: {first.stderr[-2000:]}")
    idle = measure([*base, "run", str(pipeline), "--until-caught-up"], env, cwd,
                   ctx.sizes.startup_repeats)
    status = measure([*base, "status", str(pipeline)], env, cwd, ctx.sizes.startup_repeats)
    return {"pipeline": pipeline.name, "run_idle": idle, "status": status,
            "idle_over_status": round(idle["median_s"] / status["median_s"], 2)}
