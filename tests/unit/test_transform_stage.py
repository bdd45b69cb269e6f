"""replicator.transform.stage_batch, table by table, against recorded staging rows.

The cases are those of the differential test that held ``stage_batch`` equal to the per-row
staging (``sink.staging.stage_changes``, an independent second implementation) until that
path was deleted (docs/decisions/one-data-plane.md): the rows the per-row path staged for each
case are recorded in ``transform_stage_expected.json`` (keyed by ``case_key``; the SHA-256 of
the rows' repr, which a failure prints), and
``stage_batch`` must stage exactly them: same columns, same Arrow types, same values in the
same order, for every mode, the awkward values of ``tests/fixtures/sink_sample``, key
updates, filters, masks and computed columns.
"""

from __future__ import annotations

import datetime as dt
import hashlib
import json
from decimal import Decimal
from pathlib import Path

import pyarrow as pa
import pytest

from replicator.config import load_pipeline
from replicator.model.changes import BinlogPosition, ChangeEvent
from replicator.plan import build_plan, offline_catalog
from replicator.plan.expressions.spark_types import STRING as STRING_TYPE
from replicator.sink.staging import staging_schema
from replicator.transform import change_batch, stage_batch
from replicator.transform.stage import batch_key
from tests.fixtures.sink_sample import CATALOG, sample_pipeline, scenario

ROOT = Path(__file__).resolve().parents[2]
EXPECTED = json.loads((Path(__file__).parent / "transform_stage_expected.json").read_text())
SALT = "pepper 😀 'x'"


def _columns(catalog, name):
    database, table = name.split(".", 1)
    return [(c.name, c.mysql_type) for c in catalog.table(database, table).columns]


def case_key(table_plan, events, first_seq):
    """The case's name in ``transform_stage_expected.json``: what it stages and how."""
    text = repr((table_plan.label, table_plan.mode, table_plan.filter,
                 [(c.target_column, repr(c.target_type), c.mask, c.expression) for c in table_plan.columns],
                 [repr(e) for e in events], first_seq))
    return hashlib.sha256(text.encode()).hexdigest()[:16]


def _same(table_plan, catalog, events, first_seq=0):
    """``stage_batch`` stages the rows recorded for the case (from the per-row staging)."""
    batch = change_batch(events, _columns(catalog, events[0].table), batch_key(table_plan))
    staged = stage_batch(table_plan, batch, first_seq=first_seq)
    assert staged.schema == staging_schema(table_plan)
    rows = repr(staged.to_pylist())
    assert hashlib.sha256(rows.encode()).hexdigest() == EXPECTED[case_key(table_plan, events, first_seq)], rows
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


