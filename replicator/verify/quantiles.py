"""Bisection over a string or binary key: ranges cut at keys the source reads off its index.

A key with no arithmetic (a UUID in a CHAR(36), a VARCHAR name, a BINARY(16)) is cut where
the source's primary-key index puts every ``step``-th key (``checksum.quantile_sql``: a
chain of ``ORDER BY k LIMIT 1 OFFSET step`` from the last cut, which walks the range's keys
once in index order; the cuts come back as rows and go out as parameters, never as SQL
text). The whole table is cut first at every ``query_rows / factor``-th
key; ``factor`` consecutive pieces make one top range, whose buckets (``CASE WHEN key < ?``
over the cuts) each side sums in one query (``checksum.quantile_bucket_sql``). A bucket that
agrees costs those two numbers; one that differs is fetched (at most ``leaf_rows`` rows, or
when it cannot be cut further) or cut again at its own quantiles, down to the fetch size.

Each side compares the key in its own order: MySQL in the column's collation (usually case-
and pad-insensitive), the warehouse by bytes. A key the two orders place on different sides
of a cut lands in different buckets: both differ, both are fetched, and the leaf looks such
a one-sided key up by equality on both sides (``TableVerifier``), so the order costs fetches,
never a wrong verdict. Keys of one case and length (UUIDs, hex, codes) sort alike in both.

Where the two orders disagree on much of the table (mixed-case keys under a case-insensitive
collation: MariaDB puts ``k1 < K2 < k3``, bytes every ``K`` before every ``k``), a leaf's
byte range on the warehouse spans far more rows than its collation range in MySQL. Fetches
are then budgeted: once the walk has fetched as many rows as a fetch of the table would (each
row once a side, by the quantile pass), it stops (``OrdersDisagree``) and the table is
compared by fetching, and the report says why.

Sequential (one MySQL connection) and sized by ``query_rows`` alone: the integer walk's
parallel ranges and ``query_seconds`` sizing (``ranges``) are not applied here.
"""

from __future__ import annotations

from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from replicator.verify.checksum import (
    MYSQL,
    ChecksumPlan,
    HashDialect,
    quantile_bucket_sql,
    quantile_sql,
)
from replicator.verify.pace import Unpaced
from replicator.verify.ranges import FACTOR, LEAF_ROWS, QUERY_ROWS, RangeStats, bucket_sums

Bound = Any  # a key value as the source sends it; None: the table's end


class OrdersDisagree(Exception):
    """The walk fetched as many rows as a fetch of the table would: MySQL's collation and the
    warehouse's bytes order the keys too differently for ranges to pay."""

    def __init__(self, fetched: int) -> None:
        super().__init__(fetched)
        self.fetched = fetched


