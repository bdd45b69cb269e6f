"""Outbox routes flattened columnar (``transform.outbox``) against the per-event path
(``sink.outbox.flatten_outbox`` + ``sink.staging.stage_changes``): the same staging rows, and
where the per-event path fails a row, the columnar path hands it that batch (same error)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from replicator.config import load_pipeline
from replicator.errors import ReplicatorError
from replicator.model.catalog import Catalog, MySQLType, SourceColumn, SourceTable
from replicator.model.changes import BinlogPosition, ChangeEvent
from replicator.plan import build_plan
from replicator.transform import change_batch, stage_batch
from replicator.transform.outbox import count_unrouted, route_batch
from replicator.transform.stage import _per_row, batch_key

ROOT = Path(__file__).resolve().parents[2]
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


def _both(table, events):
    """(columnar staging or its error, per-event staging or its error, whether the batch
    took the columnar path)."""
    batch = _batch(table, events)
    outcomes = []
    for stage in (lambda: stage_batch(table, batch), lambda: _per_row(table, batch, 0)):
        try:
            outcomes.append(stage().to_pylist())
        except ReplicatorError as exc:
            outcomes.append(("error", type(exc).__name__, exc.message))
    return outcomes[0], outcomes[1], route_batch(table, batch) is not None


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


def test_canonical_payloads_take_the_columnar_path_with_the_same_rows(plan):
    for table in plan.tables:
        columnar, per_event, fast = _both(table, CANONICAL)
        assert fast, table.label
        assert columnar == per_event
    orders = plan.tables[0]
    assert count_unrouted(orders, _batch(orders, CANONICAL)) == 2


@pytest.mark.parametrize("payload", [
    '{"id": 7, "total": 1.234}',  # more decimals than the scale: the per-event error
    '{"id": 7, "total": "10.50"}',  # a numeric string: the per-event path reads it
    '{"id": 7.0}',  # an integral number: read as 7 per event
    '{"id": 1e3}',
    '{"id": "7"}',
    '{"id": null}',  # no key: the per-event error
    '{"status": "x"}',
    '{"id": 7, "customer": {"id": 12345678901}}',  # over NUMBER(10,0)
    '{"id": 7, "total": 12345678901.5}',  # over NUMBER(12,2)
    '{"id": 7, "ratio": NaN}',
    '{"id": 7, "other": Infinity}',  # Arrow would skip it; JSON has no Infinity
    '{"id": 7, "ratio": 1e400}',
    '{"id": 7, "paid": 1}',
    '{"id": 7, "paid": "true"}',
    '{"id": 7, "region": 5}',
    '{"id": 7, "customer": {"region": "too long!"}}',
    '{"id": 7, "gift note": "too long!"}',  # on_error: null
    '{"id": 7, "customer": 5}',  # a path through a number: missing per event
    '{"id": 7, "id": 8}',  # the last one wins per event
    '{"id": 7, "deleted": "yes"}',
    '{"id": 7, "deleted": 1}',
    '\ufeff{"id": 7}',
    '{"id": 7,\n "status": "two lines"}',
    '{"id": 7} {"id": 8}',
    "",
    "  ",
    "[1, 2]",
    "7",
    '{"id": 7, "s": "\\ud800"}',
    '{"id": 7, "status": "\\ud800"}',
    None,
])
def test_what_arrow_cannot_promise_takes_the_per_event_path(plan, payload):
    """Each of these either converts as per event or fails there: the batch that holds it
    gives the per-event path's rows or error."""
    events = [*CANONICAL[:3], _event(50, "order", payload)]
    for table in plan.tables[:1]:
        columnar, per_event, _ = _both(table, events)
        assert columnar == per_event


@pytest.mark.parametrize("payload", [
    '{"id": 3, "day": "2024-02-30"}', '{"id": 3, "day": " 2024-01-02"}', '{"id": 3, "day": "2024-1-2"}',
    '{"id": 3, "day": "2024-01-02T00:00"}', '{"id": 3, "day": 20240102}',
    '{"id": 3, "at": "2024-01-02t10:11:12"}', '{"id": 3, "at": "2024-01-02T10:11:12.1234567"}',
    '{"id": 3, "at3": "2024-01-02T10:11:12.1234"}', '{"id": 3, "at3": "2024-01-02T10:11:12.123"}',
    '{"id": 3, "instant": "2024-01-02T10:11:12.123456789Z"}', '{"id": 3, "instant": "2024-01-02 10:11"}',
    '{"id": 3, "at": "2024-01-02T23:59:60"}', '{"id": 3, "at": "x"}', '{"id": 3, "at": 5}',
])
def test_dates_and_timestamps_convert_alike_on_both_paths(plan, payload):
    events = [CANONICAL[1], _event(50, "audit", payload)]
    columnar, per_event, _ = _both(plan.tables[1], events)
    assert columnar == per_event


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
def test_generated_payloads_stage_alike_on_both_paths(plan, payloads):
    events = [_event(n, "order", p) for n, p in enumerate(payloads)]
    columnar, per_event, _ = _both(plan.tables[0], events)
    assert columnar == per_event



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
def test_well_typed_payloads_take_the_columnar_path(plan, payloads):
    events = [_event(n, "order", p) for n, p in enumerate(payloads)]
    columnar, per_event, _ = _both(plan.tables[0], events)
    assert columnar == per_event