# Every source type declared as other target types, and every mask over every type: the
# conversions of transform.columns, as the per-row converter made them (recorded).
RETYPE_COLUMNS = [
    ("id", "int", None, None),
    ("i", "bigint", "VARCHAR", None), ("i2", "int", "NUMBER(12,2)", None),
    ("i3", "int", "FLOAT", None), ("i4", "tinyint", "BOOLEAN", None),
    ("u", "bigint unsigned", "VARCHAR", None),
    ("d", "decimal(12,4)", "NUMBER(10,1)", None), ("d2", "decimal(12,4)", "FLOAT", None),
    ("d3", "decimal(12,4)", "INTEGER", None), ("d4", "decimal(12,4)", "VARCHAR", None),
    ("d5", "decimal(12,4)", None, "redact2"), ("d6", "decimal(12,4)", None, "sha256"),
    ("f", "double", "VARCHAR", None), ("f2", "double", "NUMBER(20,3)", None),
    ("f3", "double", "INTEGER", None), ("f4", "double", None, "md5"),
    ("dt", "datetime(6)", "VARCHAR", None), ("dt2", "datetime(6)", "DATE", None),
    ("dt3", "datetime", "TIMESTAMP_TZ", None), ("dt4", "datetime(6)", None, "redact3"),
    ("ts", "timestamp(6)", "VARCHAR", None), ("ts2", "timestamp(6)", "TIMESTAMP_NTZ", None),
    ("ts3", "timestamp(6)", "DATE", None),
    ("da", "date", "VARCHAR", None), ("da2", "date", "TIMESTAMP_NTZ", None),
    ("da3", "date", "TIMESTAMP_TZ", None),
    ("tm", "time(6)", None, None), ("tm2", "time(6)", "NUMBER(20,0)", None),
    ("tm3", "time", "INTEGER", None),
    ("s", "varchar(50)", None, "truncate"), ("s2", "varchar(50)", "BINARY", None),
    ("s3", "varchar(50)", None, "redact"), ("s4", "varchar(50)", None, "null"),
    ("s5", "varchar(50)", "BOOLEAN", None), ("s6", "varchar(50)", None, "sha256salt"),
    ("b", "varbinary(20)", "VARCHAR", None), ("b2", "varbinary(20)", None, "truncate"),
    ("b3", "varbinary(20)", None, "sha256"), ("b4", "varbinary(20)", None, "redact2"),
    ("b5", "varbinary(20)", "BOOLEAN", None),
    ("bit", "bit(12)", None, None), ("bit2", "bit(1)", None, None), ("bit3", "bit(12)", "INTEGER", None),
    ("yr", "year", "VARCHAR", None), ("j", "json", None, None), ("e", "enum('a','b')", None, "md5"),
    # Over 38 digits: VARCHAR with every digit of the scale, never an exponent.
    ("w", "decimal(65,30)", None, None), ("w2", "decimal(65,30)", None, "md5"),
    ("w3", "decimal(65,30)", None, "redact2"),
]


def _retype_plan():
    from replicator.model.catalog import Catalog, MySQLType, SourceColumn, SourceTable
    from replicator.model.pipeline import (
        ColumnMapping,
        DuckDBTarget,
        MySQLSource,
        Pipeline,
        TablePipeline,
        TargetConfig,
    )

    masks = {"redact2": ("redact", {"mask_keep_last": 2}), "redact3": ("redact", {"mask_keep_last": 3}),
             "redact": ("redact", {}), "truncate": ("truncate", {"mask_length": 3}),
             "sha256salt": ("sha256", {"mask_salt": SALT}), "sha256": ("sha256", {}),
             "md5": ("md5", {}), "null": ("null", {})}
    mappings = []
    for name, _, target_type, mask in RETYPE_COLUMNS:
        kind, extra = masks[mask] if mask else (None, {})
        if target_type or kind:
            mappings.append(ColumnMapping(name, target_type=target_type, mask=kind, **extra))
    source = SourceTable(database="db", table="t", primary_key=("id",), columns=tuple(
        SourceColumn(name=n, mysql_type=MySQLType.parse(t), nullable=True, ordinal=i)
        for i, (n, t, _, _) in enumerate(RETYPE_COLUMNS, start=1)))
    pipeline = Pipeline(name="retype", source=MySQLSource(),
                        target=TargetConfig(warehouse=DuckDBTarget(path=":memory:")),
                        tables=(TablePipeline(source_database="db", source_table="t",
                                              columns=tuple(mappings),
                                              metadata=("op", "ts", "position", "transaction")),))
    catalog = Catalog(tables=(source,))
    return build_plan(pipeline, catalog).table("db.t"), catalog


