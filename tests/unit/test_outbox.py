"""Outbox: JSON path subset, exact conversions, outbox rows -> route events, plans, config."""

from __future__ import annotations

import dataclasses
import datetime as dt
import functools
import json
from decimal import Decimal
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from replicator.config import load_pipeline
from replicator.errors import PlanError
from replicator.model import change_batch as cb
from replicator.model.catalog import Catalog, MySQLType, SourceColumn, SourceTable
from replicator.model.changes import BinlogPosition, ChangeEvent
from replicator.model.jsonpath import MISSING, PathError, evaluate, format_steps, parse_path
from replicator.plan import build_plan, offline_catalog
from replicator.plan.types import parse_target_type
from replicator.transform import change_batch, stage_batch
from replicator.transform.outbox import OutboxError, count_unrouted, route_batch
from replicator.transform.stage import _connection, batch_key

ROOT = Path(__file__).resolve().parents[2]
PIPELINE = ROOT / "pipelines" / "outbox.yaml"

# -- JSON path ---------------------------------------------------------------------------


@pytest.mark.parametrize(("text", "steps"), [
    ("$", ()),
    ("$.id", ("id",)),
    ("$.customer.id", ("customer", "id")),
    ("$.lines[0].sku", ("lines", 0, "sku")),
    ("$['odd key']", ("odd key",)),
    ('$["a.b"][12]', ("a.b", 12)),
    (r"$['it\'s']['back\\slash']", ("it's", "back\\slash")),
    ("$.naïve_名前", ("naïve_名前",)),
    ("$._x1", ("_x1",)),
])
def test_path_parses(text, steps):
    assert parse_path(text).steps == steps


@pytest.mark.parametrize(("text", "offset"), [
    ("id", 0),
    ("", 0),
    ("$.", 1),
    ("$..a", 2),
    ("$.1a", 2),
    ("$.a[*]", 4),
    ("$.a[-1]", 4),
    ("$.a[0", 4),
    ("$['x", 2),
    ("$['x'", 4),
    ("$['x'y]", 5),
    (r"$['a\n']", 4),
    ("$.a b", 3),
    ("$[1:2]", 3),
])
def test_bad_path_reports_the_offending_character(text, offset):
    with pytest.raises(PathError) as caught:
        parse_path(text)
    assert caught.value.offset == offset
    assert caught.value.hint


def test_evaluate_missing_and_null():
    doc = {"a": {"b": [1, {"c": None}]}, "n": None}
    assert evaluate(("a", "b", 0), doc) == 1
    assert evaluate(("a", "b", 1, "c"), doc) is None
    assert evaluate(("n",), doc) is None
    for steps in [("x",), ("a", "b", 2), ("a", "b", "c"), ("a", 0), ("n", "x")]:
        assert evaluate(steps, doc) is MISSING


_keys = st.one_of(st.integers(0, 10**6), st.text(min_size=0, max_size=12))


@settings(max_examples=300, deadline=None)
@given(st.lists(_keys, max_size=6))
def test_format_then_parse_roundtrips(steps):
    steps = tuple(steps)
    assert parse_path(format_steps(steps)).steps == steps


# -- conversions ---------------------------------------------------------------------------


# Each conversion runs as a route's batch does: a route with the column ``v`` of the type
# at $.v, one outbox row holding {"k": 1, "v": <value>}, staged by transform.stage_batch.
_VALUE_ROUTE = """
version: 1
source: {mysql: {host: h, password: "${P:-}"}}
target: {duckdb: {path: w.duckdb}}
tables:
  - source: shop.outbox
    mode: outbox
    outbox:
      type_column: aggregate_type
      payload_column: payload
      routes:
        x:
          target: X
          key: [k]
          delete_when: $.gone
          columns:
            k: {path: $.k, type: "NUMBER(20,0)"}
            v: {path: $.v, type: TYPE}
"""


