"""One canonical form per value, so a source row and its target row compare equal.

The source side goes through exactly what replication does to a value: the source rows read
are put into a change batch (reads) and staged by the transform step's own DuckDB SQL
(``transform.stage.judge_rows``: the filter, computed columns, type conversion, masks, DECIMAL
scale, BIT width, TIMESTAMP to UTC, TIME as text), so verify can never expect other values
than replication writes. The target side is what the warehouse driver hands back. ``canonical`` then removes what only differs in how a driver
spells a value (Decimal exponent, aware vs naive UTC, bytearray vs bytes, JSON whitespace and
key order, NUMBER returned as Decimal for an integer column), never what differs in content.
"""

from __future__ import annotations

import datetime as dt
import json
import math
import struct
from collections.abc import Callable, Sequence
from decimal import Decimal, InvalidOperation
from typing import Any

from replicator.model.catalog import MySQLType
from replicator.model.changes import BinlogPosition, ChangeEvent
from replicator.model.pipeline import SOURCE_TABLE_COLUMN
from replicator.plan.model import PlannedColumn, TablePlan
from replicator.transform.batch import change_batch
from replicator.transform.stage import JUDGED_PASS, judge_rows
from replicator.verify.checksum import (
    FLOAT_DIGITS,
    FLOAT_MAX,
    FLOAT_MIN_NORMAL,
    FLOAT_SUBNORMAL_STEP,
)

UTC = dt.UTC

# Target kinds whose staging conversion keeps the MySQL order of values, so a key range
# cut on the source selects the same rows on the target. Strings are not among them:
# MySQL's collations (case-insensitive, PAD SPACE) order them unlike the warehouse.
ORDER_KEEPING_KINDS = frozenset({"integer", "decimal", "date", "timestamp", "timestamp_tz"})
ORDER_KEEPING_MYSQL = frozenset(
    {"tinyint", "smallint", "mediumint", "int", "bigint", "decimal", "year", "date",
     "datetime", "timestamp"}
)


def _as_datetime(value: Any) -> dt.datetime:
    if isinstance(value, str):
        return dt.datetime.fromisoformat(value)
    if isinstance(value, dt.datetime):
        return value
    return dt.datetime(value.year, value.month, value.day)


def _json_canonical(value: Any) -> str:
    text = value if isinstance(value, str) else bytes(value).decode("utf-8") if isinstance(
        value, (bytes, bytearray, memoryview)) else json.dumps(value)
    try:
        parsed = json.loads(text)
    except ValueError:
        return text
    return json.dumps(parsed, sort_keys=True, separators=(",", ":"), ensure_ascii=False)


def canonical_function(column: PlannedColumn) -> Callable[[Any], Any]:
    """The canonical form of one column's values (None-safe), chosen once per column."""
    if column.mask and column.mask != "truncate":  # truncate keeps the column's type
        return lambda v: None if v is None else str(v)  # hex digest or '***' on both sides
    kind = column.target_type.kind
    if kind == "integer":
        return lambda v: v if v is None or type(v) is int else int(v)
    if kind == "decimal":
        quantum = Decimal(1).scaleb(-(column.target_type.scale or 0))

        def decimal(v: Any) -> Any:
            if v is None:
                return None
            number = v if isinstance(v, Decimal) else Decimal(str(v))
            try:
                return number.quantize(quantum)
            except InvalidOperation:
                return number

        return decimal
    if kind == "float" and column.mysql_type is not None and column.mysql_type.name == "float":
        return _float_digits
    if kind == "float":
        return lambda v: None if v is None else float(v)
    if kind == "boolean":
        return lambda v: None if v is None else bool(v)
    if kind == "date":
        def date(v: Any) -> Any:
            if v is None:
                return None
            if isinstance(v, str):
                return dt.date.fromisoformat(v[:10])
            return v.date() if isinstance(v, dt.datetime) else v

        return date
    if kind == "timestamp":
        def naive(v: Any) -> Any:
            if v is None:
                return None
            v = _as_datetime(v)
            return v.astimezone(UTC).replace(tzinfo=None) if v.tzinfo else v

        return naive
    if kind == "timestamp_tz":
        def instant(v: Any) -> Any:
            if v is None:
                return None
            v = _as_datetime(v)
            # fakesnow's TIMESTAMP_TZ drops the offset (DESIGN.md); replicator writes UTC.
            return v.replace(tzinfo=UTC) if v.tzinfo is None else v.astimezone(UTC)

        return instant
    if kind == "binary":
        return lambda v: None if v is None else (
            v.encode("utf-8") if isinstance(v, str) else bytes(v))
    if kind == "json":
        return lambda v: None if v is None else _json_canonical(v)
    return lambda v: v if v is None or type(v) is str else str(v)  # string, time_text


