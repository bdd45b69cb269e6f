"""Bisection over key ranges: checksums inside both databases down to the differing rows.

The key space of the table's leading integer key column, ``[lowest, highest]`` over both
sides (MIN/MAX: an index lookup each), is cut into top ranges of about ``query_rows`` rows
(by the source's row estimate), so no query scans much more than that. One query per side
and range returns, per bucket (``factor`` buckets of equal key width), the row count and
the checksum (``checksum.ChecksumPlan``): a bucket that agrees costs those two numbers and
is never read again. A bucket that differs is either small (at most ``leaf_rows`` rows on
both sides, or one key value wide): its rows are fetched from both sides and compared
exactly (``leaf``, the same canonical comparison as a full fetch, which names each key);
or it is split again the same way. ``parallel`` top ranges are checked at once, each
thread with its own MySQL connection (MySQL runs one query on one core: the checksum's MD5
is most of verify's time), while the warehouse's queries and the fetches take turns on its
one connection (the drivers wait on the database, not on Python). Each range's warehouse
query runs while MySQL computes the same range (``_side``), so a range costs the slower
side, not both.

Top ranges are sized as they go (pt-table-checksum's ``--chunk-time``): the first covers
about ``first_rows`` rows by the source's estimate; after each, the next is sized from the
rows it found per key and the rows per second the source counted, so that one source query
takes about ``query_seconds`` (well under a second, so a busy production server never runs
a long verify query), growing at most ``GROWTH`` times per step, up to ``query_rows``.
``query_seconds=None`` cuts the key space up front into ranges of ``query_rows`` (by the
estimate), as a test that counts queries wants. A ``pacer`` (``--max-rows-per-second``)
caps the rows per query at its share and waits before each source query (``verify.pace``).

Leaves are small (``LEAF_ROWS``): a bucket query over a few thousand rows costs milliseconds,
a fetch of 2,000 rows per side through the exact comparison about 50; with top ranges sized
to a quarter second, buckets of 1-2k rows were fetched whole (100 differences in 1M rows,
``bench.verify``: 197-243k rows fetched at 2,000, 12k at 256).

A difference in ``d`` rows costs about ``d * depth`` bucket queries per side, each over
a shrinking range, plus ``d`` fetches of at most ``leaf_rows`` rows; an equal table one
pass of each database over its rows, computed where the rows are.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any

from replicator.verify.checksum import ChecksumPlan
from replicator.verify.pace import QUERY_SECONDS, Unpaced

FACTOR = 32  # buckets per range query (reladiff's bisection factor)
LEAF_ROWS = 256  # a differing bucket with at most this many rows is fetched (see below)
QUERY_ROWS = 100_000  # rows one top-level checksum query covers (source estimate)
PARALLEL = 2  # top-level ranges checked at once (each with its own MySQL connection)
FIRST_ROWS = 10_000  # the first top range (by the estimate), before anything was measured
MIN_ROWS = 1_000  # the fewest rows a top range is sized for (unless a pacer wants fewer)
GROWTH = 2  # a top range is at most this many times as wide as the one before

Buckets = dict[int, tuple[int, int]]  # bucket -> (rows, checksum)


@dataclass
class RangeStats:
    """What the walk cost: queries and rows on each side."""

    checksum_queries: int = 0  # per side (the source and the target ran as many)
    ranges_equal: int = 0  # buckets that agreed (never read again)
    leaves: int = 0  # ranges fetched row by row
    fetched_rows: int = 0  # rows fetched from both sides together
    source_rows: int = 0
    target_rows: int = 0
    leaf_bounds: list[tuple[int, int]] = field(default_factory=list)
    top_ranges: list[tuple[int, int, int, float]] = field(default_factory=list)  # (lower,
    # upper, source rows, source seconds) of each top query, in the order they ran


def bucket_sums(rows: list[tuple[Any, ...]]) -> Buckets:
    # Drivers return the aggregates as int, Decimal or text: all exact integers.
    return {int(b): (int(n), int(s or 0)) for b, n, s in rows if b is not None}


class RangeWalker:
    """Runs one table's bisection; ``leaf(lower, upper)`` compares a range's rows exactly
    and returns the number of rows it fetched.

    ``source(sql, params)`` may be called from ``parallel`` threads at once (the caller gives
    each thread its own MySQL connection); ``target`` and ``leaf`` are called by one thread
    at a time (a warehouse connection is not shared between threads)."""

    def __init__(self, plan: ChecksumPlan, *, source: Callable[[str, list[Any]], list],
                 target: Callable[[str, list[Any]], list], leaf: Callable[[int, int], int],
                 factor: int = FACTOR, leaf_rows: int = LEAF_ROWS,
                 query_rows: int = QUERY_ROWS, parallel: int = PARALLEL,
                 query_seconds: float | None = QUERY_SECONDS, first_rows: int = FIRST_ROWS,
                 pacer: Any = None, on_top: Callable[[int], None] | None = None,
                 clock: Callable[[], float] = time.perf_counter) -> None:
        """``on_top(rows)``: after each top query, the source rows it counted (progress)."""
        self.plan = plan
        self._source = source
        self._target = target
        self._leaf = leaf
        self.factor = max(2, factor)
        self.leaf_rows = leaf_rows
        self.query_rows = query_rows
        self.parallel = max(1, parallel)
        self.query_seconds = query_seconds
        self.first_rows = first_rows
        self.pacer = pacer or Unpaced()
        self._on_top = on_top
        self._clock = clock
        self.stats = RangeStats()
        self._lock = threading.Lock()  # the target, the leaves and the stats
        self._tops = threading.Lock()  # the next top range and its sizing
        self._cursor = self._highest = self._width = 0
        self._density = 1.0  # rows per key value, as last measured
        self._rows = 0  # rows the next top range is sized for

    def walk(self, source_bounds: tuple[Any, Any], target_bounds: tuple[Any, Any],
             estimated_rows: int) -> RangeStats:
        """Compare the whole key space; ``*_bounds``: each side's (MIN, MAX) of the key."""
        ends = [int(v) for pair in (source_bounds, target_bounds) for v in pair
                if v is not None]
        if not ends:
            return self.stats  # both sides empty
        lowest, highest = min(ends), max(ends) + 1
        most = self.query_rows
        if self.pacer.rows_per_query is not None:
            most = min(most, self.pacer.rows_per_query)
        self._most, self._least = most, min(MIN_ROWS, most)
        self._rows = most if self.query_seconds is None else min(most, self.first_rows)
        self._density = max(estimated_rows, 1) / (highest - lowest)
        self._width = max(1, -(-(highest - lowest) // max(1, -(-max(estimated_rows, 1)
                                                               // self._rows))))
        self._cursor, self._highest = lowest, highest
        self._side = ThreadPoolExecutor(max_workers=self.parallel,
                                        thread_name_prefix="verify-target")
        with self._side:
            if self.parallel == 1:
                self._work()
                return self.stats
            with ThreadPoolExecutor(max_workers=self.parallel,
                                    thread_name_prefix="verify-range") as pool:
                for done in [pool.submit(self._work) for _ in range(self.parallel)]:
                    done.result()
        return self.stats

    def _target_locked(self, sql: str, params: list[Any]) -> list:
        with self._lock:  # one warehouse connection: its queries and the leaves take turns
            return self._target(sql, params)

    def _work(self) -> None:
        while (top := self._next_top()) is not None:
            self._check(*top, top=True)

    def _next_top(self) -> tuple[int, int] | None:
        with self._tops:
            if self._cursor >= self._highest:
                return None
            lower = self._cursor
            self._cursor = min(self._highest, lower + self._width)
            return lower, self._cursor

    def _learn(self, lower: int, upper: int, rows: int, seconds: float) -> None:
        """Size the next top range from one just run (``query_seconds``)."""
        with self._tops:
            self.stats.top_ranges.append((lower, upper, rows, seconds))
            if self.query_seconds is None:
                return
            if rows and seconds > 0:
                self._rows = int(min(self._most, max(self._least, rows / seconds
                                                     * self.query_seconds)))
            if rows:
                self._density = rows / (upper - lower)
            width = max(1, int(self._rows / self._density))
            self._width = min(width, GROWTH * self._width)

    def _check(self, lower: int, upper: int, *, top: bool = False) -> None:
        width = max(1, -(-(upper - lower) // self.factor))
        params = [lower, width, lower, upper]
        # The warehouse computes its side while MySQL computes its own: a range costs the
        # slower of the two, not their sum.
        target_rows = self._side.submit(self._target_locked, self.plan.target_sql, params)
        try:
            self.pacer.wait()
            started = self._clock()
            source = bucket_sums(self._source(self.plan.source_sql, params))
            seconds = self._clock() - started
        finally:
            target = bucket_sums(target_rows.result())
        counted = sum(n for n, _ in source.values())
        self.pacer.charge(counted)
        if top:
            self._learn(lower, upper, counted, seconds)
            if self._on_top is not None:
                self._on_top(counted)
        with self._lock:
            self.stats.checksum_queries += 1
            if top:
                self.stats.source_rows += counted
                self.stats.target_rows += sum(n for n, _ in target.values())
        differing = []
        for bucket in sorted(set(source) | set(target)):
            if source.get(bucket) == target.get(bucket):
                with self._lock:
                    self.stats.ranges_equal += 1
                continue
            rows = max(source.get(bucket, (0, 0))[0], target.get(bucket, (0, 0))[0])
            start = max(lower, lower + bucket * width)
            end = min(upper, lower + (bucket + 1) * width)
            if end <= start:  # a bucket number only rounding could give (FLOOR of a float)
                start, end = lower, upper
            differing.append((start, end, rows))
        for start, end, rows in _merged(differing):
            if rows <= self.leaf_rows or end - start <= 1 or (start, end) == (lower, upper):
                with self._lock:
                    self.stats.leaves += 1
                    self.stats.leaf_bounds.append((start, end))
                    self.stats.fetched_rows += self._leaf(start, end)
            else:
                self._check(start, end)


def _merged(ranges: list[tuple[int, int, int]]) -> list[tuple[int, int, int]]:
    """Overlapping ranges as one (only a rounded bucket number makes them overlap)."""
    merged: list[tuple[int, int, int]] = []
    for start, end, rows in sorted(ranges):
        if merged and start < merged[-1][1]:
            last = merged[-1]
            merged[-1] = (last[0], max(last[1], end), last[2] + rows)
        else:
            merged.append((start, end, rows))
    return merged