@functools.cache
def _value_route(type_text: str):
    import tempfile

    path = Path(tempfile.mkdtemp()) / "p.yaml"
    path.write_text(_VALUE_ROUTE.replace("TYPE", json.dumps(type_text)))
    return build_plan(load_pipeline(path, environ={}), outbox_catalog()).tables[0]


def _staged(type_text: str, payloads: list[str]) -> list[dict]:
    table = _value_route(type_text)
    events = [row(n, "x", text) for n, text in enumerate(payloads, start=1)]
    return stage_batch(table, _batch(table, events)).to_pylist()


def convert(type_text: str, json_value: str):
    """The staged value of ``json_value`` (JSON text) in a column of ``type_text``."""
    staged, = _staged(type_text, ['{"k": 1, "v": ' + json_value + "}"])
    return staged["V"]


@pytest.mark.parametrize(("type_text", "json_value", "expected"), [
    ("NUMBER(20,0)", "18446744073709551615", Decimal("18446744073709551615")),
    ("NUMBER(12,2)", "1234567890.12", Decimal("1234567890.12")),
    ("NUMBER(12,2)", "1.5", Decimal("1.50")),
    ("NUMBER(12,2)", '"7.25"', Decimal("7.25")),
    ("NUMBER(38,10)", "1234567890123456789012345678.0123456789",
     Decimal("1234567890123456789012345678.0123456789")),
    ("NUMBER(10,0)", "3.0", 3),
    ("INTEGER", "-9223372036854775808", -(2**63)),
    ("INTEGER", '"42"', 42),
    ("FLOAT", "0.1", 0.1),
    ("VARCHAR", '"it\'s \\"q\\" \\\\ \\n 😀 \\u00e9"', 'it\'s "q" \\ \n 😀 é'),
    ("VARCHAR", "1.50", "1.50"),
    ("VARCHAR", "1e5", "100000"),
    ("VARCHAR", "true", "true"),
    ("VARCHAR", '{"a": [1, 2.50]}', '{"a":[1,2.50]}'),
    ("VARCHAR", '"None"', "None"),
    ("BOOLEAN", "true", True),
    ("BOOLEAN", "0", False),
    ("BOOLEAN", '"FALSE"', False),
    ("DATE", '"2024-02-29"', dt.date(2024, 2, 29)),
    ("TIMESTAMP_NTZ", '"2024-01-02T03:04:05.123456"', dt.datetime(2024, 1, 2, 3, 4, 5, 123456)),
    ("TIMESTAMP_NTZ", '"2024-01-02 03:04:05+02:00"', dt.datetime(2024, 1, 2, 1, 4, 5)),
    ("TIMESTAMP_NTZ(3)", '"2024-01-02T03:04:05.120"', dt.datetime(2024, 1, 2, 3, 4, 5, 120000)),
    ("TIMESTAMP_TZ", '"2024-01-02T03:04:05Z"', dt.datetime(2024, 1, 2, 3, 4, 5, tzinfo=dt.UTC)),
    ("TIMESTAMP_TZ", '"2024-01-02T03:04:05"', dt.datetime(2024, 1, 2, 3, 4, 5, tzinfo=dt.UTC)),
    ("TIMESTAMP_TZ", '"2024-01-02T03:04:05-05:00"',
     dt.datetime(2024, 1, 2, 8, 4, 5, tzinfo=dt.UTC)),
    ("VARIANT", '{"b": 1, "a": [0.10, "x\\"y", null, {"😀": 12345678901234567890.5}]}',
     '{"b":1,"a":[0.10,"x\\"y",null,{"😀":12345678901234567890.5}]}'),
    ("VARIANT", '"text"', '"text"'),
    ("VARIANT", "1E+400", "1E+400"),
    ("BINARY", '"AAEC/w=="', b"\x00\x01\x02\xff"),
])
def test_conversion_is_exact(type_text, json_value, expected):
    result = convert(type_text, json_value)
    assert result == expected
    assert type(result) is type(expected)


