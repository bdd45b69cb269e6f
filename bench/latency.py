"""End-to-end latency at a steady rate: source commit -> visible in the target (DuckDB).

Method (no poller: DuckDB allows one writer process per file, and a reader opening the file
while ``replicator run`` writes it would fight for the lock). Instead:

1. ``replicator run`` streams (no ``--until-caught-up``) with ``batching.max_delay`` = 1 s and
   ``--log-format json``; the sink commits a batch (MERGE + state row, one transaction) and
   only then the engine writes that batch's report line, which carries the batch's end
   offset (a binlog position). The line is timestamped when this process reads it: that is
   an upper bound of the moment the batch became visible (the pipe adds well under 1 ms).
2. The workload writes at a fixed rate in small transactions and records, for each one, the
   wall clock right after COMMIT returned (an upper bound of the commit time, so latency is
   if anything under-counted by one round trip, ~0.1 ms) and the binlog head right after it,
   which is that transaction's end boundary (one writer per database and server).
3. A transaction is visible with the first batch whose end offset is at or past its end
   boundary; its latency is that batch's line time minus its commit time.

A warm-up at the same rate runs until the first batch is applied (JVM start, first plan), and
is not measured. After the measured phase the run is stopped with SIGTERM once the last
transaction is visible (or after a timeout, which the result reports as unmatched).
"""

from __future__ import annotations

import bisect
import itertools
import threading
import time
from typing import Any

from bench.context import BenchContext, replicator_command
from bench.pipelines import write_pipeline
from bench.procmon import LoggedLine, MonitoredProcess
from bench.workload import SteadyWriter, connect_root, create_tables, head
from replicator.model.changes import BinlogPosition

WARMUP_TIMEOUT_S = 300.0
DRAIN_TIMEOUT_S = 120.0
STOP_TIMEOUT_S = 120.0


def percentile(values: list[float], share: float) -> float:
    """Nearest-rank percentile of sorted ``values`` (share in 0..1)."""
    if not values:
        return float("nan")
    rank = max(0, min(len(values) - 1, round(share * len(values) + 0.5) - 1))
    return values[rank]


class _AppliedBatches:
    """Stream batch reports as they arrive: (line time, end offset) in binlog order."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.applied: list[tuple[tuple[int, int], float]] = []  # (end offset key, line time)
        self.first = threading.Event()
        self.reports: list[dict[str, Any]] = []

    def on_line(self, line: LoggedLine) -> None:
        data = line.data
        if not data or data.get("kind") != "stream" or not data.get("end_offset"):
            return
        end = BinlogPosition.from_offset(data["end_offset"])
        with self.lock:
            self.applied.append((end._key(), line.at))
            self.reports.append(data)
        self.first.set()

    def visible_at(self, end: BinlogPosition) -> float | None:
        """Line time of the first batch whose end offset is at or past ``end``."""
        key = end._key()
        with self.lock:
            ends = [applied for applied, _ in self.applied]
            index = bisect.bisect_left(ends, key)
            return self.applied[index][1] if index < len(self.applied) else None

    def reached(self, end: BinlogPosition) -> bool:
        return self.visible_at(end) is not None


def _phases(report: dict[str, Any]) -> dict[str, Any]:
    """A batch report line's timings (the whole line, per table, is ~1 KB)."""
    tables = report.get("tables") or []
    return {
        "batch_id": report["batch_id"], "changes": report.get("changes"),
        "seconds": report["seconds"], "cpu_seconds": report.get("cpu_seconds"),
        "finished_at": report["finished_at"],
        "stage_s": round(sum(float(t["seconds_stage"]) for t in tables), 4),
        "merge_s": round(sum(float(t["seconds_merge"]) for t in tables), 4),
    }


def run_latency(ctx: BenchContext) -> dict[str, Any]:
    sizes = ctx.sizes
    database = "bench_latency"
    connection = connect_root(ctx.server.socket)
    try:
        create_tables(connection, database)
        start = head(connection)
    finally:
        connection.close()
    name = "bench-latency"
    pipeline = write_pipeline(
        ctx.workdir / f"{name}.yaml", name=name, database=database, target="duckdb",
        start=start, server_id=ctx.next_server_id(), max_delay=sizes.latency_max_delay,
    )
    batches = _AppliedBatches()
    writer = SteadyWriter(ctx.server.socket, database)
    process = MonitoredProcess(
        [*replicator_command(), "run", str(pipeline), "--log-format", "json"],
        env=ctx.environment(), cwd=str(ctx.workdir), on_line=batches.on_line,
    )
    result: dict[str, Any] = {
        "target": "duckdb", "rate": sizes.latency_rate, "seconds": sizes.latency_seconds,
        "max_delay": sizes.latency_max_delay, "method": "batch report line time vs commit time",
    }
    try:
        # warm-up: write at the same rate until the first batch is applied
        warm_started = time.perf_counter()
        while not batches.first.is_set():
            if process.process.poll() is not None:
                raise RuntimeError("replicator run exited during warm-up")
            if time.perf_counter() - warm_started > WARMUP_TIMEOUT_S:
                raise TimeoutError(f"no batch applied within {WARMUP_TIMEOUT_S:.0f} s")
            writer.write(sizes.latency_rate, 1.0, should_stop=batches.first.is_set)
        result["warmup_seconds"] = round(time.perf_counter() - warm_started, 2)
        first_measured = len(batches.reports)
        steady = writer.write(sizes.latency_rate, sizes.latency_seconds)
        last = steady.transactions[-1].end
        drain_started = time.perf_counter()
        while not batches.reached(last) and time.perf_counter() - drain_started < DRAIN_TIMEOUT_S:
            if process.process.poll() is not None:
                break
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
    latencies: list[float] = []
    unmatched = 0
    for transaction in steady.transactions:
        visible = batches.visible_at(transaction.end)
        if visible is None:
            unmatched += 1
        else:
            latencies.append(visible - transaction.committed_at)
    latencies.sort()
    measured = batches.reports[first_measured:]
    with batches.lock:
        arrivals = [at for _, at in batches.applied[first_measured:]]
    gaps = [b - a for a, b in itertools.pairwise(arrivals)]
    result.update({
        "achieved_rate": round(steady.achieved_rate, 1),
        "changes": steady.changes,
        "transactions": len(steady.transactions),
        "unmatched_transactions": unmatched,
        "batches": len(measured),
        "mean_batch_seconds": round(sum(float(r["seconds"]) for r in measured) / len(measured), 3)
        if measured else None,
        # what the tail is made of: the slowest batch, and the longest wait between two
        "max_batch_seconds": round(max(float(r["seconds"]) for r in measured), 3)
        if measured else None,
        "max_gap_between_batches_s": round(max(gaps), 3) if gaps else None,
        "p50_s": round(percentile(latencies, 0.50), 3),
        "p95_s": round(percentile(latencies, 0.95), 3),
        "p99_s": round(percentile(latencies, 0.99), 3),
        "max_s": round(latencies[-1], 3) if latencies else None,
        "min_s": round(latencies[0], 3) if latencies else None,
        # every transaction's latency (sorted), for the distribution chart of bench/report.py
        "latencies_s": [round(value, 4) for value in latencies],
        # every measured batch's phases, to see what sets the tail: its Spark read is
        # seconds - stage - merge; the loop's gap before it, from the previous finished_at
        "batch_reports": [_phases(report) for report in measured],
        "returncode": outcome.returncode,
        "usage": outcome.usage.to_json(),
    })
    return result
