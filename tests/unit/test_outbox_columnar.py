"""Outbox routes flattened columnar (``transform.outbox``): staging rows and errors.

The cases are those of the differential test that held the columnar path equal to the
per-event path (``sink.outbox`` + ``sink.staging.stage_changes``) before that path was
deleted (docs/decisions/one-data-plane.md): their outcomes, recorded from the per-event
path, are the expectations in ``outbox_columnar_expected.json``. Nine outcomes changed
with the deletion, each a per-row artefact the decision names (DuckDB's words for a
payload that is not JSON, a duplicate key's first value, an unpaired
surrogate escape makes the payload not JSON)."""

from __future__ import annotations

import json
from decimal import Decimal
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from replicator.config import load_pipeline
from replicator.errors import ReplicatorError
from replicator.model import change_batch as cb
from replicator.model.catalog import Catalog, MySQLType, SourceColumn, SourceTable
from replicator.model.changes import BinlogPosition, ChangeEvent
from replicator.plan import build_plan
from replicator.transform import change_batch, stage_batch
from replicator.transform.outbox import OutboxError, count_unrouted, route_batch
from replicator.transform.stage import _connection, batch_key

ROOT = Path(__file__).resolve().parents[2]
EXPECTED = json.loads((Path(__file__).parent / "outbox_columnar_expected.json").read_text())
COLUMNS = (("id", "bigint"), ("aggregate_type", "varchar(64)"), ("payload", "json"))

ROUTES = """
version: 1
source: {mysql: {host: h, password: "${P:-}"}}
target: {duckdb: {path: w.duckdb}}
tables:
  - source: shop.outbox
    mode: outbox
    columns:
      id: {source_type: bigint}
      aggregate_type: {source_type: varchar(64)}
      payload: {source_type: json}
    outbox:
      type_column: aggregate_type
      payload_column: payload
      unrouted: ignore
      routes:
        order:
          target: ORDERS
          key: [order_id]
          delete_when: $.deleted
          metadata: [op, ts, position]
          columns:
            order_id: {path: $.id, type: "NUMBER(20,0)"}
            customer_id: {path: $.customer.id, type: "NUMBER(10,0)"}
            region: {path: $.customer.region, type: VARCHAR(8)}
            status: {path: $.status, type: VARCHAR}
            amount: {path: $.total, type: "NUMBER(12,2)"}
            ratio: {path: $.ratio, type: FLOAT}
            paid: {path: $.paid, type: BOOLEAN}
            note: {path: "$['gift note']", type: VARCHAR(5), on_error: null}
        audit:
          target: AUDIT
          mode: changelog
          key: [audit_id]
          columns:
            row_id: {column: id, type: "NUMBER(20,0)"}
            kind: {column: aggregate_type, type: VARCHAR}
            audit_id: {path: $.id, type: "NUMBER(20,0)"}
            what: {path: $.what, type: VARCHAR}
            day: {path: $.day, type: DATE}
            at: {path: $.at, type: TIMESTAMP_NTZ}
            at3: {path: $.at3, type: TIMESTAMP_NTZ(3)}
            instant: {path: $.instant, type: TIMESTAMP_TZ}
"""


@pytest.fixture(scope="module")
def plan(tmp_path_factory):
    path = tmp_path_factory.mktemp("outbox") / "p.yaml"
    path.write_text(ROUTES)
    columns = tuple(SourceColumn(n, MySQLType.parse(t), ordinal=i)
                    for i, (n, t) in enumerate(COLUMNS, start=1))
    catalog = Catalog(tables=(SourceTable("shop", "outbox", columns, ("id",)),), live=True)
    return build_plan(load_pipeline(path, environ={}), catalog)


def _event(n: int, kind, payload, op: str = "c") -> ChangeEvent:
    image = {"id": n, "aggregate_type": kind,
             "payload": payload if isinstance(payload, str) or payload is None else json.dumps(payload)}
    return ChangeEvent("shop.outbox", op, BinlogPosition("mysql-bin.000001", 100 + n), 0,
                       1_700_000_000_000 + n, before=image if op in ("u", "d") else None,
                       after=None if op == "d" else image)