@pytest.mark.parametrize(("type_text", "json_value", "reason"), [
    ("NUMBER(12,2)", "1.005", "decimal places"),
    ("NUMBER(12,2)", "12345678901.5", "digits"),
    ("NUMBER(12,2)", "1e400", "too large"),
    ("NUMBER(12,2)", '"12,5"', "not a number"),
    ("NUMBER(12,2)", "true", "a boolean"),
    ("NUMBER(10,0)", "3.5", "fraction"),
    ("NUMBER(10,0)", "12345678901", "out of range"),
    ("INTEGER", "9223372036854775808", "out of range"),
    ("INTEGER", '"4x"', "not an integer"),
    ("INTEGER", "[1]", "an array"),
    ("FLOAT", "true", "a boolean"),
    ("FLOAT", "1e400", "too large"),
    ("VARCHAR(3)", '"abcd"', "4 characters"),
    ("VARCHAR", '"\\ud800"', "no low surrogate"),  # not JSON (docs/decisions/one-data-plane.md)
    ("BOOLEAN", '"yes"', "not a boolean"),
    ("BOOLEAN", "2", "not a boolean"),
    ("DATE", '"2024-02-30"', "not a valid date"),
    ("DATE", '"2024-02-03T00:00:00"', "not an ISO-8601 date"),
    ("TIMESTAMP_NTZ", "1700000000000", "not an ISO-8601 timestamp"),
    ("TIMESTAMP_NTZ", '"yesterday"', "not an ISO-8601 timestamp"),
    ("TIMESTAMP_NTZ(3)", '"2024-01-02T03:04:05.1234"', "more than 3 fractional digits"),
    ("BINARY", '"not base64!"', "base64"),
    ("BINARY", "12", "not base64"),
])
def test_conversion_refuses_what_it_cannot_keep(type_text, json_value, reason):
    with pytest.raises(OutboxError, match=reason):
        convert(type_text, json_value)


@settings(max_examples=100, deadline=None)
@given(st.lists(st.decimals(allow_nan=False, allow_infinity=False, places=2,
                            min_value=Decimal("-9999999999.99"), max_value=Decimal("9999999999.99")),
                min_size=1, max_size=20))
def test_decimals_that_fit_come_back_exactly(numbers):
    as_text = [json.dumps({"k": n, "v": str(number)}) for n, number in enumerate(numbers)]
    as_number = [f'{{"k": {n}, "v": {number:f}}}' for n, number in enumerate(numbers)]
    for payloads in (as_text, as_number):
        assert [r["V"] for r in _staged("NUMBER(12,2)", payloads)] == numbers


_json = st.recursive(
    st.none() | st.booleans() | st.integers() | st.text()
    | st.decimals(allow_nan=False, allow_infinity=False),
    lambda children: st.lists(children, max_size=4)
    | st.dictionaries(st.text(max_size=5), children, max_size=4),
    max_leaves=12,
)


def _python_text(value) -> str:
    """Compact JSON with every digit of a Decimal (the rule's text of a VARIANT value)."""
    if isinstance(value, dict):
        return "{" + ",".join(json.dumps(k, ensure_ascii=False) + ":" + _python_text(v)
                              for k, v in value.items()) + "}"
    if isinstance(value, list):
        return "[" + ",".join(_python_text(v) for v in value) + "]"
    return str(value) if isinstance(value, Decimal) else json.dumps(value, ensure_ascii=False)


@settings(max_examples=100, deadline=None)
@given(st.lists(_json, min_size=1, max_size=8))
def test_variant_text_is_the_value_with_every_digit(values):
    """A VARIANT column's text is the JSON value, compact, numbers as written, keys in their
    order, text unescaped (as Python's json.dumps(ensure_ascii=False) writes it)."""
    texts = []
    for value in values:
        text = _python_text(value)
        try:
            text.encode("utf-8")
        except UnicodeEncodeError:
            continue  # unpaired surrogates: not JSON
        if isinstance(value, dict) and len(value) != len(json.loads(text)):
            continue
        texts.append(text)
    if not texts:
        return
    staged = _staged("VARIANT", [f'{{"k": {n}, "v": {t}}}' for n, t in enumerate(texts)])
    assert [r["V"] for r in staged] == [None if t == "null" else t for t in texts]