class QuantileWalker:
    """Runs one table's bisection over quantile keys; ``leaf(lower, upper)`` compares the
    rows of ``lower <= key < upper`` exactly (None: unbounded) and returns the rows it
    fetched. ``source`` and ``target`` run ``(sql, params)``; ``target_value`` turns a key
    value the source sent into the warehouse's parameter."""

    def __init__(self, plan: ChecksumPlan, target_dialect: HashDialect, *,
                 source: Callable[[str, list[Any]], list],
                 target: Callable[[str, list[Any]], list],
                 leaf: Callable[[Bound, Bound], int],
                 target_value: Callable[[Any], Any] = lambda value: value,
                 factor: int = FACTOR, leaf_rows: int = LEAF_ROWS,
                 query_rows: int = QUERY_ROWS, pacer: Any = None,
                 on_top: Callable[[int], None] | None = None, **_integer_walk: Any) -> None:
        """``_integer_walk``: the integer walk's settings (``parallel``, ``query_seconds``,
        ``first_rows``), which this walk does not have."""
        self.plan = plan
        self._dialect = target_dialect
        self._source = source
        self._target = target
        self._leaf = leaf
        self._target_value = target_value
        self.factor = max(2, factor)
        self.leaf_rows = leaf_rows
        self.query_rows = query_rows
        self.pacer = pacer or Unpaced()
        self._on_top = on_top
        self.stats = RangeStats()
        self._budget = 0  # rows the walk may fetch (``walk``)
        self._side: ThreadPoolExecutor | None = None

    def walk(self, estimated_rows: int = 0) -> RangeStats:
        """Compare the whole key space; ``estimated_rows``: the source's estimate of the
        table's rows (the fetch budget's floor)."""
        step = max(1, self.query_rows // self.factor)
        if self.pacer.rows_per_query is not None:
            step = max(1, min(step, self.pacer.rows_per_query // self.factor))
        cuts, read = self._quantiles(None, None, step)
        bounds = [None, *cuts, None]
        # Both sides of the table's rows: what a fetch of the table costs. The cuts say
        # ~ step rows each, fewer than there are where a composite key's leading value
        # spans more than a step (passed whole); the estimate covers those.
        self._budget = 2 * max(estimated_rows, (read + 1) * step)
        # The warehouse computes a range while MySQL computes the same (the integer walk
        # does the same): a range costs the slower side, not both.
        with ThreadPoolExecutor(max_workers=1, thread_name_prefix="verify-target") as side:
            self._side = side
            for start in range(0, len(bounds) - 1, self.factor):
                self._check(bounds[start:start + self.factor + 1], parent_rows=None)
        return self.stats

    def _quantiles(self, lower: Bound, upper: Bound, step: int) -> tuple[list[Any], int]:
        """Every ``step``-th key strictly inside the range in the source's order, kept only
        where it is also in the warehouse's order; and how many the source sent.

        The warehouse orders a string by its code points (UTF-8 bytes) and bytes as bytes,
        as Python compares them: a cut that sorts before the previous one there ('K0017'
        after 'k0001' in a case-insensitive collation) would make the warehouse's bucket
        between them empty and the next one span every key in between, so it is dropped
        (its two buckets become one). A composite key's repeated leading value goes too."""
        self.pacer.wait()
        cuts: list[Any] = []
        read = 0
        kept, at, start, offset = lower, lower, ">=", step
        while True:
            sql = quantile_sql(self.plan, start if at is not None else None, upper is not None)
            rows = self._source(sql, [b for b in (at, upper) if b is not None] + [offset])
            if not rows:
                return cuts, read
            ((at,),) = rows
            # After a cut, strictly after it: a composite key's leading value repeated over
            # more than ``step`` rows is passed, not returned again.
            read, start, offset = read + 1, ">", step - 1
            if (kept is None or kept < at) and (upper is None or at < upper):
                cuts.append(at)
                kept = at

    def _check(self, bounds: list[Bound], parent_rows: int | None) -> None:
        """One checksum query per side over ``bounds[0] <= key < bounds[-1]``, a bucket
        between each two consecutive bounds."""
        lower, upper, cuts = bounds[0], bounds[-1], bounds[1:-1]
        ends = [b for b in (lower, upper) if b is not None]
        has = (lower is not None, upper is not None)
        assert self._side is not None  # ``walk`` opened it
        target_rows = self._side.submit(
            self._target, quantile_bucket_sql(self.plan, self._dialect, len(cuts), *has),
            [self._target_value(v) for v in (*cuts, *ends)])
        try:
            self.pacer.wait()
            source = bucket_sums(self._source(
                quantile_bucket_sql(self.plan, MYSQL, len(cuts), *has), [*cuts, *ends]))
        finally:
            target = bucket_sums(target_rows.result())
        counted = sum(n for n, _ in source.values())
        self.pacer.charge(counted)
        self.stats.checksum_queries += 1
        if parent_rows is None:  # a top range: its rows are the table's
            self.stats.source_rows += counted
            self.stats.target_rows += sum(n for n, _ in target.values())
            self.stats.top_ranges.append((0, 0, counted, 0.0))
            if self._on_top is not None:
                self._on_top(counted)
        for bucket in range(len(cuts) + 1):
            if source.get(bucket) == target.get(bucket):
                if bucket in source or bucket in target:
                    self.stats.ranges_equal += 1
                continue
            rows = max(source.get(bucket, (0, 0))[0], target.get(bucket, (0, 0))[0])
            start, end = bounds[bucket], bounds[bucket + 1]
            # Cut again only what got smaller: a cut the two orders disagree on (a
            # case-insensitive collation) must not split the same rows forever.
            smaller = parent_rows is None or rows < parent_rows
            inner = (self._quantiles(start, end, -(-rows // self.factor))[0]
                     if rows > self.leaf_rows and smaller else [])
            if inner:
                self._check([start, *inner, end], parent_rows=rows)
                continue
            self.stats.leaves += 1
            self.stats.fetched_rows += self._leaf(start, end)
            if self.stats.fetched_rows > self._budget:
                raise OrdersDisagree(self.stats.fetched_rows)
