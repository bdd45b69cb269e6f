"""The bisection's top ranges, sized as they go: each source checksum query aims at
``query_seconds`` by the rows per second the last ones counted (pt-table-checksum's
``--chunk-time``), grows at most ``GROWTH`` times a step, and a pacer caps its rows. A fake
source: dense keys, a clock that a query moves by its rows at a given speed."""

from __future__ import annotations

import itertools

from replicator.verify.checksum import ChecksumPlan
from replicator.verify.pace import Pacer
from replicator.verify.ranges import GROWTH, RangeWalker

PLAN = ChecksumPlan("id", "ID", (), "", "", "source", "target")


def _walker(rows: int, rows_per_second: float, **options):
    now = [0.0]

    def buckets(params):
        lower, width, _, upper = params
        found: dict[int, list[int]] = {}
        for key in range(max(lower, 0), min(upper, rows)):
            entry = found.setdefault((key - lower) // width, [0, 0])
            entry[0] += 1
            entry[1] += key * 7919 % 1000003
        return [(b, n, s) for b, (n, s) in found.items()]

    def source(sql, params):
        result = buckets(params)
        now[0] += sum(n for _, n, _ in result) / rows_per_second
        return result

    walker = RangeWalker(PLAN, source=source, target=lambda sql, params: buckets(params),
                         leaf=lambda lower, upper: 0, parallel=1, clock=lambda: now[0],
                         **options)
    walker.walk((0, rows - 1), (0, rows - 1), rows)
    return walker.stats


def test_top_ranges_converge_on_the_query_time():
    # 200,000 rows/s: a quarter second is 50,000 rows; the first range is 10,000.
    stats = _walker(1_000_000, 200_000, query_seconds=0.25)
    sizes = [rows for _, _, rows, _ in stats.top_ranges]
    assert sizes[0] == 10_000
    assert all(b <= GROWTH * a for a, b in itertools.pairwise(sizes))
    assert all(49_900 <= size <= 50_000 for size in sizes[3:-1])
    assert max(seconds for *_, seconds in stats.top_ranges) <= 0.25 + 1e-9
    assert sum(sizes) == stats.source_rows == 1_000_000


def test_a_slow_source_gets_smaller_queries():
    stats = _walker(100_000, 20_000, query_seconds=0.25)  # 5,000 rows a quarter second
    assert [rows for _, _, rows, _ in stats.top_ranges][1:4] == [5_000] * 3


def test_fixed_ranges_without_query_seconds():
    stats = _walker(250_000, 1_000, query_seconds=None, query_rows=100_000)
    assert [rows for _, _, rows, _ in stats.top_ranges] == [83_334, 83_334, 83_332]


def test_a_pacer_caps_the_rows_per_query():
    pacer = Pacer(2_000, clock=lambda: 0.0, sleep=lambda s: None)  # 500 rows a query
    stats = _walker(20_000, 1_000_000, query_seconds=0.25, pacer=pacer)
    assert {rows for _, _, rows, _ in stats.top_ranges} == {500}
    assert pacer.charges == [500] * 40
