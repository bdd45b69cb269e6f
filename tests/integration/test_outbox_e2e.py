"""Outbox mode end to end: real MariaDB, real local Spark, the real `run` path, into DuckDB
and into the Snowflake sink's SQL on fakesnow.

``pipelines/outbox.yaml`` pointed at a fresh database. The application writes its OLTP change
and an outbox row in one transaction; some outbox rows are deleted right after the insert
(in the same transaction, or later), some updated: neither may touch the targets. Events of
one key arrive in one batch and across batches (``max_rows: 3``); ``delete_when`` deletes
(hard in ORDERS, soft in CUSTOMERS); PAYMENT_EVENTS is a changelog. Outbox rows that exist
before the first run come through the snapshot (in outbox key order), the rest through the
binlog. A crash right after the changelog route committed a batch, then a restart, must not
duplicate any changelog row. The expected target rows are computed here, from the events,
by a model of the documented semantics that shares no code with replicator.
"""

from __future__ import annotations

import dataclasses
import datetime as dt
import json
from decimal import Decimal
from pathlib import Path
from typing import Any

import pytest

from replicator.config import load_pipeline
from replicator.engine.apply.applier import BatchApplier
from replicator.errors import SinkError
from replicator.model.pipeline import (
    BatchPolicy,
    DuckDBTarget,
    EngineConfig,
    TargetConfig,
)
from tests.integration.e2e_support import fakesnow_warehouse, run

pytestmark = [pytest.mark.mysql, pytest.mark.spark, pytest.mark.slow]

ROOT = Path(__file__).resolve().parents[2]
UTC = dt.UTC

SCHEMA = (
    "CREATE TABLE orders (id BIGINT PRIMARY KEY, status VARCHAR(40), total DECIMAL(12,2))",
    "CREATE TABLE outbox (id BIGINT AUTO_INCREMENT PRIMARY KEY, aggregate_type VARCHAR(64), "
    "aggregate_id VARCHAR(64), payload JSON)",
)
AWKWARD = 'it\'s "quoted" \\ back\\slash\nnew line \t tab 😀 é 中文'
BIG = "12345678901234567890.123456789012345678"  # kept whole in VARIANT

# Transactions: each a list of statements; an outbox insert is ("outbox", type, payload text).
# `None` payload text means: the JSON text is built by json.dumps(obj) of the given object.
Event = tuple[str, str, str]


def ev(kind: str, obj: Any = None, *, text: str | None = None, ascii_only: bool = False) -> Event:
    return ("outbox", kind, text if text is not None else json.dumps(obj, ensure_ascii=ascii_only))


BEFORE_FIRST_RUN = [
    ["INSERT INTO orders VALUES (1, 'new', 10.50)",
     ev("order", {"id": 1, "customer": {"id": 10}, "status": "new", "total": "10.50",
                  "placed_at": "2024-02-29T23:59:59.123456", "lines": [{"sku": "A-1", "qty": 1}]})],
    ["UPDATE orders SET status = 'paid' WHERE id = 1",
     ev("order", {"id": 1, "customer": {"id": 10}, "status": "paid", "total": "10.50",
                  "placed_at": "2024-02-29T23:59:59.123456", "lines": [{"sku": "A-1", "qty": 1}]})],
    [ev("customer", {"id": 10, "email": "ann@example.com", "vip": True, "signed_up": "2020-01-31"})],
    [ev("payment", {"id": 100, "order_id": 1, "amount": 10.5, "paid_at": "2024-03-01T10:00:00+01:00"})],
    [ev("refund", {"id": 1})],  # no route: ignored
]
STREAMED = [
    # Two events of order 2 in one transaction (one batch): the second wins. Awkward text,
    # escaped and raw, big and nested numbers, a gift note "None" (text, not NULL).
    ["INSERT INTO orders VALUES (2, 'new', 0)",
     ev("order", {"id": 2, "status": AWKWARD, "total": "0.01",
                  "lines": [{"sku": "B'2", "qty": 2}]}, ascii_only=True),
     ev("order", text='{"id": 2, "customer": {"id": 18446744073709551615}, "status": "'
                      + json.dumps(AWKWARD)[1:-1] + '", "total": 9999999999.99, '
                      '"placed_at": "2024-01-02 03:04:05+02:00", "gift note": "None", '
                      '"lines": [{"sku": "\\u00e9\\ud83d\\ude00", "price": ' + BIG + ', '
                      '"tags": {"a": [1, null, true]}}, {"sku": null}]}')],
    # Order 3 created, then deleted by its event (across transactions).
    [ev("order", {"id": 3, "status": "new", "total": 5})],
    [ev("order", {"id": 3, "deleted": True})],
    # Order 1 again, and the outbox row deleted right away (Debezium's recommended cleanup).
    ["UPDATE orders SET status = 'shipped' WHERE id = 1",
     ev("order", {"id": 1, "customer": {"id": 10}, "status": "shipped", "total": "10.5",
                  "placed_at": "2024-02-29T23:59:59.123456", "lines": [], "gift note": None,
                  "deleted": False}),
     "DELETE FROM outbox WHERE id = LAST_INSERT_ID()"],
    # Customer 10 soft-deleted; 11 with a text "None" and NULLs; 12 without most fields.
    [ev("customer", {"id": 10, "deleted": "true"}),
     ev("customer", {"id": 11, "email": "None", "vip": None, "signed_up": None}),
     ev("customer", {"id": 12, "vip": 0})],
    [ev("payment", {"id": 100, "order_id": 1, "amount": "10.50", "paid_at": "2024-03-01T09:00:01Z"}),
     ev("payment", {"id": 101, "order_id": 2, "amount": 0, "paid_at": "2024-03-02T00:00:00"})],
    [ev("shipment", {"id": 5})],  # unrouted
    # Cleaning up and rewriting outbox rows is not an event.
    ["DELETE FROM outbox WHERE id <= 3"],
    ["UPDATE outbox SET payload = '{\"id\": 2, \"status\": \"rewritten\"}' WHERE aggregate_type = 'order'"],
]
AFTER_RESTART = [
    [ev("payment", {"id": 102, "order_id": 2, "amount": "1.25", "paid_at": "2024-03-03T00:00:00Z"})],
    [ev("payment", {"id": 100, "order_id": 1, "amount": "0.00", "paid_at": "2024-03-04T00:00:00Z"}),
     ev("order", {"id": 2, "status": "refunded", "total": "9999999999.99"})],
    [ev("payment", {"id": 103, "order_id": 4, "amount": "7", "paid_at": "2024-03-05T00:00:00Z"}),
     ev("customer", {"id": 10, "email": "back@example.com", "vip": False, "signed_up": "2024-03-05"})],
    [ev("order", {"id": 4, "status": "new", "total": 7, "lines": {"not": "a list"}})],
]


