"""source_arrow_type / binlog_arrow_type: the change-batch column types keep today's values."""

from __future__ import annotations

import datetime as dt
from decimal import Decimal
from types import SimpleNamespace

import pyarrow as pa
import pytest

from replicator.model import change_batch
from replicator.model.catalog import MySQLType, SourceColumn, SourceTable
from replicator.source.arrow_types import (
    binlog_arrow_type,
    change_batch_schema,
    source_arrow_type,
    time_text,
)
from replicator.source.values import parse_time

UTC = dt.UTC

# MySQL type text -> values as source.values gives them (the binlog and snapshot paths).
CASES = [
    ("tinyint", [-128, 127, None]),
    ("tinyint unsigned", [0, 255]),
    ("smallint unsigned", [65535]),
    ("mediumint", [-8388608, 8388607]),
    ("mediumint unsigned", [16777215]),
    ("int unsigned", [4294967295]),
    ("bigint", [-(2**63), 2**63 - 1]),
    ("bigint unsigned", [0, 2**64 - 1]),
    ("year", [0, 1901, 2155]),
    ("decimal(38,10)", [Decimal("-9999999999999999999999999999.9999999999"), Decimal("5.0000000000")]),
    ("decimal(65,30)", [Decimal("1" * 35 + "." + "2" * 30)]),
    ("decimal(5,2)", [Decimal("5.00"), Decimal("-0.01")]),
    ("float", [1.1, float("inf")]),
    ("double", [0.1, -0.0, 1e308]),
    ("date", [dt.date(1000, 1, 1), dt.date(9999, 12, 31)]),
    ("datetime(6)", [dt.datetime(9999, 12, 31, 23, 59, 59, 999999), dt.datetime(1000, 1, 1)]),
    ("timestamp(6)", [dt.datetime(2038, 1, 19, 3, 14, 7, 999999, tzinfo=UTC)]),
    ("varchar(20)", ["it's \"q\" \\ \n 🎉", ""]),
    ("json", ['{"a": [1, 2.5, null]}']),
    ("enum('a','b')", ["a"]),
    ("set('x','y')", ["x,y", ""]),
    ("bit(64)", [2**64 - 1, 0]),
    ("varbinary(10)", [b"\x00\xff", b""]),
    ("binary(4)", [b"a\x00\x00\x00"]),
    ("longblob", [b"\x00" * 3]),
    ("point", [b"\x01\x02"]),
]


@pytest.mark.parametrize(("text", "values"), CASES, ids=[c[0] for c in CASES])
def test_values_round_trip_with_their_types(text: str, values: list) -> None:
    arrow = source_arrow_type(SourceColumn(name="c", mysql_type=MySQLType.parse(text)))
    back = pa.array(values, type=arrow).to_pylist()
    assert back == values
    assert [type(v) for v in back] == [type(v) for v in values]
    # Decimal keeps its exponent (the column's scale), as today's decoders give it.
    assert [str(v) for v in back] == [str(v) for v in values]


def test_time_is_mysql_text_and_parses_back() -> None:
    assert source_arrow_type(MySQLType.parse("time(6)")) == pa.string()
    for value, fsp, text in [
        (-dt.timedelta(hours=838, minutes=59, seconds=59), 0, "-838:59:59"),
        (dt.timedelta(hours=838, minutes=59, seconds=59), 0, "838:59:59"),
        (-dt.timedelta(hours=838, minutes=59, seconds=59, microseconds=1), 6, "-838:59:59.000001"),
        (dt.timedelta(hours=12, microseconds=500000), 6, "12:00:00.500000"),
        (dt.timedelta(0), 3, "00:00:00.000"),
    ]:
        assert time_text(value, fsp) == text
        assert parse_time(text) == value


def _column(kind: int, **fields: object) -> SimpleNamespace:
    base = {"unsigned": False, "character_set_name": None, "precision": 0, "decimals": 0}
    return SimpleNamespace(type=kind, **{**base, **fields})


def test_binlog_types_agree_with_the_catalog() -> None:
    pairs = [
        (_column(1), "tinyint"), (_column(1, unsigned=True), "tinyint unsigned"),
        (_column(9), "mediumint"), (_column(9, unsigned=True), "mediumint unsigned"),
        (_column(3), "int"), (_column(8, unsigned=True), "bigint unsigned"),
        (_column(13), "year"), (_column(246, precision=65, decimals=30), "decimal(65,30)"),
        (_column(246, precision=10, decimals=2), "decimal(10,2)"),
        (_column(4), "float"), (_column(5), "double"), (_column(10), "date"),
        (_column(18), "datetime(6)"), (_column(17), "timestamp(3)"), (_column(19), "time(6)"),
        (_column(15, character_set_name="utf8mb4"), "varchar(10)"),
        (_column(15, character_set_name="binary"), "varbinary(10)"),
        (_column(254, character_set_name="binary"), "binary(4)"),
        (_column(252, character_set_name="utf8mb4"), "text"),
        (_column(252, character_set_name="binary"), "blob"),
        (_column(247), "enum('a')"), (_column(248), "set('a')"), (_column(16), "bit(3)"),
        (_column(245), "json"), (_column(255), "geometry"),
    ]
    for binlog_column, text in pairs:
        assert binlog_arrow_type(binlog_column) == source_arrow_type(MySQLType.parse(text)), text


def test_change_batch_schema_has_internal_and_before_image_columns() -> None:
    table = SourceTable("shop", "t", (
        SourceColumn("id", MySQLType.parse("bigint unsigned")),
        SourceColumn("v", MySQLType.parse("varchar(5)")),
    ), primary_key=("id",))
    schema = change_batch_schema(table)
    assert schema.names == ["id", "v", *change_batch.INTERNAL_COLUMNS,
                            change_batch.before_column("id"), change_batch.before_column("v")]
    assert schema.field(change_batch.before_column("id")).type == pa.uint64()
    assert schema.field(change_batch.before_column("v")).type == pa.string()
    assert change_batch_schema(table, before=False).names == [
        "id", "v", *change_batch.INTERNAL_COLUMNS]
    assert schema.field(change_batch.FILE_SEQ).type == pa.int64()


@pytest.mark.parametrize("text", [
    *(case[0] for case in CASES), "bigint unsigned", "bit(64)", "year", "decimal(65,30)",
    "datetime(6)", "timestamp(3)", "time(6)", "enum('a')", "set('a','b')", "json", "blob",
    "varbinary(4)", "binary(4)", "geometry", "point", "char(5)", "text", "uuid", "inet6",
])
def test_the_kind_without_pyarrow_is_the_kind_of_the_arrow_type(text: str) -> None:
    # `plan --offline` renders the warehouse's staging statement from source_kind_name; the
    # run renders it from the chunk files' Arrow types: the two must give the same SQL.
    from replicator.source.arrow_types import source_kind_name
    from replicator.transform.columns import source_kind

    mysql_type = MySQLType.parse(text)
    assert source_kind_name(mysql_type) == source_kind(source_arrow_type(mysql_type)), text