@pytest.mark.parametrize("bad", ["{", "NaN", '{"k": 1, "a": Infinity}', '{"k": 1, "a": -inf}',
                                 '{"k": 1, "a": [1,]}', '{"k": 1,}', "", '{"k": 1} x'])
def test_payload_parsing_is_strict(bad):
    """RFC 8259 JSON only: what DuckDB's reader would also take (NaN, infinities, a trailing
    comma) is refused too."""
    assert _staged("VARCHAR", ['{"k": 1, "a": "[1, 2]"}'])[0]["K"] == Decimal(1)
    # inside strings they are text: no trailing comma, no NaN
    assert _staged("VARCHAR", ['{"k": 1, "a": [null, ",]"], "b": "NaN", "v": "inf,}"}'])[0]["V"] == "inf,}"
    with pytest.raises(OutboxError, match="is not JSON"):
        _staged("VARCHAR", [bad])


@pytest.mark.parametrize(("value", "expected"), [
    (True, True), (False, False), (1, True), (0, False), (Decimal("0.0"), False),
    ("true", True), ("YES", True), ("1", True), ("false", False), ("", False), (None, False),
    ({}, False), ([1], False), (MISSING, False),
])
def test_truthy(value, expected):
    """delete_when: the value at $.gone deletes the key when truthy."""
    body = {"k": 1} if value is MISSING else {"k": 1, "gone": value}
    staged, = _staged("VARCHAR", [json.dumps(body, default=str).replace('"0.0"', "0.0")])
    assert (staged["_REPLICATOR_OP"] == "d") is expected


# -- outbox rows -> route events ------------------------------------------------------------


def outbox_catalog() -> Catalog:
    columns = (
        SourceColumn("id", MySQLType.parse("bigint"), nullable=False, ordinal=1),
        SourceColumn("aggregate_type", MySQLType.parse("varchar(64)"), ordinal=2),
        SourceColumn("aggregate_id", MySQLType.parse("varchar(64)"), ordinal=3),
        SourceColumn("payload", MySQLType.parse("json"), ordinal=4),
    )
    return Catalog(tables=(SourceTable("shop", "outbox", columns, ("id",)),), live=True)


@pytest.fixture(scope="module")
def plan():
    pipeline = load_pipeline(PIPELINE, environ={})
    return build_plan(pipeline, outbox_catalog())


def row(id_: int, kind, body, op="c", pos=100, index=0) -> ChangeEvent:
    image = {"id": id_, "aggregate_type": kind, "aggregate_id": "x",
             "payload": body if isinstance(body, str) or body is None else json.dumps(body)}
    return ChangeEvent(
        table="shop.outbox", op=op, position=BinlogPosition("mysql-bin.000001", pos),
        row_index=index, ts_ms=1_700_000_000_000,
        before=image if op in ("u", "d") else None,
        after=image if op != "d" else None,
    )


def test_plan_has_one_table_per_route(plan):
    names = [(t.label, t.target_table, t.mode) for t in plan.tables]
    assert names == [
        ("shop.outbox[order]", "ORDERS", "merge"),
        ("shop.outbox[customer]", "CUSTOMERS", "merge"),
        ("shop.outbox[payment]", "PAYMENT_EVENTS", "changelog"),
    ]
    orders = plan.tables[0]
    assert all(t.reads("SHOP.OUTBOX") for t in plan.tables)
    assert orders.source_key == ("order_id",) and orders.target_key == ("ORDER_ID",)
    assert orders.outbox.outbox_key == ("id",)
    assert orders.outbox.null_on_error == ("gift_note",)
    assert [c.target_column for c in orders.data_columns][:3] == ["ORDER_ID", "CUSTOMER_ID", "STATUS"]
    assert plan.tables[1].deletes == "soft"


def _batch(table, events):
    columns = [(c.name, c.mysql_type) for c in outbox_catalog().tables[0].columns]
    return change_batch(events, columns, batch_key(table))