# -- the independent model of the expected targets ------------------------------------------


def _parse(text: str) -> Any:
    return json.loads(text, parse_float=Decimal)


def _dec(value: Any, places: int) -> Decimal | None:
    return None if value is None else Decimal(str(value)).quantize(Decimal(1).scaleb(-places))


def _ntz(value: str | None) -> dt.datetime | None:
    if value is None:
        return None
    stamp = dt.datetime.fromisoformat(value)
    return stamp.astimezone(UTC).replace(tzinfo=None) if stamp.tzinfo else stamp


def _tz(value: str | None) -> dt.datetime | None:
    if value is None:
        return None
    stamp = dt.datetime.fromisoformat(value)
    return stamp.replace(tzinfo=UTC) if stamp.tzinfo is None else stamp.astimezone(UTC)


def _truthy(value: Any) -> bool:
    return value is True or (isinstance(value, (int, Decimal)) and not isinstance(value, bool)
                             and value != 0) or (isinstance(value, str) and value.lower() in
                                                 ("true", "1", "yes"))


def expected(transactions: list[list[Any]]) -> dict[str, list[tuple[Any, ...]]]:
    orders: dict[int, tuple[Any, ...]] = {}
    customers: dict[int, tuple[Any, ...]] = {}
    payments: list[tuple[Any, ...]] = []
    outbox_id = 0  # AUTO_INCREMENT: every outbox insert takes the next id, kept or deleted
    for index, statements in enumerate(transactions):
        for statement in statements:
            if not isinstance(statement, tuple):
                continue
            outbox_id += 1
            _, kind, text = statement
            doc = _parse(text)
            op = "r" if index < len(BEFORE_FIRST_RUN) else "c"  # copied by the snapshot
            if kind == "order":
                if _truthy(doc.get("deleted")):
                    orders.pop(doc["id"], None)
                    continue
                lines = doc.get("lines")
                first = lines[0].get("sku") if isinstance(lines, list) and lines else None
                orders[doc["id"]] = (
                    Decimal(doc["id"]), _dec((doc.get("customer") or {}).get("id"), 0),
                    doc.get("status"), _dec(doc.get("total"), 2), _ntz(doc.get("placed_at")),
                    first, lines, doc.get("gift note"), op)
            elif kind == "customer":
                old = customers.get(doc["id"])
                if _truthy(doc.get("deleted")):
                    if old is not None:  # soft: the row stays, flagged
                        customers[doc["id"]] = (*old[:4], True)
                    continue
                signed_up = doc.get("signed_up")
                customers[doc["id"]] = (
                    Decimal(doc["id"]), doc.get("email"),
                    None if doc.get("vip") is None else bool(doc["vip"]),
                    None if signed_up is None else dt.date.fromisoformat(signed_up), False)
            elif kind == "payment":
                payments.append((Decimal(outbox_id), Decimal(doc["id"]),
                                 _dec(doc.get("order_id"), 0), _dec(doc.get("amount"), 2),
                                 _tz(doc.get("paid_at")), op, False))
    return {
        "ORDERS": [orders[k] for k in sorted(orders)],
        "CUSTOMERS": [customers[k] for k in sorted(customers)],
        "PAYMENT_EVENTS": payments,
    }


