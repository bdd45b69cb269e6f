"""Decode throughput with 1 vs N partitions on the same binlog range, in the same run.

What each Spark task of a micro-batch does, without Spark around it: the range is cut at
transaction boundaries by the engine's own ``split_range`` (balanced by bytes), and each part
is decoded by ``read_changes`` in its own process with its own server_id, as Spark's Python
workers do. Workers come from a fork server (forking the caller itself crashed them when an
earlier test had left Spark's and a server's threads in it) and are warmed (imports done)
before the clock starts; each
configuration runs ``rounds`` times and the median rate is reported. Issue 6's target on this
2-core machine: N partitions >= 1.6x one partition. On a busy machine the ratio falls towards
1: the parts compete for the same cores (``load_average`` is reported beside it).
"""

from __future__ import annotations

import os
import statistics
import time
from multiprocessing import get_context
from typing import Any

from replicator.model.changes import BinlogPosition
from replicator.model.pipeline import MySQLSource


def _warm(_: int) -> None:
    import replicator.source.binlog  # noqa: F401  (imports happen before the clock starts)


def _decode(job: tuple[MySQLSource, tuple[str, int], tuple[str, int], int]) -> int:
    from replicator.source.binlog import read_changes

    source, start, end, server_id = job
    return sum(1 for _ in read_changes(source, start=BinlogPosition(*start),
                                       end=BinlogPosition(*end), tables=None,
                                       server_id=server_id))


def _round(source: MySQLSource, ranges: list[tuple[BinlogPosition, BinlogPosition]],
           server_id: int) -> tuple[int, float]:
    with get_context("forkserver").Pool(len(ranges)) as pool:
        pool.map(_warm, range(len(ranges)))
        started = time.perf_counter()
        counts = pool.map(_decode, [(source, (a.file, a.pos), (b.file, b.pos), server_id + i)
                                    for i, (a, b) in enumerate(ranges)])
        return sum(counts), time.perf_counter() - started


def run_decode_partitions(source: MySQLSource, start: BinlogPosition, end: BinlogPosition, *,
                          partitions: int, server_id: int, rounds: int = 3) -> dict[str, Any]:
    from replicator.source.binlog_ranges import split_range

    began = time.perf_counter()
    parts = split_range(source, start, end, partitions)
    split_seconds = time.perf_counter() - began
    rates: dict[int, list[float]] = {1: [], len(parts): []}
    rows: dict[int, int] = {}
    for _ in range(rounds):
        for count, ranges in ((1, [(start, end)]), (len(parts), parts)):
            decoded, seconds = _round(source, ranges, server_id + 100 * count)
            rows[count] = decoded
            rates[count].append(decoded / seconds if seconds else 0.0)
    one, many = statistics.median(rates[1]), statistics.median(rates[len(parts)])
    if rows[1] != rows[len(parts)]:
        raise AssertionError(f"the parts decoded {rows[len(parts)]} changes, the whole range "
                             f"{rows[1]}: the split lost or doubled transactions")
    return {
        "partitions": len(parts),
        "rows": rows[1],
        "split_seconds": round(split_seconds, 3),
        "rows_per_s_1": round(one),
        f"rows_per_s_{len(parts)}": round(many),
        "ratio": round(many / one, 2) if one else None,
        "rounds": rounds,
        "load_average": [round(x, 2) for x in os.getloadavg()],
    }