def _batch(table, events):
    columns = [(n, MySQLType.parse(t)) for n, t in COLUMNS]
    return change_batch(events, columns, batch_key(table))


def _outcome(table, events):
    """The staging rows of the events' batch (as text: repr), or the error."""
    try:
        return repr(stage_batch(table, _batch(table, events)).to_pylist())
    except ReplicatorError as exc:
        return repr(("error", type(exc).__name__, exc.message))


def _routed(table, batch):
    return route_batch(table, batch, _connection())


CANONICAL = [
    _event(1, "order", {"id": 7, "customer": {"id": 3, "region": "eu"}, "status": "new",
                        "total": 10.5, "ratio": 0.1, "paid": False, "gift note": "hi"}),
    _event(2, "audit", {"id": 1, "what": "x", "day": "2024-02-29", "at": "2024-01-02T10:11:12+02:00",
                        "at3": "2024-01-02 10:11:12.125", "instant": "2024-01-02T10:11:12.5"}),
    _event(12, "audit", {"id": 2, "instant": "2024-06-01T00:00:00-05:30", "at": "2024-01-02"}),
    _event(3, "order", {"id": 8, "total": 1e2, "status": "é 😀 \"q\"", "customer": None}),
    _event(4, "order", {"id": 7, "status": "paid", "total": -0.01, "extra": [1, {"a": 2.50}]}),
    _event(5, "order", {"id": 9, "deleted": True}),
    _event(6, "order", {"id": 10, "deleted": False, "ratio": 12345678901234567890}),
    _event(7, "order", {"id": 11}, op="r"),
    _event(8, "order", {"id": 12, "status": "x"}, op="u"),  # not an event
    _event(9, "unknown", {"id": 13}),
    _event(10, None, {"id": 14}),
    _event(11, "order", {"id": 18446744073709551615, "customer": {"id": 9999999999}}),
]



def test_canonical_payloads_stage_as_recorded(plan):
    for table, expected in zip(plan.tables, EXPECTED["canonical"], strict=True):
        assert _outcome(table, CANONICAL) == expected, table.label
    orders = plan.tables[0]
    assert count_unrouted(orders, _batch(orders, CANONICAL)) == 2


@pytest.mark.parametrize(("payload", "expected"), EXPECTED["payloads"])
def test_awkward_payloads_convert_or_fail_as_recorded(plan, payload, expected):
    """Each of these either converts by the rules or fails the batch naming the row, the
    route, the column, the path and the value."""
    events = [*CANONICAL[:3], _event(50, "order", payload)]
    assert _outcome(plan.tables[0], events) == expected


@pytest.mark.parametrize(("payload", "expected"), EXPECTED["dates"])
def test_dates_and_timestamps_convert_as_recorded(plan, payload, expected):
    events = [CANONICAL[1], _event(50, "audit", payload)]
    assert _outcome(plan.tables[1], events) == expected


_values = st.one_of(st.none(), st.booleans(), st.integers(-(2**70), 2**70),
                    st.decimals(allow_nan=False, allow_infinity=False, places=3, max_value=10**12,
                                min_value=-(10**12)).map(float),
                    st.text(max_size=6))


@settings(max_examples=40, deadline=None, suppress_health_check=list(HealthCheck))
@given(st.lists(st.fixed_dictionaries({}, optional={
    "id": st.integers(0, 2**64 - 1), "status": _values, "total": _values, "ratio": _values,
    "paid": _values, "gift note": _values, "deleted": _values,
    "customer": st.one_of(st.none(), st.fixed_dictionaries({}, optional={"id": _values, "region": _values})),
}), min_size=1, max_size=6))
def test_generated_payloads_stage_or_name_the_failing_row(plan, payloads):
    """Any mix of JSON values: the batch stages, or stops with an OutboxError naming the
    first failing row (never another exception)."""
    events = [_event(n, "order", p) for n, p in enumerate(payloads)]
    try:
        rows = stage_batch(plan.tables[0], _batch(plan.tables[0], events)).to_pylist()
    except OutboxError as exc:
        assert exc.message.startswith("shop.outbox row id=") and exc.hint
        return
    assert len(rows) <= len(payloads)