# -- running it -----------------------------------------------------------------------------


def _pipeline(mysql_source, database, tmp_path, warehouse):
    pipeline = load_pipeline(ROOT / "pipelines" / "outbox.yaml", environ={})
    return dataclasses.replace(
        pipeline,
        source=mysql_source,
        target=TargetConfig(warehouse),
        tables=tuple(dataclasses.replace(t, source_database=database) for t in pipeline.tables),
        batching=BatchPolicy(max_rows=3, max_delay_ms=500),
        engine=EngineConfig(checkpoint=str(tmp_path / "checkpoint")),
    )


def _execute(root, database, transactions):
    with root.cursor() as cursor:
        cursor.execute(f"USE `{database}`")
        for statements in transactions:
            cursor.execute("BEGIN")
            for statement in statements:
                if isinstance(statement, tuple):
                    _, kind, text = statement
                    cursor.execute("INSERT INTO outbox (aggregate_type, aggregate_id, payload) "
                                   "VALUES (%s, %s, %s)", (kind, "x", text))
                else:
                    cursor.execute(statement)
            cursor.execute("COMMIT")


def _rows(connection, sql):
    cursor = connection.cursor()
    try:
        cursor.execute(sql)
        return [tuple(row) for row in cursor.fetchall()]
    finally:
        cursor.close()


def _json(value: Any) -> Any:
    return None if value is None else _parse(value) if isinstance(value, str) else value


def _utc(value: Any) -> Any:
    if isinstance(value, dt.datetime):
        return value.replace(tzinfo=UTC) if value.tzinfo is None else value.astimezone(UTC)
    return value