def _routed(table, events) -> list[dict]:
    """The route's change batch (one row per event, before staging) as dicts."""
    return route_batch(table, _batch(table, events), _connection()).to_pylist()


def test_only_inserts_and_snapshot_rows_of_the_route_are_events(plan):
    orders = plan.tables[0]
    events = [
        row(1, "order", {"id": 7, "status": "new", "total": "10.50"}, pos=100),
        row(2, "customer", {"id": 7, "email": "a@b"}, pos=200),
        row(1, "order", {"id": 7, "status": "paid"}, op="u", pos=300),  # ignored
        row(1, "order", {"id": 7, "status": "x"}, op="d", pos=400),  # ignored: outbox cleanup
        row(3, "order", {"id": 8, "status": "old"}, op="r", pos=50),
        row(4, "unknown", {"id": 9}, pos=500),
        row(5, None, {"id": 9}, pos=600),
    ]
    out = _routed(orders, events)
    assert [(e[cb.OP], e["order_id"], e["status"]) for e in out] == [
        ("c", Decimal(7), "new"), ("r", Decimal(8), "old")]
    assert out[0]["amount"] == Decimal("10.50")
    assert out[0]["placed_at"] is None and out[0][cb.before_column("order_id")] is None
    assert (out[0][cb.FILE], out[0][cb.POS]) == ("mysql-bin.000001", 100)  # binlog order is kept
    assert count_unrouted(orders, _batch(orders, events)) == 2
    customers = _routed(plan.tables[1], events)
    assert [(e[cb.OP], e["customer_id"]) for e in customers] == [("c", Decimal(7))]


def test_delete_when_deletes_the_key_and_last_event_wins(plan):
    orders = plan.tables[0]
    events = [
        row(1, "order", {"id": 7, "status": "new"}, pos=100),
        row(2, "order", {"id": 7, "status": "paid"}, pos=200),
        row(3, "order", {"id": 8, "status": "new"}, pos=300),
        row(4, "order", {"id": 8, "deleted": True}, pos=400),
        row(5, "order", {"id": 9, "deleted": "false", "status": "kept"}, pos=500),
    ]
    out = _routed(orders, events)
    assert [(e[cb.OP], e["order_id"]) for e in out] == [
        ("c", 7), ("c", 7), ("c", 8), ("d", 8), ("c", 9)]
    staged = stage_batch(orders, _batch(orders, events)).to_pylist()
    assert [(r["ORDER_ID"], r["STATUS"], r["_REPLICATOR_OP"]) for r in staged] == [
        (Decimal(7), "paid", "c"), (Decimal(8), None, "d"), (Decimal(9), "kept", "c")]


def test_changelog_route_keeps_every_event(plan):
    payments = plan.tables[2]
    events = [
        row(1, "payment", {"id": 1, "order_id": 7, "amount": 5, "paid_at": "2024-01-01T00:00:00Z"},
            pos=100),
        row(2, "payment", {"id": 1, "order_id": 7, "amount": "5.10"}, pos=200, index=1),
    ]
    staged = stage_batch(payments, _batch(payments, events)).to_pylist()
    assert [(r["EVENT_ID"], r["PAYMENT_ID"], r["AMOUNT"], r["_OP"], r["_BINLOG_POS"])
            for r in staged] == [
        (Decimal(1), Decimal(1), Decimal("5.00"), "c", 100),
        (Decimal(2), Decimal(1), Decimal("5.10"), "c", 200)]
    assert staged[0]["PAID_AT"] == dt.datetime(2024, 1, 1, tzinfo=dt.UTC)