def _expected_route_row(payload):
    """What the rules make of a well-typed payload (docs/modes.md#outbox)."""
    customer = payload.get("customer") or {}
    note = payload.get("gift note")
    total = payload.get("total")
    return {"order_id": Decimal(payload["id"]),
            "customer_id": None if customer.get("id") is None else Decimal(customer["id"]),
            "region": customer.get("region"), "status": payload.get("status"),
            "amount": None if total is None else Decimal(repr(total)).quantize(Decimal("0.01")),
            "ratio": payload.get("ratio"), "paid": payload.get("paid"),
            "note": note if note is None or len(note) <= 5 else None,  # on_error: null
            "op": "d" if payload.get("deleted") else "c"}


@settings(max_examples=40, deadline=None, suppress_health_check=list(HealthCheck))
@given(st.lists(st.fixed_dictionaries({"id": st.integers(0, 2**64 - 1)}, optional={
    "status": st.one_of(st.none(), st.text(max_size=8)),
    "total": st.one_of(st.none(), st.decimals(places=2, min_value=-(10**9), max_value=10**9).map(
        lambda d: json.loads(str(d)))),  # a JSON number with its digits
    "ratio": st.one_of(st.none(), st.floats(allow_nan=False, allow_infinity=False)),
    "paid": st.one_of(st.none(), st.booleans()), "deleted": st.booleans(),
    "gift note": st.one_of(st.none(), st.text(max_size=7)),
    "customer": st.fixed_dictionaries({}, optional={
        "id": st.integers(-(10**10) + 1, 10**10 - 1), "region": st.text(max_size=8)}),
}), min_size=1, max_size=8))
def test_well_typed_payloads_convert_exactly(plan, payloads):
    table = plan.tables[0]
    payloads = [p for p in payloads if abs((p.get("customer") or {}).get("id") or 0) < 10**10]
    events = [_event(n, "order", p) for n, p in enumerate(payloads)]
    routed = _routed(table, _batch(table, events)).to_pylist()
    names = [c.source_column for c in table.data_columns]
    assert [{**{n: r[n] for n in names}, "op": r[cb.OP]} for r in routed] == \
        [_expected_route_row(p) for p in payloads]


def test_a_batch_of_well_typed_payloads_converts_exactly(plan):
    import random

    rng = random.Random(17)
    payloads = [{"id": rng.randrange(2**64), "status": rng.choice(["new", "paid", "é😀", ""]),
                 "total": json.loads(f"{rng.randrange(-10**6, 10**6)}.{rng.randrange(100):02d}"),
                 "ratio": rng.random() * 10 ** rng.randrange(-5, 300), "paid": rng.random() < 0.5,
                 "customer": {"id": rng.randrange(-(10**9), 10**9), "region": "eu"},
                 "deleted": rng.random() < 0.1} for _ in range(500)]
    table = plan.tables[0]
    routed = _routed(table, _batch(table, [_event(n, "order", p) for n, p in enumerate(payloads)]))
    names = [c.source_column for c in table.data_columns]
    assert [{**{n: r[n] for n in names}, "op": r[cb.OP]} for r in routed.to_pylist()] == \
        [_expected_route_row(p) for p in payloads]


