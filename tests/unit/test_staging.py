"""transform.stage_batch (through ``stage_events``): exact Arrow types, masks, filter-to-delete,
metadata, key-update split."""

from __future__ import annotations

import dataclasses
import datetime as dt
import hashlib
from decimal import Decimal

import pyarrow as pa
import pytest

from replicator.model.changes import BinlogPosition, ChangeEvent
from replicator.model.text import time_text as mysql_time_text
from replicator.plan import build_plan
from replicator.plan.expressions.checker import check_filter
from replicator.plan.expressions.errors import ExpressionError
from replicator.plan.expressions.spark_types import DATE, INT, STRING, TIMESTAMP, decimal
from tests.fixtures.row_transforms import duckdb_values, stage_events, staged_value_of
from tests.fixtures.sink_sample import AWKWARD, CATALOG, NULLS, sample_pipeline

PLAN = build_plan(sample_pipeline("snowflake"), CATALOG)
ITEMS = PLAN.table("shop.Order Items")
REGIONS = PLAN.table("shop.regions")


def event(op, before=None, after=None, pos=4, row_index=0, table="shop.Order Items"):
    return ChangeEvent(table, op, BinlogPosition("mysql-bin.000002", pos), row_index,
                       1_700_000_000_500, before=before, after=after, transaction_id="0-1-9")


def test_arrow_types_match_the_target_types_exactly():
    staged = stage_events(ITEMS, [event("c", after=AWKWARD)])
    types = {f.name: f.type for f in staged.schema}
    by_target = {c.target_column: c.staging_name for c in ITEMS.staged_columns}
    assert types[by_target["ID"]] == pa.decimal128(20, 0)
    assert types[by_target["AMOUNT"]] == pa.decimal128(38, 10)
    assert types[by_target["CREATED"]] == pa.timestamp("us")
    assert types[by_target["UPDATED_AT"]] == pa.timestamp("us", tz="UTC")
    assert types[by_target["PAYLOAD"]] == pa.binary()
    assert types[by_target["FLAG"]] == pa.bool_()
    assert types[by_target["BIG_NEG"]] == pa.int64()
    assert types[by_target["SMALL"]] == pa.int16()
    assert types[by_target["RATIO PCT"]] == pa.float64()
    assert types[by_target["DOC"]] == pa.string()
    assert staged.column_names[-3:] == ["_REPLICATOR_OP", "_REPLICATOR_SEQ", "_REPLICATOR_TS"]
    row = staged.to_pylist()[0]
    assert row[by_target["ID"]] == Decimal(1)
    assert row[by_target["AMOUNT"]] == AWKWARD["amount"]
    assert row[by_target["DUR"]] == "-01:00:00.000500"
    assert row[by_target["BITS"]] == b"\x02\x01"
    assert row[by_target["SECRET"]] == hashlib.sha256(b"hunter2").hexdigest()
    assert row[by_target["MIXED CASE"]] == "None"
    assert row["_TRANSACTION_ID"] == "0-1-9" and row["_BINLOG_POS"] == 4
    assert row["_REPLICATOR_TS"] == dt.datetime(2023, 11, 14, 22, 13, 20, 500000, tzinfo=dt.UTC)


def test_nulls_stay_null():
    staged = stage_events(ITEMS, [event("c", after=NULLS)])
    row = staged.to_pylist()[0]
    data = [c.staging_name for c in ITEMS.data_columns if c.target_column != "ID"]
    assert all(row[name] is None for name in data)


def test_key_update_is_staged_as_delete_plus_insert():
    old, new = {**NULLS, "id": 5}, {**NULLS, "id": 6}
    staged = stage_events(ITEMS, [event("u", before=old, after=new)])
    rows = staged.to_pylist()
    assert [(r["_REPLICATOR_OP"], r["ID"]) for r in rows] == [("d", 5), ("c", 6)]


def test_a_row_failing_the_filter_becomes_a_delete_of_its_key():
    row = {"region": "EU", "id": 1, "name": "x", "qty": -3}
    staged = stage_events(REGIONS, [event("u", before={**row, "qty": 1}, after=row,
                                             table="shop.regions")])
    assert staged.column("_REPLICATOR_OP").to_pylist() == ["d"]
    assert staged.column("_OP").to_pylist() == ["d"]


