"""One big table copied again (``replicator snapshot --table``) while the others stream.

Issue 18's figure: while the 1M-row ``bench_snapshot.orders`` is re-copied, the lag of the
other tables' changes stays under 5 s. Method (``bench.latency``'s, on a pipeline of both):

1. ``replicator run`` (no ``--until-caught-up``, ``max_delay`` 1 s, ``--log-format json``)
   copies every table first (the big one and the steady writer's tables), then streams;
2. a ``SteadyWriter`` writes the other tables at a fixed rate throughout; each transaction's
   latency is the time from its COMMIT to the report line of the first stream batch whose end
   offset is at or past it (an upper bound of when it became visible);
3. once streaming, ``replicator snapshot PIPELINE --table bench_snapshot.orders`` asks for
   the re-copy; the run's notices say when it began and ended.

Reported: the latency of the transactions committed before the request (``before``) and of
those committed while the copy ran (``during``: p50/p99/max, the figure), the copy's wall
time and rows/s, and the longest gap between two stream batches while it ran.
"""

from __future__ import annotations

import itertools
import subprocess
import time
from typing import Any

from bench.context import BenchContext, replicator_command
from bench.latency import STOP_TIMEOUT_S, WARMUP_TIMEOUT_S, _AppliedBatches, percentile
from bench.pipelines import write_pipeline
from bench.procmon import LoggedLine, MonitoredProcess
from bench.snapshot import DATABASE as BIG_DATABASE
from bench.snapshot import ORDERS
from bench.workload import SteadyWriter, connect_root, create_tables, head

LIVE_DATABASE = "bench_recopy"
COPY_TIMEOUT_S = 1800.0
RATE = 300.0  # changes/s of the other tables, the whole time
BEFORE_S = 10.0  # measured before the request


class _Log(_AppliedBatches):
    """Stream batch lines (latency), and when the re-copy's notices came."""

    def __init__(self) -> None:
        super().__init__()
        self.recopy_started: float | None = None
        self.recopy_done: float | None = None
        self.recopy_rows = 0
        self.streaming_at: float | None = None  # the first stream batch's line

    def on_line(self, line: LoggedLine) -> None:
        data = line.data or {}
        notice = str(data.get("notice", ""))
        if "re-copy of" in notice and "asked" in notice:
            self.recopy_started = line.at
        elif "re-copy of" in notice and " done:" in notice:
            self.recopy_done = line.at
        elif data.get("kind") == "recopy":
            self.recopy_rows += int(data.get("changes") or 0)
        if data.get("kind") == "stream" and self.streaming_at is None:
            self.streaming_at = line.at
        super().on_line(line)


def _latencies(log: _Log, transactions: list[Any], since: float, until: float) -> dict[str, Any]:
    values = sorted(visible - t.committed_at for t in transactions
                    if since <= t.committed_at < until
                    and (visible := log.visible_at(t.end)) is not None)
    return {"transactions": len(values), "p50_s": round(percentile(values, 0.5), 3),
            "p99_s": round(percentile(values, 0.99), 3),
            "max_s": round(values[-1], 3) if values else None}


def run_recopy(ctx: BenchContext, rows: int) -> dict[str, Any]:
    """The big table (filled by ``bench.snapshot.fill_table``) re-copied under a steady writer."""
    from bench.tables import TABLES

    connection = connect_root(ctx.server.socket)
    try:
        create_tables(connection, LIVE_DATABASE)
        head(connection)
    finally:
        connection.close()
    name = "bench-recopy"
    pipeline = write_pipeline(
        ctx.workdir / f"{name}.yaml", name=name, database=LIVE_DATABASE, tables=TABLES,
        also=((BIG_DATABASE, ORDERS),), target="duckdb", start="initial",
        server_id=ctx.next_server_id(), max_delay="1s",
    )
    log = _Log()
    writer = SteadyWriter(ctx.server.socket, LIVE_DATABASE)
    process = MonitoredProcess(
        [*replicator_command(), "run", str(pipeline), "--log-format", "json"],
        env=ctx.environment(), cwd=str(ctx.workdir), on_line=log.on_line,
    )
    result: dict[str, Any] = {"rows": rows, "rate": RATE, "max_delay": "1s",
                              "method": "batch report line time vs commit time"}
    transactions: list[Any] = []
    try:
        started = time.perf_counter()
        while log.streaming_at is None:  # the first copy, then the first stream batch
            if process.process.poll() is not None:
                raise RuntimeError("replicator run exited before streaming")
            if time.perf_counter() - started > WARMUP_TIMEOUT_S + rows / 10_000:
                raise TimeoutError("not streaming in time")
            transactions += writer.write(RATE, 1.0).transactions
        transactions += writer.write(RATE, BEFORE_S).transactions
        asked_at = time.time()
        subprocess.run([*replicator_command(), "snapshot", str(pipeline), "--table",
                        f"{BIG_DATABASE}.orders"], env=ctx.environment(), cwd=str(ctx.workdir),
                       check=True, capture_output=True)
        copy_started = time.perf_counter()
        while log.recopy_done is None:
            if process.process.poll() is not None:
                raise RuntimeError("replicator run exited during the re-copy")
            if time.perf_counter() - copy_started > COPY_TIMEOUT_S:
                raise TimeoutError(f"re-copy not done within {COPY_TIMEOUT_S:.0f} s")
            transactions += writer.write(RATE, 1.0).transactions
        done_at = log.recopy_done
        transactions += writer.write(RATE, 3.0).transactions  # drained by the same run
        last = transactions[-1].end
        drain = time.perf_counter()
        while not log.reached(last) and time.perf_counter() - drain < 60:
            time.sleep(0.1)
    except Exception as exc:
        process.terminate()
        outcome = process.wait(STOP_TIMEOUT_S)
        result["error"] = f"{type(exc).__name__}: {exc}\n{outcome.tail()}"
        return result
    finally:
        writer.close()
    process.terminate()
    outcome = process.wait(STOP_TIMEOUT_S)
    began = log.recopy_started or asked_at
    with log.lock:
        arrivals = [at for _, at in log.applied if began <= at <= done_at]
    gaps = [b - a for a, b in itertools.pairwise(arrivals)]
    result.update({
        "copy_seconds": round(done_at - began, 2),
        "copied_rows": log.recopy_rows,
        "rows_per_s": round(log.recopy_rows / (done_at - began)) if done_at > began else None,
        # from 2 s after streaming began (the writes queued during the first copy drained)
        "before": _latencies(log, transactions, (log.streaming_at or 0.0) + 2.0, asked_at),
        "during": _latencies(log, transactions, began, done_at),
        "stream_batches_during": len(arrivals),
        "max_gap_between_batches_s": round(max(gaps), 3) if gaps else None,
        "returncode": outcome.returncode,
        "usage": outcome.usage.to_json(),
    })
    return result
