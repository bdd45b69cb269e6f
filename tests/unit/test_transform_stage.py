"""replicator.transform.stage_batch against sink.staging.stage_changes, table by table.

The same changes go through both: as ChangeEvents into ``adapt_events`` + ``stage_changes``
(the per-row path), and as a columnar change batch (``transform.change_batch``) into
``stage_batch``. The staging tables must be equal: same columns, same Arrow types, same values
in the same order, for every mode, the awkward values of ``tests/fixtures/sink_sample``, key
updates, filters, masks and computed columns.
"""

from __future__ import annotations

import datetime as dt
from decimal import Decimal
from pathlib import Path

import pyarrow as pa
import pytest

from replicator.config import load_pipeline
from replicator.model.changes import BinlogPosition, ChangeEvent
from replicator.plan import build_plan, offline_catalog
from replicator.sink.adapt import adapt_events
from replicator.sink.staging import stage_changes, staging_schema
from replicator.transform import change_batch, stage_batch
from replicator.transform.stage import batch_key
from tests.fixtures.sink_sample import CATALOG, sample_pipeline, scenario

ROOT = Path(__file__).resolve().parents[2]
SALT = "pepper 😀 'x'"


def _columns(catalog, name):
    database, table = name.split(".", 1)
    return [(c.name, c.mysql_type) for c in catalog.table(database, table).columns]


def _same(table_plan, catalog, events, first_seq=0):
    expected = stage_changes(table_plan, adapt_events(table_plan, list(events)),
                             first_seq=first_seq)
    batch = change_batch(events, _columns(catalog, events[0].table), batch_key(table_plan))
    staged = stage_batch(table_plan, batch, first_seq=first_seq)
    assert staged.schema == staging_schema(table_plan)
    assert staged.to_pylist() == expected.to_pylist()
    return staged


def _scenario_cases():
    plan = build_plan(sample_pipeline("snowflake"), CATALOG)
    batches, _ = scenario()
    for batch_id, tables in batches:
        for name, events in tables.items():
            yield pytest.param(plan.table(name), events, id=f"{name}-{batch_id}")


@pytest.mark.parametrize(("table_plan", "events"), list(_scenario_cases()))
def test_sample_scenario_stages_the_same_rows(table_plan, events) -> None:
    _same(table_plan, CATALOG, events)
    _same(table_plan, CATALOG, events, first_seq=7)


def _event(table, op, before, after, pos, index=0, ts=1_700_000_000_000):
    return ChangeEvent(table=table, op=op, position=BinlogPosition("mysql-bin.000003", pos),
                       row_index=index, ts_ms=ts + pos, before=before, after=after,
                       transaction_id=f"0-1-{pos}")


def _modes():
    pipeline = load_pipeline(ROOT / "pipelines" / "modes.yaml", environ={})
    return build_plan(pipeline, offline_catalog(pipeline)), offline_catalog(pipeline)


@pytest.mark.parametrize("source", ["shop.orders", "shop.order_events", "shop.products",
                                    "shop.customers"])
def test_every_mode_stages_the_same_rows(source) -> None:
    plan, catalog = _modes()
    table_plan = plan.table(source)
    row = {name: None for name, _ in _columns(catalog, source)}
    key = table_plan.source_key[0]
    texts = [c for c, t in _columns(catalog, source) if t.name in ("varchar", "text") and c != key]
    a = {**row, key: 1 if key == "id" else "a", **{c: f"{c} 'x' 😀" for c in texts}}
    b = {**a, **{c: "second" for c in texts[:1]}}
    c = {**b, **{c: "third" for c in texts}}
    other = {**a, key: 2 if key == "id" else "b"}
    moved = {**other, key: 3 if key == "id" else "c"}
    events = [
        _event(source, "c", None, a, 10), _event(source, "u", a, b, 10, 1),
        _event(source, "c", None, other, 20), _event(source, "u", b, c, 30),
        _event(source, "u", other, moved, 40), _event(source, "d", c, None, 50),
        _event(source, "c", None, a, 60), _event(source, "r", None, moved, 5),
    ]
    _same(table_plan, catalog, events)


def _transforms():
    pipeline = load_pipeline(ROOT / "pipelines" / "transforms.yaml", environ={"PII_SALT": SALT})
    return build_plan(pipeline, offline_catalog(pipeline)).table("crm.customers"), offline_catalog(pipeline)


ROW = {"id": 7, "first_name": "Zoë", "last_name": None, "kind": "person", "email": "A@B.example",
       "card_number": "4111111111111234", "phone": "+47 555", "birth_date": dt.date(1990, 1, 31),
       "net_amount": Decimal("10.55"), "created_at": dt.datetime(2024, 3, 15, 10, 11, 12, 5)}


def test_masks_filter_and_computed_columns_stage_the_same_rows() -> None:
    table_plan, catalog = _transforms()
    nulls = {k: None for k in ROW} | {"id": 8, "kind": "person"}
    texts = dict(ROW, id=9, email="None", card_number="None", phone="None", last_name="O'Brien")
    test = dict(ROW, id=10, kind="test")
    source = "crm.customers"
    events = [
        _event(source, "r", None, ROW, 1), _event(source, "r", None, nulls, 1, 1),
        _event(source, "r", None, texts, 1, 2), _event(source, "r", None, test, 1, 3),
        _event(source, "u", ROW, dict(ROW, kind="test"), 10),  # leaves the filter: a delete
        _event(source, "u", test, dict(test, kind="person", net_amount=Decimal("-0.05")), 20),
        _event(source, "u", texts, dict(texts, id=11), 30),  # a key update
        _event(source, "d", nulls, None, 40),
    ]
    _same(table_plan, catalog, events)


def test_an_empty_batch_stages_an_empty_table_of_the_staging_schema() -> None:
    table_plan, catalog = _transforms()
    batch = change_batch([], _columns(catalog, "crm.customers"), batch_key(table_plan))
    staged = stage_batch(table_plan, batch)
    assert staged.num_rows == 0 and staged.schema == staging_schema(table_plan)
    assert isinstance(staged, pa.Table)