def test_a_batch_of_well_typed_payloads_takes_the_columnar_path(plan):
    import random

    rng = random.Random(17)
    payloads = [{"id": rng.randrange(2**64), "status": rng.choice(["new", "paid", "é😀", ""]),
                 "total": json.loads(f"{rng.randrange(-10**6, 10**6)}.{rng.randrange(100):02d}"),
                 "ratio": rng.random() * 10 ** rng.randrange(-5, 300), "paid": rng.random() < 0.5,
                 "customer": {"id": rng.randrange(-(10**9), 10**9), "region": "eu"},
                 "deleted": rng.random() < 0.1} for _ in range(500)]
    events = [_event(n, "order", p) for n, p in enumerate(payloads)]
    columnar, per_event, fast = _both(plan.tables[0], events)
    assert fast and columnar == per_event


def test_the_example_pipeline_routes_stage_alike_and_two_of_three_go_columnar():
    """pipelines/outbox.yaml: the order route has a VARIANT column and an array index (per
    event); the customer route (DATE, BOOLEAN) and the payment route (a row column,
    TIMESTAMP_TZ) go columnar."""
    from tests.unit.test_outbox import outbox_catalog

    plan = build_plan(load_pipeline(ROOT / "pipelines" / "outbox.yaml", environ={}), outbox_catalog())
    events = [
        _event(1, "order", {"id": 7, "status": "new", "total": "10.50", "lines": [{"sku": "a"}]}),
        _event(2, "customer", {"id": 7, "email": "a@b", "vip": True, "signed_up": "2024-02-29"}),
        _event(3, "customer", {"id": 8, "deleted": True}),
        _event(4, "payment", {"id": 1, "order_id": 7, "amount": 10.5, "paid_at": "2024-01-02T10:00:00+01:00"}),
        _event(5, "payment", {"id": 1, "order_id": 7, "amount": -1, "paid_at": None}),
        _event(6, "nobody", {"id": 1}),
    ]
    columns = [(c.name, c.mysql_type) for c in outbox_catalog().tables[0].columns]
    taken = []
    for table in plan.tables:
        batch = change_batch(events, columns, batch_key(table))
        assert stage_batch(table, batch).to_pylist() == _per_row(table, batch, 0).to_pylist()
        taken.append(route_batch(table, batch) is not None)
    assert taken == [False, True, True]
    assert count_unrouted(plan.tables[0], change_batch(events, columns, batch_key(plan.tables[0]))) == 1


def test_a_batch_in_several_chunks_stages_alike(plan):
    """Landed files are read back as chunked columns."""
    import pyarrow as pa

    for table in plan.tables:
        batch = pa.concat_tables([_batch(table, CANONICAL[:5]), _batch(table, CANONICAL[5:])])
        assert batch.column(0).num_chunks == 2
        assert route_batch(table, batch) is not None
        assert stage_batch(table, batch).to_pylist() == _per_row(table, batch, 0).to_pylist()


@pytest.mark.parametrize("type_sql", ["varbinary(64)", "binary(8)", "int", "bigint unsigned"])
def test_unrouted_events_and_route_rows_are_found_columnar_for_every_type_column(plan, type_sql):
    """The type column as bytes (some not UTF-8), or as a number: the route's rows and the
    unrouted count come from the column itself, as the per-event rule reads them
    (``sink.outbox.type_value``), never from ChangeEvents."""
    import dataclasses

    import pyarrow as pa

    from replicator.sink.outbox import count_unrouted as count_events
    from replicator.transform.batch import batch_events

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
    expected = count_events(table, batch_events(batch, batch_key(table)))
    assert count_unrouted(table, batch) == expected == (2 if width is None else 4)
    routed = route_batch(table, batch)
    assert routed is not None
    assert routed.column("order_id").to_pylist() == ([] if width else [1])
