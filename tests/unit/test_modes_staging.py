"""Modes at the staging step (pure): what rows a batch stages for changelog, log and scd2."""

from __future__ import annotations

from pathlib import Path

from replicator.config import load_pipeline
from replicator.model import change_batch as cb
from replicator.model.changes import BinlogPosition, ChangeEvent
from replicator.plan import DUCKDB, build_plan, offline_catalog, render_sql
from replicator.plan.model import STAGE_CHANGE_SEQ, STAGE_OP, STAGE_TS, STAGE_VALID_TO
from tests.fixtures.row_transforms import stage_events

ROOT = Path(__file__).resolve().parents[2]


def _plan():
    pipeline = load_pipeline(ROOT / "pipelines" / "modes.yaml", environ={})
    return build_plan(pipeline, offline_catalog(pipeline))


def _event(op, before, after, pos, index=0, ts=1000, table="shop.customers"):
    return ChangeEvent(table=table, op=op, position=BinlogPosition("mysql-bin.000002", pos),
                       row_index=index, ts_ms=ts, before=before, after=after)


def _versions(events):
    """The scd2 customers' staged versions: (op, tier, name, valid from ms, valid to ms,
    change seq)."""
    rows = stage_events(_plan().table("shop.customers"), events).to_pylist()

    def ms(stamp):
        return None if stamp is None else round(stamp.timestamp() * 1000)

    return [(r[STAGE_OP], r["TIER"], r["NAME"], ms(r[STAGE_TS]), ms(r[STAGE_VALID_TO]),
             r[STAGE_CHANGE_SEQ]) for r in rows]


def _row(id_, tier="a", name="x"):
    return {"id": id_, "name": name, "email": None, "tier": tier, "city": None}


def test_change_seq_sorts_like_the_binlog_order():
    a = _event("c", None, _row(1), 999, 7)
    b = _event("c", None, _row(2), 1000, 0)
    c = ChangeEvent(table="shop.customers", op="c", position=BinlogPosition("mysql-bin.000010", 4),
                    row_index=0, ts_ms=0, after=_row(3))
    # a snapshot read at a transaction's start position comes before that transaction
    read = _event("r", None, _row(4), 1000, 5)
    rows = stage_events(_plan().table("shop.customers"), [a, b, c, read]).to_pylist()
    seq = {r["ID"]: r[STAGE_CHANGE_SEQ] for r in rows}
    assert seq[1] < seq[4] < seq[2] < seq[3]
    assert seq[1] == cb.CHANGE_SEQ_FORMAT % (2, 999, 1, 7)
    assert seq[4] < cb.change_seq_at(2, 1000) <= seq[2]  # a TRUNCATE there: after the read


def test_versions_fold_untracked_changes_and_split_on_tracked_ones():
    r0 = _row(1, "a", "x")
    r1 = {**r0, "name": "y"}  # untracked
    r2 = {**r1, "tier": "b"}  # tracked
    events = [_event("c", None, r0, 10, ts=1), _event("u", r0, r1, 20, ts=2),
              _event("u", r1, r2, 30, ts=3), _event("d", r2, None, 40, ts=4),
              _event("c", None, r0, 50, ts=5)]
    found = _versions(events)
    assert [v[:5] for v in found] == [
        ("u", "a", "y", 1, 3), ("u", "b", "y", 3, 4), ("c", "a", "x", 5, None)]
    assert found[1][5] == cb.CHANGE_SEQ_FORMAT % (2, 40, 1, 0)  # ended by the delete


def test_a_leading_delete_ends_the_targets_version():
    found = _versions([_event("d", _row(1), None, 10, ts=9)])
    assert [(v[0], v[3], v[4]) for v in found] == [("d", 9, None)]


def test_filter_drops_rows_that_never_matched_and_deletes_rows_that_leave():
    """Every change (changelog): a row the filter never matched is dropped, a row that
    leaves it becomes a delete."""
    import dataclasses

    from replicator.plan.expressions.spark_types import STRING

    table = dataclasses.replace(_plan().table("shop.order_events"), filter="note <> 'test'",
                                filter_inputs=(("note", STRING),))
    keep = {"id": 1, "order_id": 2, "note": "a", "payload": None}
    test = {**keep, "id": 2, "note": "test"}
    events = [_event("c", None, keep, 10, table="shop.order_events"),
              _event("c", None, test, 10, 1, table="shop.order_events"),
              _event("u", keep, {**keep, "note": "test"}, 20, table="shop.order_events")]
    rows = stage_events(table, events).to_pylist()
    assert [(r[STAGE_OP], r["ID"]) for r in rows] == [("c", 1), ("d", 1)]


def test_changelog_stages_every_change_and_merge_stages_the_last():
    plan = _plan()
    events = [_event("c", None, {"id": 1, "order_id": 2, "note": "a", "payload": None}, 10,
                     table="shop.order_events"),
              _event("u", {"id": 1, "order_id": 2, "note": "a", "payload": None},
                     {"id": 1, "order_id": 2, "note": "b", "payload": None}, 10, 1,
                     table="shop.order_events")]
    staged = stage_events(plan.table("shop.order_events"), events).to_pydict()
    assert staged["NOTE"] == ["a", "b"] and staged["_OP"] == ["c", "u"]
    assert staged["_DELETED"] == [False, False] and staged["_TRANSACTION_ORDER"] == [0, 1]
    products = [_event("c", None, {"sku": "a", "title": "t", "price": None}, 10,
                       table="shop.products"),
                _event("d", {"sku": "a", "title": "t", "price": None}, None, 10, 1,
                       table="shop.products")]
    assert stage_events(plan.table("shop.products"), products).to_pydict()["_REPLICATOR_OP"] == ["d"]


def test_modes_change_the_plan():
    plan = _plan()
    orders, changes, customers = (plan.table(n) for n in ("orders", "order_events", "customers"))
    assert orders.log_table == "ORDERS_LOG" and orders.keeps_every_change
    assert changes.mode == "changelog"
    assert "PRIMARY KEY (\"ID\")" not in render_sql(changes, DUCKDB)
    assert "PRIMARY KEY (\"ID\")" in render_sql(orders, DUCKDB)
    assert customers.track_history == ("TIER", "CITY")
    assert [c.target_column for c in customers.tracked_columns] == ["TIER", "CITY"]
    assert [c.target_column for c in customers.columns][-4:] == [
        "_VALID_FROM", "_VALID_TO", "_IS_CURRENT", "_CHANGE_SEQ"]
