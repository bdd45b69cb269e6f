"""One canonical form per value, so a source row and its target row compare equal.

The source side goes through exactly what replication does to a value: a computed
column's expression (``sink.computed``), then the staging converter of its planned column (``sink.values.value_converter``: mask, type conversion,
DECIMAL scale, BIT width, TIMESTAMP to UTC, TIME as text). The target side is what the
warehouse driver hands back. ``canonical`` then removes what only differs in how a driver
spells a value (Decimal exponent, aware vs naive UTC, bytearray vs bytes, JSON whitespace and
key order, NUMBER returned as Decimal for an integer column), never what differs in content.
"""

from __future__ import annotations

import datetime as dt
import json
from collections.abc import Callable, Sequence
from decimal import Decimal, InvalidOperation
from typing import Any

from replicator.plan.model import PlannedColumn
from replicator.sink.values import value_converter

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


RowForm = Callable[[dict[str, Any]], tuple[Any, ...]]


def source_row_form(columns: Sequence[PlannedColumn]) -> RowForm:
    """Source image (dict by source column) -> canonical values of ``columns``, as staged."""
    steps = [(_value_of(c), value_converter(c), canonical_function(c)) for c in columns]

    def form(image: dict[str, Any]) -> tuple[Any, ...]:
        return tuple(same(convert(value(image))) for value, convert, same in steps)

    return form


def _value_of(column: PlannedColumn) -> Callable[[dict[str, Any]], Any]:
    """A column's source-side value in a MySQL row: the source column's, or the computed
    column's expression over the row (``sink.computed``, as replication computes it)."""
    if column.expression is not None:
        from replicator.sink.computed import expression_function

        return expression_function(column)
    name = column.source_column or ""
    return lambda image: image.get(name)


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