def test_bad_value_error_names_row_route_column_path_and_value(plan):
    orders = plan.tables[0]
    events = [row(n, "order", {"id": n}, pos=1000 + n) for n in range(1, 40)]
    events.append(row(41, "order", {"id": 7, "total": "12.345"}, pos=1234))
    events.append(row(42, "order", {"id": 8, "total": "1.234"}, pos=1235))  # the second bad row
    with pytest.raises(OutboxError) as caught:
        stage_batch(orders, _batch(orders, events))
    message = caught.value.message
    for part in ("shop.outbox row id=41", "mysql-bin.000001:1234", "shop.outbox[order]",
                 "ORDERS", "column amount", "$.total", '"12.345"', "decimal places"):
        assert part in message, (part, message)
    assert "on_error: null" in caught.value.hint


def test_on_error_null_loads_null(plan):
    orders = plan.tables[0]
    out = _routed(orders, [row(1, "order", {"id": 7, "gift note": {"not": "text"}})])
    assert out[0]["gift_note"] == '{"not":"text"}'  # an object is JSON text in VARCHAR
    out = _routed(orders, [row(1, "order", {"id": 7, "gift note": ["a", 1.50]}),
                           row(2, "order", '{"id": 8, "gift note": 1.50}')])
    assert [e["gift_note"] for e in out] == ['["a",1.5]', "1.50"]
    with pytest.raises(OutboxError, match="column placed_at"):  # no on_error: the row fails
        _routed(orders, [row(2, "order", '{"id": 8, "placed_at": "not a time"}')])


@pytest.mark.parametrize(("body", "message"), [
    ({"status": "no id"}, "key column order_id ($.id) is missing"),
    ({"id": None}, "key column order_id ($.id) is null"),
    ({"id": 1.5}, "fraction"),
    ("not json", "is not JSON"),
    (None, "is not JSON: it is NULL"),
    ('"a string"', "not a JSON object"),
])
def test_rows_that_cannot_be_events_stop_with_a_clear_error(plan, body, message):
    with pytest.raises(OutboxError, match=message.replace("$", r"\$").replace("(", r"\(")
                       .replace(")", r"\)")):
        _routed(plan.tables[0], [row(1, "order", body)])


def test_unrouted_fail(plan):
    from dataclasses import replace

    strict = replace(plan.tables[0], outbox=replace(plan.tables[0].outbox, unrouted="fail"))
    assert _routed(strict, [row(1, "customer", {"id": 1})]) == []  # routed elsewhere
    with pytest.raises(OutboxError, match="no route for aggregate_type = 'refund'"):
        _routed(strict, [row(1, "order", {"id": 1}), row(2, "refund", {"id": 1}),
                         row(3, "order", {"status": "no id: fails after the refund"})])


def test_row_columns_come_from_the_outbox_row(plan):
    from dataclasses import replace

    payments = plan.tables[2]
    assert payments.outbox.row_columns == (("event_id", "id"),)
    out = _routed(payments, [row(9223372036854775807, "payment", {"id": 3})])
    assert out[0]["event_id"] == Decimal("9223372036854775807")
    keyed = replace(payments, source_key=("event_id",), columns=tuple(
        replace(c, is_key=c.source_column == "event_id") for c in payments.columns))
    with pytest.raises(OutboxError, match=r"key column event_id \(outbox column id\) is null "
                       "in the outbox row"):
        _routed(keyed, [row(None, "payment", {"id": 3})])
    narrow = replace(payments, columns=tuple(
        replace(c, target_type=parse_target_type("NUMBER(4,2)")) if c.source_column == "event_id"
        else c for c in payments.columns))
    with pytest.raises(OutboxError, match=r"column event_id \(outbox column id, decimal\(4,2\)\): "
                       r"value 123 does not fit decimal\(4,2\)"):
        _routed(narrow, [row(123, "payment", {"id": 3})])


# -- plan checks ------------------------------------------------------------------------------


def test_live_outbox_without_payload_column_is_a_plan_error():
    pipeline = load_pipeline(PIPELINE, environ={})
    catalog = Catalog(tables=(SourceTable("shop", "outbox", (
        SourceColumn("id", MySQLType.parse("bigint"), ordinal=1),
        SourceColumn("aggregate_type", MySQLType.parse("datetime"), ordinal=2),
    ), ("id",)),), live=True)
    with pytest.raises(PlanError) as caught:
        build_plan(pipeline, catalog)
    assert "type_column 'aggregate_type' is datetime" in caught.value.message
    assert "payload_column 'payload' is not a column of the table in MySQL" in caught.value.message


