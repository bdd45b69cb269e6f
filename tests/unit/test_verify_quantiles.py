"""The quantile walk (``verify.quantiles``) over fake sides that each order the key their
own way, as MySQL (a case-insensitive collation) and the warehouse (bytes) do: equal sides
cost checksums only; one changed row costs one small leaf around it; keys the two orders
place apart cost leaves, and where they disagree throughout the walk stops
(``OrdersDisagree``) instead of fetching without end. The fake reads the bounds a query has
from its SQL (``k >= ?``, ``k < ?``) and its values only from the parameters."""

from __future__ import annotations

from collections.abc import Callable

import pytest

from replicator.verify.checksum import DUCKDB, ChecksumPlan
from replicator.verify.quantiles import OrdersDisagree, QuantileWalker

PLAN = ChecksumPlan("k", "K", (), "t", "t", "", "", cut="quantiles", key_kind="string",
                    source_relation="src", target_relation="tgt")
SMALL = {"factor": 4, "leaf_rows": 8, "query_rows": 64}


def _side(rows: dict[str, int], order: Callable[[str], object]):
    """A database holding ``rows`` (key -> row hash), comparing keys by ``order``."""
    ordered = sorted(rows, key=order)

    def run(sql: str, params: list) -> list:
        params = list(params)
        where = sql.split("WHERE", 1)[1] if "WHERE" in sql else ""
        has_lower, has_upper = (">= " in where), ("< " in where)
        if "OFFSET" in sql:  # the key ``offset`` keys on from a start (or after one)
            offset = params.pop()
            after = "> " in where
            start = params.pop(0) if has_lower or after else None
            upper = params.pop(0) if has_upper else None
            inside = [k for k in ordered if (start is None or order(k) > order(start) or (
                has_lower and order(k) == order(start)))
                and (upper is None or order(k) < order(upper))]
            return [(inside[offset],)] if offset < len(inside) else []
        upper = params.pop() if has_upper else None
        lower = params.pop() if has_lower else None
        cuts = params
        found: dict[int, list[int]] = {}
        for key in ordered:
            if (lower is not None and order(key) < order(lower)) or (
                    upper is not None and order(key) >= order(upper)):
                continue
            bucket = next((i for i, c in enumerate(cuts) if order(key) < order(c)), len(cuts))
            entry = found.setdefault(bucket, [0, 0])
            entry[0] += 1
            entry[1] += rows[key]
        return [(b, n, s) for b, (n, s) in found.items()]

    return run


def _walk(source_rows, target_rows, source_order=str, target_order=str):
    leaves: list[tuple] = []

    def inside(rows, order, lower, upper):
        return [k for k in rows if (lower is None or order(k) >= order(lower))
                and (upper is None or order(k) < order(upper))]

    def leaf(lower, upper):
        # As ``TableVerifier``'s leaf counts: the rows each side's range holds, in its own
        # order, and a lookup on both sides of each key only one side's range held.
        leaves.append((lower, upper))
        source = set(inside(source_rows, source_order, lower, upper))
        target = set(inside(target_rows, target_order, lower, upper))
        return len(source) + len(target) + 2 * len(source ^ target)

    walker = QuantileWalker(PLAN, DUCKDB, source=_side(source_rows, source_order),
                            target=_side(target_rows, target_order), leaf=leaf, **SMALL)
    return walker.walk(), leaves


ROWS = {f"k{i:04d}": i * 7919 % 1000003 for i in range(400)}


def test_equal_sides_cost_checksums_only():
    stats, leaves = _walk(ROWS, dict(ROWS))
    assert leaves == [] and stats.fetched_rows == 0
    assert stats.source_rows == stats.target_rows == 400
    # Cuts every 16th key: 25 pieces, 4 to a top range.
    assert stats.checksum_queries == 7


def test_one_changed_row_costs_one_small_leaf_around_it():
    target = {**ROWS, "k0123": 0}
    stats, leaves = _walk(ROWS, target)
    ((lower, upper),) = leaves
    assert lower <= "k0123" < upper
    assert stats.fetched_rows <= 2 * SMALL["leaf_rows"]


def _cased(every: int) -> dict[str, int]:
    return {(k.upper() if i % every == 0 else k): h for i, (k, h) in enumerate(ROWS.items())}


def test_a_few_keys_the_orders_place_apart_cost_leaves():
    # Every 20th key upper-case: 'K0020' sorts among the k's case-insensitively, before
    # them all in bytes; each bucket holding one differs and is fetched. Cuts such as
    # 'K0020' are dropped (they would make the warehouse's next bucket span every key up
    # to the next cut): with them this walk fetched more than the table.
    rows = _cased(20)
    stats, leaves = _walk(rows, dict(rows), source_order=str.lower, target_order=str)
    assert len(leaves) >= 20 and stats.fetched_rows < 2 * 400


def test_keys_the_orders_disagree_on_throughout_stop_the_walk():
    rows = _cased(2)  # k0001 < K0002 < k0003 case-insensitively; every K first in bytes
    with pytest.raises(OrdersDisagree) as stopped:
        _walk(rows, dict(rows), source_order=str.lower, target_order=str)
    assert stopped.value.fetched > 2 * 400  # a fetch of the table (both sides) was spent
