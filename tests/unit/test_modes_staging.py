"""Modes at the staging step (pure): what rows a batch stages for changelog, log and scd2."""

from __future__ import annotations

from pathlib import Path

from replicator.config import load_pipeline
from replicator.model.changes import BinlogPosition, ChangeEvent
from replicator.plan import DUCKDB, build_plan, offline_catalog, render_sql
from replicator.sink.staging import stage_changes
from replicator.sink.versions import change_seq, ordered_changes, versions

ROOT = Path(__file__).resolve().parents[2]


def _plan():
    pipeline = load_pipeline(ROOT / "pipelines" / "modes.yaml", environ={})
    return build_plan(pipeline, offline_catalog(pipeline))


def _event(op, before, after, pos, index=0, ts=1000, table="shop.customers"):
    return ChangeEvent(table=table, op=op, position=BinlogPosition("mysql-bin.000002", pos),
                       row_index=index, ts_ms=ts, before=before, after=after)


def test_change_seq_sorts_like_the_binlog_order():
    a = _event("c", None, {"id": 1}, 999, 7)
    b = _event("c", None, {"id": 1}, 1000, 0)
    c = ChangeEvent(table="t.t", op="c", position=BinlogPosition("mysql-bin.000010", 4),
                    row_index=0, ts_ms=0, after={"id": 1})
    assert change_seq(a) < change_seq(b) < change_seq(c)
    # a snapshot read at a transaction's start position comes before that transaction
    read = _event("r", None, {"id": 1}, 1000, 5)
    assert change_seq(a) < change_seq(read) < change_seq(b)


def test_versions_fold_untracked_changes_and_split_on_tracked_ones():
    r0 = {"id": 1, "tier": "a", "name": "x"}
    r1 = {**r0, "name": "y"}  # untracked
    r2 = {**r1, "tier": "b"}  # tracked
    events = [_event("c", None, r0, 10, ts=1), _event("u", r0, r1, 20, ts=2),
              _event("u", r1, r2, 30, ts=3), _event("d", r2, None, 40, ts=4),
              _event("c", None, r0, 50, ts=5)]
    found = versions(ordered_changes(events, ["id"], None), ["id"], ["tier"])
    assert [(v.op, v.image, v.valid_from_ms, v.valid_to_ms) for v in found] == [
        ("u", r1, 1, 3), ("u", r2, 3, 4), ("c", r0, 5, None)]
    assert found[1].change_seq == change_seq(events[3])  # ended by the delete


def test_a_leading_delete_ends_the_targets_version():
    row = {"id": 1, "tier": "a"}
    found = versions(ordered_changes([_event("d", row, None, 10, ts=9)], ["id"], None), ["id"], [])
    assert [(v.op, v.valid_from_ms, v.valid_to_ms) for v in found] == [("d", 9, None)]


def test_filter_drops_rows_that_never_matched_and_deletes_rows_that_leave():
    def passes(image):
        return image["tier"] != "test"

    keep, test = {"id": 1, "tier": "a"}, {"id": 2, "tier": "test"}
    events = [_event("c", None, keep, 10), _event("c", None, test, 10, 1),
              _event("u", keep, {**keep, "tier": "test"}, 20)]
    ops = [(op, image["id"]) for op, image, _ in ordered_changes(events, ["id"], passes)]
    assert ops == [("c", 1), ("d", 1)]


def test_changelog_stages_every_change_and_merge_stages_the_last():
    plan = _plan()
    events = [_event("c", None, {"id": 1, "order_id": 2, "note": "a", "payload": None}, 10,
                     table="shop.order_events"),
              _event("u", {"id": 1, "order_id": 2, "note": "a", "payload": None},
                     {"id": 1, "order_id": 2, "note": "b", "payload": None}, 10, 1,
                     table="shop.order_events")]
    staged = stage_changes(plan.table("shop.order_events"), events).to_pydict()
    assert staged["NOTE"] == ["a", "b"] and staged["_OP"] == ["c", "u"]
    assert staged["_DELETED"] == [False, False] and staged["_TRANSACTION_ORDER"] == [0, 1]
    products = [_event("c", None, {"sku": "a", "title": "t", "price": None}, 10,
                       table="shop.products"),
                _event("d", {"sku": "a", "title": "t", "price": None}, None, 10, 1,
                       table="shop.products")]
    assert stage_changes(plan.table("shop.products"), products).to_pydict()["_REPLICATOR_OP"] == ["d"]


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
