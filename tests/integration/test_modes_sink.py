"""Replication modes through the real sinks (DuckDB and fakesnow), from hand-built changes.

The pipeline is ``pipelines/modes.yaml`` (offline catalog), so the SQL run here is exactly
the golden SQL. Every test checks the whole target table, replays batches (same batch id:
skipped by the state table; a new batch id for old changes: SCD2 must not rewrite history).
"""

from __future__ import annotations

import dataclasses
import datetime as dt
import hashlib
from decimal import Decimal
from pathlib import Path

import pytest

from replicator.config import load_pipeline
from replicator.model.changes import BinlogPosition, ChangeEvent
from replicator.model.pipeline import DuckDBTarget, SnowflakeTarget, TargetConfig
from replicator.plan import DUCKDB, SNOWFLAKE, build_plan, offline_catalog
from replicator.plan.statements.names import log_name, target_name
from replicator.sink import open_sink
from tests.fixtures.row_transforms import stage_events

ROOT = Path(__file__).resolve().parents[2]
UTC = dt.UTC


def _pipeline(kind: str):
    pipeline = load_pipeline(ROOT / "pipelines" / "modes.yaml", environ={})
    warehouse = (
        DuckDBTarget(path=":memory:", schema="main")
        if kind == "duckdb"
        else SnowflakeTarget(database="ANALYTICS", schema="RAW", account="fake", user="u",
                             password="p")
    )
    return dataclasses.replace(pipeline, target=TargetConfig(warehouse=warehouse))


@pytest.fixture(params=["duckdb", "snowflake"])
def modes(request):
    kind = request.param
    if kind == "snowflake":
        fakesnow = pytest.importorskip("fakesnow")
        patch = fakesnow.patch(create_database_on_connect=True, create_schema_on_connect=True)
        patch.__enter__()
    pipeline = _pipeline(kind)
    plan = build_plan(pipeline, offline_catalog(pipeline))
    sink = open_sink(pipeline, plan)
    sink.prepare()
    yield sink, plan, (DUCKDB if kind == "duckdb" else SNOWFLAKE)
    sink.close()
    if kind == "snowflake":
        patch.__exit__(None, None, None)


class Binlog:
    """Hand-built transactions at increasing positions (one file, pos grows by 100)."""

    def __init__(self) -> None:
        self.pos = 4

    def txn(self, table: str, *changes, ts_ms: int) -> list[ChangeEvent]:
        self.pos += 100
        start = BinlogPosition("mysql-bin.000001", self.pos)
        return [
            ChangeEvent(table=table, op=op, position=start, row_index=i, ts_ms=ts_ms,
                        before=before, after=after, transaction_id=f"0-1-{self.pos}",
                        end_position=BinlogPosition("mysql-bin.000001", self.pos + 99))
            for i, (op, before, after) in enumerate(changes)
        ]


def _apply(sink, plan, source_name, batch_id, events):
    table = plan.table(source_name)
    return sink.apply(table, batch_id, {"file": "mysql-bin.000001", "pos": 1}, stage_events(table, events))


def _rows(sink, sql):
    cursor = sink.connection.cursor()
    try:
        cursor.execute(sql)
        names = [d[0].upper() for d in cursor.description]
        return [dict(zip(names, row, strict=True)) for row in cursor.fetchall()]
    finally:
        cursor.close()


def _ms(value) -> int | None:
    if value is None:
        return None
    if value.tzinfo is None:
        value = value.replace(tzinfo=UTC)
    return int(value.timestamp() * 1000)


# -- changelog -------------------------------------------------------------------------------