def test_offline_plan_uses_declared_outbox_columns():
    pipeline = load_pipeline(PIPELINE, environ={})
    catalog = offline_catalog(pipeline)
    assert [c.name for c in catalog.tables[0].columns] == [
        "id", "aggregate_type", "aggregate_id", "payload"]
    plan = build_plan(pipeline, catalog)
    assert len(plan.tables) == 3 and plan.tables[0].outbox.outbox_key == ()


def test_config_builds_routes():
    pipeline = load_pipeline(PIPELINE, environ={})
    spec = pipeline.tables[0].outbox
    assert pipeline.tables[0].mode == "outbox"
    assert (spec.type_column, spec.payload_column, spec.unrouted) == (
        "aggregate_type", "payload", "ignore")
    order = spec.routes[0]
    assert (order.type_value, order.target_table, order.key, order.delete_when) == (
        "order", "ORDERS", ("order_id",), "$.deleted")
    assert order.column("gift_note").on_error == "null"  # a bare YAML null
    assert spec.routes[2].mode == "changelog" and spec.routes[2].deletes == "hard"


# -- plan CLI and metrics ------------------------------------------------------------------


def test_plan_cli_prints_every_route_of_an_outbox_and_one_by_name():
    from tests.unit.test_plan_cli import run_plan

    done = run_plan(PIPELINE, "--table", "shop.outbox", "--format", "json")
    assert done.returncode == 0, done.stderr
    tables = json.loads(done.stdout)["tables"]
    assert [(t["target"], t["outbox"]["route"]) for t in tables] == [
        ("MAIN.ORDERS", "order"), ("MAIN.CUSTOMERS", "customer"),
        ("MAIN.PAYMENT_EVENTS", "payment")]
    assert tables[0]["outbox"]["paths"]["lines"] == "$.lines"
    assert tables[0]["outbox"]["delete_when"] == "$.deleted"
    one = run_plan(PIPELINE, "--table", "shop.outbox[payment]")
    assert one.returncode == 0, one.stderr
    assert one.stdout.startswith("-- shop.outbox[payment] -> MAIN.PAYMENT_EVENTS (duckdb)")
    assert "MAIN.ORDERS" not in one.stdout


def test_unrouted_events_reach_the_log_line_and_the_metrics():
    from replicator.engine.apply.metrics import BatchReport, TableReport, format_text
    from replicator.engine.apply.prometheus import PipelineMetrics

    report = BatchReport("stream", 7, None, pipeline="outbox", tables=[
        TableReport("shop.outbox[order]", changes=3, rows=2, unrouted=2),
        TableReport("shop.outbox[customer]", changes=1, rows=1)])
    text = format_text(report)
    assert "table=shop.outbox[order] changes=3 rows=2" in text and "unrouted=2" in text
    assert text.count("unrouted=") == 1
    metrics = PipelineMetrics("outbox")
    metrics.observe(report)
    metrics.observe(report)
    rendered = metrics.render()
    assert ('replicator_outbox_unrouted_total{pipeline="outbox",table="shop.outbox[order]"} 4.0'
            in rendered)
    assert 'replicator_outbox_unrouted_total{pipeline="outbox",table="shop.outbox[customer]"' \
        not in rendered


def test_a_route_with_row_columns_and_delete_when_reads_each_path_in_its_place(plan):
    from dataclasses import replace

    payments = plan.tables[2]
    deleting = replace(payments, outbox=replace(payments.outbox, delete_when="$.gone"))
    out = _routed(deleting, [row(5, "payment", {"id": 3, "order_id": 4, "amount": 1.5}),
                             row(6, "payment", {"id": 3, "gone": "yes", "amount": "2"})])
    assert [(e[cb.OP], e["event_id"], e["payment_id"], e["order_id"], e["amount"]) for e in out] == [
        ("c", Decimal(5), Decimal(3), Decimal(4), Decimal("1.50")),
        ("d", Decimal(6), Decimal(3), None, Decimal("2.00"))]