def canonical(column: PlannedColumn, value: Any) -> Any:
    """A staged value (source side) or a fetched value (target side) in the compared form."""
    return canonical_function(column)(value)


# A change batch wants a binlog position; a source row read by verify has none.
_NOWHERE = BinlogPosition("verify.000000", 0)


def source_row_forms(
    table: TablePlan, columns: Sequence[PlannedColumn], images: Sequence[dict[str, Any]],
    source_columns: Sequence[tuple[str, MySQLType | None]], *, source_name: str | None = None,
) -> list[tuple[tuple[Any, ...], bool]]:
    """Source images (dicts by source column, ``source_columns``: their names and types) ->
    per image, the canonical values of ``columns`` as replication stages them, and whether
    the row passes the table's filter (a row that does not is kept out of the target).
    ``source_name``: the source table (``db.table``) the rows come from (a routed target's
    _SOURCE_TABLE)."""
    if not images:
        return []
    name = source_name or table.source_name
    events = [ChangeEvent(table=name, op="r", position=_NOWHERE, row_index=index, ts_ms=0,
                          after=image) for index, image in enumerate(images)]
    present = [(n, t) for n, t in source_columns if n != SOURCE_TABLE_COLUMN]
    judged = judge_rows(table, change_batch(events, present, ()), columns)
    values = [judged.column(c.staging_name).to_pylist() for c in columns]
    functions = [canonical_function(c) for c in columns]
    passes = judged.column(JUDGED_PASS).to_pylist()
    return [(tuple(same(column[index]) for same, column in zip(functions, values, strict=True)),
             bool(passes[index])) for index in range(len(images))]


def target_row_form(columns: Sequence[PlannedColumn]) -> Callable[[Sequence[Any]], tuple[Any, ...]]:
    """A fetched target row (values in ``columns`` order) -> canonical values."""

    functions = [canonical_function(c) for c in columns]

    def form(row: Sequence[Any]) -> tuple[Any, ...]:
        return tuple(same(v) for same, v in zip(functions, row, strict=True))

    return form


def keeps_key_order(key_columns: Sequence[PlannedColumn]) -> bool:
    """Can a key range cut on the source be applied as is to the target?"""
    return all(
        not c.mask and c.target_type.kind in ORDER_KEEPING_KINDS and c.mysql_type is not None
        and c.mysql_type.name in ORDER_KEEPING_MYSQL
        for c in key_columns
    )


def source_parameter(value: Any) -> Any:
    """A canonical key value as a MySQL bind parameter (the session runs in UTC)."""
    if isinstance(value, dt.datetime) and value.tzinfo is not None:
        return value.astimezone(UTC).replace(tzinfo=None)
    if isinstance(value, bool):
        return int(value)
    if isinstance(value, Decimal) and value == value.to_integral_value():
        return int(value)
    return value


def jsonable(value: Any) -> Any:
    """A canonical value for the JSON report (and the text report's repr)."""
    if value is None or isinstance(value, (bool, int, float, str)):
        return value
    if isinstance(value, Decimal):
        return format(value, "f")
    if isinstance(value, (dt.datetime, dt.date)):
        return value.isoformat()
    if isinstance(value, (bytes, bytearray, memoryview)):
        return "0x" + bytes(value).hex()
    return str(value)


def _float_digits(v: Any) -> float | None:
    """A FLOAT as the checksum compares it (``checksum.float_text``): FLT_DIG digits of the
    float32 the value stands for (a target holds its shortest decimal, which can be a tie
    at 7 digits the float32 is not), or on the subnormal grid below the smallest normal
    float32."""
    if v is None:
        return None
    value = float(v)
    if abs(value) <= FLOAT_MAX:  # beyond, no float32 (a value written outside replication)
        value = struct.unpack("f", struct.pack("f", value))[0]
    if 0 < abs(value) < FLOAT_MIN_NORMAL:
        return math.copysign(round(abs(value) / FLOAT_SUBNORMAL_STEP) * FLOAT_SUBNORMAL_STEP, value)
    return float(f"{value:.{FLOAT_DIGITS}g}")