def _floats(value: Any) -> Any:
    """JSON with its numbers as floats: fakesnow's PARSE_JSON (DuckDB underneath) turns every
    number into a double, where Snowflake keeps up to 38 digits exactly (DuckDB's JSON, the
    embedded target, keeps the text: compared exactly there)."""
    if isinstance(value, dict):
        return {k: _floats(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_floats(v) for v in value]
    if isinstance(value, (int, Decimal)) and not isinstance(value, bool):
        return float(value)
    return value


def _variants_as_floats(contents: dict[str, list[tuple[Any, ...]]]) -> dict[str, Any]:
    return {**contents, "ORDERS": [(*r[:6], _floats(r[6]), *r[7:]) for r in contents["ORDERS"]]}


def _contents(connection, prefix: str) -> dict[str, list[tuple[Any, ...]]]:
    orders = _rows(connection, 'SELECT "ORDER_ID", "CUSTOMER_ID", "STATUS", "AMOUNT", "PLACED_AT",'
                               ' "FIRST_SKU", "LINES", "GIFT_NOTE", "_OP" FROM '
                               f'{prefix}"ORDERS" ORDER BY "ORDER_ID"')
    customers = _rows(connection, 'SELECT "CUSTOMER_ID", "EMAIL", "VIP", "SIGNED_UP", "_DELETED" '
                                  f'FROM {prefix}"CUSTOMERS" ORDER BY "CUSTOMER_ID"')
    payments = _rows(connection, 'SELECT "EVENT_ID", "PAYMENT_ID", "ORDER_ID", "AMOUNT", '
                                 '"PAID_AT", "_OP", '
                                 f'"_DELETED" FROM {prefix}"PAYMENT_EVENTS" ORDER BY '
                                 '"_BINLOG_FILE", "_BINLOG_POS", "_TRANSACTION_ORDER"')
    return {
        "ORDERS": [(*row[:6], _json(row[6]), *row[7:]) for row in orders],
        "CUSTOMERS": customers,
        "PAYMENT_EVENTS": [(*row[:4], _utc(row[4]), *row[5:]) for row in payments],
    }


def _scenario(spark, root, database, pipeline, connect, prefix, monkeypatch, *,
              exact_json: bool = True):
    expected_of = expected if exact_json else (lambda t: _variants_as_floats(expected(t)))
    contents_of = _contents if exact_json else (
        lambda c, p: _variants_as_floats(_contents(c, p)))
    _execute(root, database, [[s] for s in SCHEMA])
    _execute(root, database, BEFORE_FIRST_RUN)
    first = run(pipeline, spark)
    # Order 1's two snapshot events compact to one row; the refund has no route.
    assert first.snapshot_rows == 1 + 1 + 1
    with connect() as connection:
        assert contents_of(connection, prefix) == expected_of(BEFORE_FIRST_RUN)

    reports = []
    _execute(root, database, STREAMED)
    second = run(pipeline, spark, on_report=reports.append)
    assert second.batches >= 3
    with connect() as connection:
        assert contents_of(connection, prefix) == expected_of(BEFORE_FIRST_RUN + STREAMED)
    unrouted = sum(t.unrouted for r in reports for t in r.tables)
    assert unrouted == 1  # the shipment event, counted once (not once per route)

    # A crash right after the changelog route committed a batch (before the batch is done):
    # the restart replays it, and the state table keeps every route from applying it twice.
    # Only a run with `target.atomic: false` commits a route before the batch is done; the
    # restart is atomic (the default) and leaves out the route the batch is recorded for.
    original = BatchApplier.apply_files
    crashed = []

    def crash_after_payments(self, table_plan, files, batch_id, end_offset):
        report = original(self, table_plan, files, batch_id, end_offset)
        if table_plan.target_table == "PAYMENT_EVENTS" and report.rows and not crashed:
            crashed.append(batch_id)
            raise SinkError("simulated crash after the changelog route committed")
        return report

    monkeypatch.setattr(BatchApplier, "apply_files", crash_after_payments)
    _execute(root, database, AFTER_RESTART)
    per_table = dataclasses.replace(
        pipeline, target=dataclasses.replace(pipeline.target, atomic=False))
    with pytest.raises(SinkError, match="simulated crash"):
        run(per_table, spark)
    assert crashed
    skipped = []
    third = run(pipeline, spark, on_report=lambda r: skipped.extend(
        t.table for t in r.tables if t.skipped))
    assert f"{database}.outbox[payment]" in skipped  # the replayed batch
    everything = BEFORE_FIRST_RUN + STREAMED + AFTER_RESTART
    with connect() as connection:
        contents = contents_of(connection, prefix)
    assert contents == expected_of(everything)
    assert len(contents["PAYMENT_EVENTS"]) == 6  # no duplicate after the replay
    assert third.changes > 0

    again = run(pipeline, spark)
    assert (again.changes, again.rows) == (0, 0)
    with connect() as connection:
        assert contents_of(connection, prefix) == contents

    # verify cannot compare a route with source rows (most events are gone from the outbox):
    # it says so per route instead of reporting differences.
    from replicator.verify.compare import verify_pipeline

    report = verify_pipeline(pipeline)
    assert [(t.source_table, bool(t.skipped)) for t in report.tables] == [
        (f"{database}.outbox[{route}]", True) for route in ("order", "customer", "payment")]
    assert all("outbox route" in (t.skipped or "") for t in report.tables)


def test_outbox_end_to_end_into_duckdb(spark, mariadb, mysql_source, fresh_database, tmp_path,
                                       monkeypatch):
    import duckdb

    from replicator.transform.outbox import OutboxError

    warehouse = tmp_path / "warehouse.duckdb"
    pipeline = _pipeline(mysql_source, fresh_database, tmp_path,
                         DuckDBTarget(str(warehouse), schema="main"))
    root = mariadb.root_connection()
    try:
        _scenario(spark, root, fresh_database, pipeline,
                  lambda: duckdb.connect(str(warehouse), read_only=True), 'main.', monkeypatch)
        # A value that does not convert stops the pipeline, naming the row, route, column,
        # path and value; nothing of the batch lands.
        _execute(root, fresh_database, [[ev("order", {"id": 5, "total": "12.345"})]])
        with pytest.raises(OutboxError) as stopped:
            run(pipeline, spark)
        for part in ("outbox row id=", "[order] -> ORDERS", "column amount", "$.total",
                     '"12.345"', "decimal places"):
            assert part in stopped.value.message
        with duckdb.connect(str(warehouse), read_only=True) as connection:
            assert connection.execute(
                'SELECT COUNT(*) FROM main."ORDERS" WHERE "ORDER_ID" = 5').fetchone() == (0,)
    finally:
        root.close()


def test_outbox_end_to_end_into_snowflake_sql(spark, mariadb, mysql_source, fresh_database,
                                              tmp_path, monkeypatch):
    root = mariadb.root_connection()
    try:
        with fakesnow_warehouse(tmp_path, monkeypatch) as (target, connect):
            pipeline = _pipeline(mysql_source, fresh_database, tmp_path, target)
            _scenario(spark, root, fresh_database, pipeline, connect, "", monkeypatch,
                      exact_json=False)
    finally:
        root.close()