def test_a_binary_payload_column_is_read_as_utf8_text(plan):
    orders = plan.tables[0]
    columns = [(c.name, c.mysql_type) for c in outbox_catalog().tables[0].columns]
    columns[-1] = ("payload", MySQLType.parse("varbinary(200)"))

    def batch(*payloads):
        events = [row(n, "order", None) for n in range(1, len(payloads) + 1)]
        events = [dataclasses.replace(e, after={**e.after, "payload": p})
                  for e, p in zip(events, payloads, strict=True)]
        return change_batch(events, columns, batch_key(orders))

    routed = route_batch(orders, batch('{"id": 7, "status": "é"}'.encode()), _connection())
    assert routed.column("status").to_pylist() == ["é"]
    with pytest.raises(OutboxError, match=r"row id=2 .*is not JSON: it is not UTF-8 text"):
        route_batch(orders, batch(b'{"id": 7}', b'{"id": 8, "status": "\xff"}'), _connection())


def test_json_paths_name_the_same_places_as_the_path_subset():
    from replicator.transform.outbox import json_path

    assert json_path(("a", "b c", "x/y~z")) == "/a/b c/x~1y~0z"
    assert json_path(()) == ""
    assert json_path(("lines", 0, "sku")) == '$."lines"[0]."sku"'
    assert json_path(("a",), marked=True) == "/Sa"


def test_plan_prints_the_statement_run_executes(plan):
    """`plan --format json` shows each route's statement: the text route_batch runs over a
    batch of the outbox table as the catalog has it."""
    import pyarrow as pa

    from replicator.transform import outbox
    from replicator.transform.outbox_sql import ORD, statement

    for table in plan.tables:
        batch = _batch(table, [row(1, table.outbox.route, {"id": 1})])
        batch = batch.append_column(ORD, pa.array([0], pa.int64()))
        kinds = tuple((f.name, outbox.source_kind(f.type)) for f in batch.schema)
        assert outbox.planned_statement(table, outbox_catalog()) == statement(table, "string", kinds)


def test_the_prepared_statement_reads_each_batch_and_is_bound_once(plan, tmp_path):
    """A route's statement is prepared once per connection and batch schema (binding was
    most of a small batch's cost): each later batch is read by it, not by the first batch's
    rows, a batch of other Arrow types gets a statement of its own, and an EXECUTE binds
    nothing again (a catalog read, a view or a MACRO, would make DuckDB bind it each time)."""
    import pyarrow as pa

    orders = plan.tables[0]
    first = _batch(orders, [row(1, "order", {"id": 7, "status": "new"}),
                            row(2, "order", {"id": 8, "status": "paid"})])
    second = _batch(orders, [row(3, "order", {"id": 9, "status": "sent"})])
    narrow = second.set_column(second.column_names.index("id"), "id",
                               second.column("id").cast(pa.int32()))
    connection = _connection()
    assert route_batch(orders, first, connection).column("status").to_pylist() == ["new", "paid"]
    profile = tmp_path / "profile.json"
    connection.execute("PRAGMA enable_profiling = 'json'")
    connection.execute(f"PRAGMA profiling_output = '{profile}'")
    try:
        routed = route_batch(orders, second, connection)
    finally:
        connection.execute("PRAGMA disable_profiling")
    assert routed.column("order_id").to_pylist() == [Decimal(9)]
    assert routed.column(cb.POS).to_pylist() == second.column(cb.POS).to_pylist()
    assert json.loads(profile.read_text())["planner"]["binding_time"] < 0.002  # 5-40 ms bound
    assert route_batch(orders, narrow, connection).column("status").to_pylist() == ["sent"]
    assert route_batch(orders, first, connection).column("order_id").to_pylist() == [
        Decimal(7), Decimal(8)]