def _retype_rows():
    utc = dt.UTC
    base = {
        "i": -(2**63), "i2": 2**31 - 1, "i3": -7, "i4": 0, "u": 2**64 - 1,
        "d": Decimal("-12.2500"), "d2": Decimal("0.1000"), "d3": Decimal("-9.9999"),
        "d4": Decimal("-0.0500"), "d5": Decimal("12.5000"), "d6": Decimal("0.0000"),
        "f": 1.0, "f2": 2.675, "f3": -3.99, "f4": 1e-05,
        "dt": dt.datetime(2024, 2, 29, 23, 59, 59), "dt2": dt.datetime(999, 1, 2, 3, 4, 5, 6),
        "dt3": dt.datetime(2024, 1, 1), "dt4": dt.datetime(2024, 1, 1, 0, 0, 0, 5),
        "ts": dt.datetime(2024, 1, 2, 3, 4, 5, 123456, tzinfo=utc),
        "ts2": dt.datetime(2024, 1, 2, 23, 4, 5, tzinfo=utc), "ts3": dt.datetime(2024, 1, 2, 23, 4, 5, tzinfo=utc),
        "da": dt.date(2024, 2, 29), "da2": dt.date(1, 1, 1), "da3": dt.date(9999, 12, 31),
        "tm": -dt.timedelta(hours=838, minutes=59, seconds=59), "tm2": dt.timedelta(hours=1, microseconds=5),
        "tm3": -dt.timedelta(seconds=1, microseconds=500000),
        "s": "😀é'x\"\\ab", "s2": "Zoë", "s3": "", "s4": "gone", "s5": " No ", "s6": "None",
        "b": b"\x00\xff", "b2": b"\x00\x01\x02\x03", "b3": b"", "b4": b"\x01\xff\x10", "b5": b"\x00\x00",
        "bit": 0b100000000001, "bit2": 1, "bit3": 4095, "yr": 2155,
        "j": '{"a": [1, "😀", null]}', "e": "b",
        "w": Decimal("1E-30"), "w2": Decimal("-1.0E-29"), "w3": Decimal("-0.000000100000000000000000000000"),
    }
    other = {**base, "i": 2**63 - 1, "d": Decimal("12.3500"), "d3": Decimal("9.5000"), "f": -0.0,
             "f2": 1e-7, "f3": 12345.5, "f4": float("inf"), "dt": dt.datetime(2024, 1, 1, 0, 0, 0, 1),
             "s": "ab", "s5": "yes", "s6": "", "b": b"", "b2": b"\xff", "b5": b"\x00\x10",
             "d5": Decimal("1.0000"), "dt4": dt.datetime(2024, 1, 1), "tm": dt.timedelta(0),
             "i4": -1, "bit2": 0, "e": "a",
             "w": Decimal("-" + "9" * 35 + "." + "9" * 30), "w2": Decimal("9" * 35 + "." + "9" * 30),
             "w3": Decimal("12." + "5" + "0" * 29)}
    return [{**base, "id": 1}, {**other, "id": 2}, {name: None for name, *_ in RETYPE_COLUMNS} | {"id": 3},
            {**base, "id": 4, "f": 123456789.0, "f4": float("nan"), "w": Decimal("0E-30")}, {**base, "id": 5, "f": float("nan")}]


def test_retyped_and_masked_columns_of_every_type_stage_the_same_values() -> None:
    table_plan, catalog = _retype_plan()
    events = [_event("db.t", "c", None, row, 10, index) for index, row in enumerate(_retype_rows())]
    _same(table_plan, catalog, events)


def test_a_row_spark_would_fail_stops_the_batch_naming_table_column_and_key() -> None:
    import dataclasses

    from replicator.plan.expressions.errors import EvaluationError

    pipeline = load_pipeline(ROOT / "pipelines" / "transforms.yaml", environ={"PII_SALT": SALT})
    tables = []
    for table in pipeline.tables:
        ratio = dataclasses.replace(next(c for c in table.columns if c.computed),
                                    source_column="ratio", expression="net_amount / 0",
                                    target_type="DOUBLE")
        tables.append(dataclasses.replace(table, columns=(*table.columns, ratio)))
    pipeline = dataclasses.replace(pipeline, tables=tuple(tables))
    catalog = offline_catalog(pipeline)
    table_plan = build_plan(pipeline, catalog).table("crm.customers")
    rows = [dict(ROW, id=n, net_amount=None) for n in range(1, 40)] + [ROW]
    events = [_event("crm.customers", "r", None, row, 5, n) for n, row in enumerate(rows)]
    batch = change_batch(events, _columns(catalog, "crm.customers"), batch_key(table_plan))
    with pytest.raises(EvaluationError) as caught:
        stage_batch(table_plan, batch)
    assert caught.value.error_class == "DIVIDE_BY_ZERO"
    assert "crm.customers" in caught.value.message and "RATIO" in caught.value.message
    assert "id=7" in caught.value.message