def test_excluded_columns_never_reach_staging():
    staged = stage_events(ITEMS, [event("c", after=AWKWARD)])
    assert "never replicated" not in str(staged.to_pylist())


@pytest.mark.parametrize(
    ("mask", "value", "expected"),
    [
        ("sha256", "é", hashlib.sha256("é".encode()).hexdigest()),
        ("md5", b"\x00\xff", hashlib.md5(b"\x00\xff").hexdigest()),
        ("sha256", 42, hashlib.sha256(b"42").hexdigest()),
        ("redact", "secret", "***"),
        ("null", "secret", None),
    ],
)
def test_masks(mask, value, expected):
    from replicator.plan.model import PlannedColumn
    from replicator.plan.types import STRING as TARGET_STRING

    column = PlannedColumn("C", TARGET_STRING, source_column="c", mask=mask)
    assert staged_value_of(column, value) == expected


@pytest.mark.parametrize(
    ("value", "fsp", "text"),
    [
        (dt.timedelta(hours=-838, minutes=-59, seconds=-59), 0, "-838:59:59"),
        (dt.timedelta(hours=838, minutes=59, seconds=59), 0, "838:59:59"),
        (dt.timedelta(hours=25, microseconds=1), 6, "25:00:00.000001"),
        (dt.timedelta(seconds=1.5), 1, "00:00:01.5"),
        (-dt.timedelta(microseconds=1), 6, "-00:00:00.000001"),
    ],
)
def test_mysql_time_text(value, fsp, text):
    assert mysql_time_text(value, fsp) == text


def test_decimal_that_does_not_fit_is_a_sink_error_with_a_hint():
    from replicator.errors import SinkError

    narrow = dataclasses.replace(
        ITEMS,
        columns=tuple(
            dataclasses.replace(c, target_type=dataclasses.replace(c.target_type, precision=5))
            if c.target_column == "AMOUNT" else c
            for c in ITEMS.columns
        ),
    )
    with pytest.raises(SinkError) as caught:
        stage_events(narrow, [event("c", after=AWKWARD)])
    assert "NUMBER" in caught.value.hint


FILTER_COLUMNS = {"qty": INT, "name": STRING, "created": TIMESTAMP, "price": decimal(10, 2),
                  "born": DATE}


@pytest.mark.parametrize(
    ("predicate", "row", "passes"),
    [
        ("qty >= 0", {"qty": None}, False),  # NULL is not TRUE
        ("qty IS NULL OR qty >= 0", {"qty": None}, True),
        ("name = 'ABC'", {"name": "abc"}, False),  # Spark SQL: case-sensitive
        ("lower(name) = 'abc'", {"name": "ABC"}, True),
        ("name LIKE 'a\\_%'", {"name": "a_b"}, True),
        ("name LIKE 'a\\_%'", {"name": "ab"}, False),
        ("name LIKE 'ab'", {"name": "ab\n"}, False),  # the whole value, newline included
        ("name LIKE 'a%'", {"name": "a\nb"}, True),
        ("qty BETWEEN 1 AND 3", {"qty": 3}, True),
        ("qty NOT IN (1, 2)", {"qty": 3}, True),
        ("qty NOT IN (1, NULL)", {"qty": 3}, False),  # unknown
        ("created >= '2024-01-01'", {"created": dt.datetime(2024, 1, 1, 0, 0, 1)}, True),
        ("price * 2 > 10.5", {"price": Decimal("5.26")}, True),
        ("NOT (qty > 1) AND name <> 'x'", {"qty": 0, "name": "y"}, True),
        ("COALESCE(qty, 0) = 0", {"qty": None}, True),
        ("born < '2000-01-01'", {"born": dt.date(1999, 12, 31)}, True),
    ],
)
def test_filter_semantics(predicate, row, passes):
    assert check_filter(predicate, FILTER_COLUMNS).kind == "boolean"
    inputs = {name: t for name, t in FILTER_COLUMNS.items() if name in row}
    assert (duckdb_values(predicate, inputs, [row])[0] is True) is passes


@pytest.mark.parametrize("old", ["qty > 1 XOR name = 'x'", "name = 'a' || qty = 1"])
def test_an_old_mysql_filter_gets_a_hint_that_filters_are_spark_sql(old):
    with pytest.raises(ExpressionError) as caught:
        check_filter(old, FILTER_COLUMNS)
    assert "Spark SQL" in caught.value.message + caught.value.hint