def test_changelog_appends_every_change_exactly_once(modes):
    sink, plan, dialect = modes
    log = Binlog()
    e1 = {"id": 1, "order_id": 10, "note": "it's \"new\"", "payload": '{"a": 1}'}
    e1b = {**e1, "note": "paid"}
    e2 = {"id": 2, "order_id": 10, "note": None, "payload": None}
    batch = (
        log.txn("shop.order_events", ("c", None, e1), ("c", None, e2), ts_ms=1_000)
        + log.txn("shop.order_events", ("u", e1, e1b), ("u", e1b, {**e1b, "note": "shipped"}),
                  ts_ms=1_000)
        + log.txn("shop.order_events", ("d", e2, None), ts_ms=2_000)
    )
    first = _apply(sink, plan, "shop.order_events", 0, batch)
    again = _apply(sink, plan, "shop.order_events", 0, batch)
    assert (first.skipped, first.rows, again.skipped) == (False, 5, True)
    table = plan.table("shop.order_events")
    rows = _rows(sink, f'SELECT "ID", "NOTE", "_OP", "_DELETED", "_TS_MS", "_BINLOG_POS", '
                       f'"_TRANSACTION_ID", "_TRANSACTION_ORDER" FROM {target_name(table, dialect)} '
                       f'ORDER BY "_BINLOG_POS", "_TRANSACTION_ORDER"')
    assert [tuple(r.values()) for r in rows] == [
        (1, "it's \"new\"", "c", False, 1000, 104, "0-1-104", 0),
        (2, None, "c", False, 1000, 104, "0-1-104", 1),
        (1, "paid", "u", False, 1000, 204, "0-1-204", 0),
        (1, "shipped", "u", False, 1000, 204, "0-1-204", 1),
        (2, None, "d", True, 2000, 304, "0-1-304", 0),
    ]


def test_log_table_keeps_every_change_beside_the_merged_table(modes):
    sink, plan, dialect = modes
    log = Binlog()
    o1 = {"id": 1, "customer_id": 7, "status": "new", "amount": Decimal("10.50")}
    o2 = {"id": 2, "customer_id": 7, "status": "new", "amount": Decimal("3.00")}
    batch = (
        log.txn("shop.orders", ("c", None, o1), ("c", None, o2), ts_ms=1_000)
        + log.txn("shop.orders", ("u", o1, {**o1, "status": "paid"}), ts_ms=2_000)
        + log.txn("shop.orders", ("u", o2, {**o2, "id": 3}), ts_ms=3_000)  # key change
    )
    _apply(sink, plan, "shop.orders", 0, batch)
    assert _apply(sink, plan, "shop.orders", 0, batch).skipped
    table = plan.table("shop.orders")
    merged = _rows(sink, f'SELECT "ID", "STATUS", "_OP" FROM {target_name(table, dialect)} ORDER BY "ID"')
    assert [tuple(r.values()) for r in merged] == [(1, "paid", "u"), (3, "new", "c")]
    logged = _rows(sink, f'SELECT "ID", "STATUS", "_OP", "_DELETED" FROM {log_name(table, dialect)} '
                         'ORDER BY "_BINLOG_POS", "_TRANSACTION_ORDER", "_OP" DESC')
    # A key update is logged as the delete of the old key and the insert of the new one.
    assert [tuple(r.values()) for r in logged] == [
        (1, "new", "c", False), (2, "new", "c", False), (1, "paid", "u", False),
        (2, "new", "d", True), (3, "new", "c", False),
    ]


# -- soft deletes ------------------------------------------------------------------------------


def test_soft_delete_keeps_the_row_and_a_reinsert_revives_it(modes):
    sink, plan, dialect = modes
    log = Binlog()
    p = {"sku": "A-1", "title": "lamp", "price": Decimal("9.99")}
    _apply(sink, plan, "shop.products", 0, log.txn("shop.products", ("c", None, p), ts_ms=1_000))
    _apply(sink, plan, "shop.products", 1, log.txn("shop.products", ("d", p, None), ts_ms=2_500))
    table = plan.table("shop.products")
    sql = f'SELECT "SKU", "TITLE", "_DELETED", "_DELETED_AT" FROM {target_name(table, dialect)}'
    [row] = _rows(sink, sql)
    assert (row["SKU"], row["TITLE"], row["_DELETED"], _ms(row["_DELETED_AT"])) == (
        "A-1", "lamp", True, 2_500)
    _apply(sink, plan, "shop.products", 2,
           log.txn("shop.products", ("c", None, {**p, "title": "new lamp"}), ts_ms=3_000))
    [row] = _rows(sink, sql)
    assert (row["TITLE"], row["_DELETED"], row["_DELETED_AT"]) == ("new lamp", False, None)


# -- SCD type 2 --------------------------------------------------------------------------------


def _history(sink, plan, dialect):
    table = plan.table("shop.customers")
    rows = _rows(sink, f'SELECT "ID", "NAME", "TIER", "CITY", "_OP", "_VALID_FROM", "_VALID_TO", '
                       f'"_IS_CURRENT" FROM {target_name(table, dialect)} '
                       f'ORDER BY "ID", "_CHANGE_SEQ"')
    return [(r["ID"], r["NAME"], r["TIER"], r["CITY"], r["_OP"], _ms(r["_VALID_FROM"]),
             _ms(r["_VALID_TO"]), r["_IS_CURRENT"]) for r in rows]