def test_the_example_pipeline_routes_stage_every_route_columnar():
    """pipelines/outbox.yaml: a VARIANT column and an array index (order), DATE and BOOLEAN
    (customer), a row column and TIMESTAMP_TZ (payment)."""
    import datetime as dt

    from tests.unit.test_outbox import outbox_catalog

    plan = build_plan(load_pipeline(ROOT / "pipelines" / "outbox.yaml", environ={}), outbox_catalog())
    events = [
        # as text: a JSON number keeps its digits (2.50)
        _event(1, "order", '{"id": 7, "status": "new", "total": "10.50", "lines": [{"sku": "a", "n": 2.50}]}'),
        _event(2, "customer", {"id": 7, "email": "a@b", "vip": True, "signed_up": "2024-02-29"}),
        _event(3, "customer", {"id": 8, "deleted": True}),
        _event(4, "payment", {"id": 1, "order_id": 7, "amount": 10.5, "paid_at": "2024-01-02T10:00:00+01:00"}),
        _event(5, "payment", {"id": 1, "order_id": 7, "amount": -1, "paid_at": None}),
        _event(6, "nobody", {"id": 1}),
    ]
    columns = [(c.name, c.mysql_type) for c in outbox_catalog().tables[0].columns]
    staged = [stage_batch(t, change_batch(events, columns, batch_key(t))).to_pylist() for t in plan.tables]
    order, = staged[0]
    assert (order["ORDER_ID"], order["AMOUNT"], order["FIRST_SKU"], order["LINES"]) == (
        Decimal(7), Decimal("10.50"), "a", '[{"sku":"a","n":2.50}]')
    assert [(r["CUSTOMER_ID"], r["VIP"], r["SIGNED_UP"], r["_REPLICATOR_OP"]) for r in staged[1]] == [
        (Decimal(7), True, dt.date(2024, 2, 29), "c"), (Decimal(8), None, None, "d")]
    assert [(r["EVENT_ID"], r["AMOUNT"], r["PAID_AT"]) for r in staged[2]] == [
        (Decimal(4), Decimal("10.50"), dt.datetime(2024, 1, 2, 9, tzinfo=dt.UTC)),
        (Decimal(5), Decimal("-1.00"), None)]
    assert count_unrouted(plan.tables[0], change_batch(events, columns, batch_key(plan.tables[0]))) == 1


def test_a_batch_in_several_chunks_stages_alike(plan):
    """Landed files are read back as chunked columns."""
    import pyarrow as pa

    for table, expected in zip(plan.tables, EXPECTED["canonical"], strict=True):
        batch = pa.concat_tables([_batch(table, CANONICAL[:5]), _batch(table, CANONICAL[5:])])
        assert batch.column(0).num_chunks == 2
        assert repr(stage_batch(table, batch).to_pylist()) == expected


@pytest.mark.parametrize("type_sql", ["varbinary(64)", "binary(8)", "int", "bigint unsigned"])
def test_unrouted_events_and_route_rows_are_found_columnar_for_every_type_column(plan, type_sql):
    """The type column as bytes (some not UTF-8), or as a number: the route's rows and the
    unrouted count come from the column itself (a number by its decimal text, bytes by the
    route names' UTF-8 bytes)."""
    import dataclasses

    import pyarrow as pa

    numeric = "int" in type_sql
    width = 8 if type_sql.startswith("binary(") else None

    def kind(value):
        if value is None or numeric:
            return value
        raw = value if isinstance(value, bytes) else value.encode()
        return raw.ljust(width, b"\0") if width else raw

    names = [7, 8, None, 9] if numeric else ["order", b"\xff\xfeorder", None, "audit"]
    table = plan.tables[0]
    if numeric:  # routes named by numbers
        table = dataclasses.replace(table, outbox=dataclasses.replace(
            table.outbox, route="7", routed=("7", "9")))
    events = [_event(n, kind(name), {"id": n}) for n, name in enumerate(names, start=1)]
    events.append(_event(9, kind(names[0]), {"id": 1}, op="u"))  # an update: no event
    columns = [(n, MySQLType.parse(type_sql if n == "aggregate_type" else t)) for n, t in COLUMNS]
    batch = change_batch(events, columns, batch_key(table))
    assert not pa.types.is_string(batch.column("aggregate_type").type)
    # binary(8) pads every name, so no route takes any of the four events
    assert count_unrouted(table, batch) == (2 if width is None else 4)
    assert _routed(table, batch).column("order_id").to_pylist() == ([] if width else [1])