def _random_history(source, key, columns, seed, changes=60):
    """A valid random history: inserts of absent keys, updates (some changing only untracked
    columns, some the key) and deletes of present ones, in binlog order."""
    import random

    rng = random.Random(seed)
    present: dict = {}
    events = []
    for n in range(changes):
        pos, index = 100 + (n // 3) * 10, n % 3
        values = {c: rng.choice(["a", "b", None]) for c in columns}
        if not present or (rng.random() < 0.3 and len(present) < 6):
            k = rng.randrange(1, 9)
            while k in present:
                k = rng.randrange(1, 9)
            row = {key: k, **values}
            present[k] = row
            events.append(_event(source, "c", None, row, pos, index))
            continue
        k = rng.choice(sorted(present))
        old = present[k]
        if rng.random() < 0.2:
            events.append(_event(source, "d", old, None, pos, index))
            del present[k]
        elif rng.random() < 0.15 and len(present) < 8:
            new_key = next(x for x in range(1, 10) if x not in present)
            new = {**old, key: new_key}
            del present[k]
            present[new_key] = new
            events.append(_event(source, "u", old, new, pos, index))
        else:
            column = rng.choice(columns)
            new = {**old, column: rng.choice(["a", "b", "c", None])}
            present[k] = new
            events.append(_event(source, "u", old, new, pos, index))
    return events


@pytest.mark.parametrize("seed", range(12))
@pytest.mark.parametrize("source", ["shop.customers", "shop.orders", "shop.order_events"])
def test_random_histories_stage_the_same_rows_in_every_mode(source, seed) -> None:
    plan, catalog = _modes()
    table_plan = plan.table(source)
    names = [n for n, _ in _columns(catalog, source)]
    key = table_plan.source_key[0]
    texts = [n for n, t in _columns(catalog, source) if t.name in ("varchar", "text") and n != key]
    events = _random_history(source, key, texts, seed)
    _same(table_plan, catalog, events)
    del names


def _filtered(table_plan, column):
    import dataclasses

    return dataclasses.replace(table_plan, filter=f"{column} IS NULL OR {column} <> 'b'",
                               filter_inputs=((column, STRING_TYPE),))


@pytest.mark.parametrize("seed", range(8))
def test_random_histories_with_a_filter_stage_the_same_rows(seed) -> None:
    plan, catalog = _modes()
    table_plan = plan.table("shop.products")  # merge, soft deletes
    events = _random_history("shop.products", "sku", ["title"], seed)
    events = [dataclasses_replace_key(e) for e in events]
    _same(_filtered(table_plan, "title"), catalog, events)


def dataclasses_replace_key(event):
    """products are keyed by a string sku."""
    import dataclasses

    def fix(image):
        return None if image is None else {**image, "sku": f"k{image['sku']}"}

    return dataclasses.replace(event, before=fix(event.before), after=fix(event.after))


def test_every_change_tables_log_a_delete_when_an_update_leaves_the_filter() -> None:
    """Changelog/log/scd2 with a filter: the batch has no before-image of an update, so an
    update that fails the filter is logged as a delete of its key (the row may have matched
    before); inserts, reads and deletes of rows that fail it are dropped."""
    plan, catalog = _modes()
    table_plan = _filtered(plan.table("shop.order_events"), "note")
    row = {"id": 1, "order_id": 2, "note": "a", "payload": None}
    events = [_event("shop.order_events", "c", None, row, 10),
              _event("shop.order_events", "u", row, {**row, "note": "b"}, 20),
              _event("shop.order_events", "c", None, {**row, "id": 2, "note": "b"}, 30),
              _event("shop.order_events", "d", {**row, "id": 2, "note": "b"}, None, 40)]
    batch = change_batch(events, _columns(catalog, "shop.order_events"), batch_key(table_plan))
    staged = stage_batch(table_plan, batch).to_pydict()
    assert list(zip(staged["ID"], staged["_REPLICATOR_OP"], staged["NOTE"], strict=True)) == [
        (1, "c", "a"), (1, "d", "b")]


def test_plan_prints_the_translated_sql_and_never_the_salt() -> None:
    from replicator.plan import DUCKDB, SNOWFLAKE, render_sql

    table_plan, _ = _transforms()
    for dialect in (DUCKDB, SNOWFLAKE):
        text = render_sql(table_plan, dialect)
        assert "filter: kind <> 'test'" in text
        assert "-> (CAST(\"kind\" AS VARCHAR) <> 'test')" in text
        assert "TOTAL_WITH_TAX = round(net_amount * 1.2, 2)" in text and "round_even" not in text
        assert "salt is a bind parameter" in text
        assert SALT not in text and "pepper" not in text


@pytest.mark.parametrize("source", ["shop.orders", "shop.order_events", "shop.customers"])
def test_a_key_move_stages_the_old_row_as_its_delete_half(source) -> None:
    """The delete half of an update that moves the key is the OLD row, every column (the
    batch's before-image columns), equal to the per-row path's; a filter judges the old row."""
    from replicator.model import change_batch as cb

    plan, catalog = _modes()
    table_plan = plan.table(source)
    columns = _columns(catalog, source)
    texts = [c for c, t in columns if t.name in ("varchar", "text")]
    old = {**{name: None for name, _ in columns}, "id": 1, **{c: f"old {c} 'x' 😀" for c in texts}}
    new = {**old, "id": 9, **{c: f"new {c}" for c in texts}}
    events = [_event(source, "u", old, new, 10)]
    staged = _same(table_plan, catalog, events).to_pydict()
    assert staged["ID"] == [1, 9]
    for column in texts:
        target = column.upper()
        if target in staged and table_plan.mode != "scd2":
            assert staged[target] == [old[column], new[column]], column
    batch = change_batch(events, columns, batch_key(table_plan))
    assert batch.column(cb.before_column(texts[0])).to_pylist() == [old[texts[0]]]

    # The filter judges each half by its own row: the old row failed it, the new one passes.
    filtered = _filtered(table_plan, texts[0]) if table_plan.keeps_every_change else None
    if filtered is not None:
        hidden = {**old, texts[0]: "b"}
        moved = stage_batch(filtered, change_batch(
            [_event(source, "u", hidden, new, 10)], columns, batch_key(table_plan))).to_pydict()
        assert moved["ID"] == [9]  # no delete of a row the target never had


def test_a_batch_landed_with_the_old_key_only_still_splits_key_moves() -> None:
    """Files landed before the whole before-image existed carry
    ``__replicator_before_key__<k>``: the move is still a delete of the old key + an insert."""
    from replicator.model import change_batch as cb

    plan, catalog = _modes()
    table_plan = plan.table("shop.order_events")
    columns = _columns(catalog, "shop.order_events")
    old = {"id": 1, "order_id": 2, "note": "a", "payload": None}
    batch = change_batch([_event("shop.order_events", "u", old, {**old, "id": 5, "note": "b"}, 10)],
                         columns, batch_key(table_plan))
    batch = batch.drop_columns([n for n in batch.column_names if cb.is_before(n)])
    batch = batch.append_column(cb.LEGACY_BEFORE_KEY + "id", pa.array([1], pa.int64()))
    staged = stage_batch(table_plan, batch).to_pydict()
    assert list(zip(staged["ID"], staged["_REPLICATOR_OP"], staged["NOTE"], strict=True)) == [
        (1, "d", "b"), (5, "c", "b")]


def test_a_value_its_target_type_cannot_hold_names_the_table_column_and_row() -> None:
    """The statement fails on a value that does not fit (DECIMAL(12,10)): DuckDB itself finds
    the row (bisection) and the column (one statement per staged column)."""
    import dataclasses

    from replicator.errors import SinkError
    from tests.fixtures.sink_sample import AWKWARD

    items = build_plan(sample_pipeline("snowflake"), CATALOG).table("shop.Order Items")
    narrow = dataclasses.replace(items, columns=tuple(
        dataclasses.replace(c, target_type=dataclasses.replace(c.target_type, precision=12))
        if c.target_column == "AMOUNT" else c for c in items.columns))
    fitting = {**AWKWARD, "amount": Decimal("1.5")}
    rows = [dict(fitting, id=n) for n in range(1, 30)] + [dict(AWKWARD, id=30)]
    events = [_event("shop.Order Items", "c", None, row, 4, n) for n, row in enumerate(rows)]
    batch = change_batch(events, _columns(CATALOG, "shop.Order Items"), batch_key(narrow))
    with pytest.raises(SinkError) as caught:
        stage_batch(narrow, batch)
    assert "shop.Order Items" in caught.value.message and "AMOUNT" in caught.value.message
    assert "fails on the row with id=30" in caught.value.message
    assert "NUMBER" in caught.value.hint
    # Finding the column left no view behind: a statement prepared next (another layout)
    # reads its own batch, not the failing row.
    fitting_batch = batch.slice(0, 29)
    fitting_batch = fitting_batch.set_column(fitting_batch.column_names.index("id"), "id",
                                             fitting_batch.column("id").cast(pa.int16()))
    assert stage_batch(narrow, fitting_batch).column("ID").to_pylist() == list(range(1, 30))


def test_the_staging_statement_is_prepared_once_and_reads_each_batch() -> None:
    """A table's staging statement is prepared once per connection, batch schema and bind
    parameters (binding was all of a small batch's cost): a later batch is read by it (not
    the first batch's rows), an EXECUTE binds nothing again (a registered view would make
    DuckDB bind it each time), a batch of other Arrow types gets a statement of its own, and
    the salt stays a value the statement reads, never its text, one per table."""
    import tempfile

    from replicator.transform import stage

    table_plan, catalog = _transforms()
    peppered = build_plan(*(lambda p: (p, offline_catalog(p)))(load_pipeline(
        ROOT / "pipelines" / "transforms.yaml", environ={"PII_SALT": "other salt"}))
    ).table("crm.customers")
    columns = _columns(catalog, "crm.customers")

    def batch(*ids):
        events = [_event("crm.customers", "c", None, dict(ROW, id=n, email=f"{n}@x"), n) for n in ids]
        return change_batch(events, columns, batch_key(table_plan))

    def emails(salt, *ids):
        return [hashlib.sha256(f"{salt}{n}@x".encode()).hexdigest() for n in ids]

    assert stage_batch(table_plan, batch(1, 2)).column("EMAIL").to_pylist() == emails(SALT, 1, 2)
    connection = stage._connection()
    with tempfile.TemporaryDirectory() as directory:
        profile = Path(directory) / "profile.json"
        connection.execute("PRAGMA enable_profiling = 'json'")
        connection.execute(f"PRAGMA profiling_output = '{profile}'")
        try:
            staged = stage_batch(table_plan, batch(3))
        finally:
            connection.execute("PRAGMA disable_profiling")
        binding = json.loads(profile.read_text())["planner"]["binding_time"]
    assert staged.column("ID").to_pylist() == [3]
    assert staged.column("EMAIL").to_pylist() == emails(SALT, 3)
    assert binding < 0.001, binding  # 3-6 ms when the statement read a registered view
    narrow = batch(4)
    narrow = narrow.set_column(narrow.column_names.index("id"), "id", narrow.column("id").cast(pa.int16()))
    assert stage_batch(table_plan, narrow).column("ID").to_pylist() == [4]
    # Same statement text, another salt: a statement of its own reads it.
    assert stage_batch(peppered, batch(5)).column("EMAIL").to_pylist() == emails("other salt", 5)
    assert stage_batch(table_plan, batch(6)).column("EMAIL").to_pylist() == emails(SALT, 6)
    texts = [row[0] for row in connection.execute("SELECT statement FROM duckdb_prepared_statements()").fetchall()]
    assert texts and not any(SALT in text or "other salt" in text for text in texts)