def test_scd2_keeps_every_version_of_a_key_and_replays_change_nothing(modes):
    sink, plan, dialect = modes
    log = Binlog()
    c = {"id": 1, "name": "Ann", "email": "ann@x", "tier": "gold", "city": "Oslo"}
    other = {"id": 2, "name": "Bo", "email": "bo@x", "tier": "basic", "city": "Rome"}
    batches = [
        log.txn("shop.customers", ("c", None, c), ("c", None, other), ts_ms=1_000),
        # untracked change (name, email): in place; then a tracked one (tier): a new version
        log.txn("shop.customers", ("u", c, {**c, "name": "Anna"}), ts_ms=2_000)
        + log.txn("shop.customers", ("u", {**c, "name": "Anna"},
                                     {**c, "name": "Anna", "tier": "silver"}), ts_ms=3_000),
        log.txn("shop.customers", ("d", {**c, "name": "Anna", "tier": "silver"}, None),
                ts_ms=4_000),
        # re-inserted, then moved city (tracked) in the same batch, and email (untracked)
        log.txn("shop.customers", ("c", None, {**c, "tier": "bronze"}), ts_ms=5_000)
        + log.txn("shop.customers", ("u", {**c, "tier": "bronze"},
                                     {**c, "tier": "bronze", "city": "Bergen"}), ts_ms=6_000),
        log.txn("shop.customers", ("u", {**c, "tier": "bronze", "city": "Bergen"},
                                   {**c, "tier": "bronze", "city": "Bergen", "email": "a@y"}),
                ts_ms=7_000),
    ]
    for batch_id, batch in enumerate(batches):
        assert not _apply(sink, plan, "shop.customers", batch_id, batch).skipped
    expected = [
        (1, "Anna", "gold", "Oslo", "u", 1_000, 3_000, False),
        (1, "Anna", "silver", "Oslo", "u", 3_000, 4_000, False),
        (1, "Ann", "bronze", "Oslo", "c", 5_000, 6_000, False),
        (1, "Ann", "bronze", "Bergen", "u", 6_000, None, True),
        (2, "Bo", "basic", "Rome", "c", 1_000, None, True),
    ]
    assert _history(sink, plan, dialect) == expected
    # The same batches again under their ids: skipped by the state table.
    assert all(_apply(sink, plan, "shop.customers", i, b).skipped for i, b in enumerate(batches))
    # Old changes under new batch ids, out of order (a re-read of the binlog): no new version,
    # nothing ended, nothing updated.
    for batch_id, batch in zip((10, 11, 12), (batches[1], batches[0], batches[2]), strict=True):
        assert not _apply(sink, plan, "shop.customers", batch_id, batch).skipped
    assert _history(sink, plan, dialect) == expected
    table = plan.table("shop.customers")
    [email] = _rows(sink, f'SELECT "EMAIL" FROM {target_name(table, dialect)} '
                          'WHERE "ID" = 1 AND "_IS_CURRENT"')
    assert email["EMAIL"] == hashlib.sha256(b"a@y").hexdigest()  # in place, masked


def test_scd2_snapshot_of_an_unchanged_row_opens_no_version(modes):
    sink, plan, dialect = modes
    log = Binlog()
    c = {"id": 5, "name": "Cy", "email": "c@x", "tier": "gold", "city": "Pisa"}
    _apply(sink, plan, "shop.customers", 0, log.txn("shop.customers", ("c", None, c), ts_ms=1_000))
    # A later re-copy reads the row again ('r'): same tracked values, so the version goes on;
    # then a re-copy after a tracked change opens a version.
    _apply(sink, plan, "shop.customers", -1, log.txn("shop.customers", ("r", None, {**c, "name": "C"}), ts_ms=2_000))
    _apply(sink, plan, "shop.customers", -2, log.txn("shop.customers", ("r", None, {**c, "tier": "x"}), ts_ms=3_000))
    assert _history(sink, plan, dialect) == [
        (5, "C", "gold", "Pisa", "r", 1_000, 3_000, False),
        (5, "Cy", "x", "Pisa", "r", 3_000, None, True),
    ]
