"""One canonical form per value, so a source row and its target row compare equal.

The source side goes through exactly what replication does to a value: the staging
converter of its planned column (``sink.values.value_converter``: mask, type conversion,
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


def canonical(column: PlannedColumn, value: Any) -> Any:
    """A staged value (source side) or a fetched value (target side) in the compared form."""
    if value is None:
        return None
    if column.mask:
        return str(value)  # hex digest or '***' on both sides
    kind = column.target_type.kind
    if kind == "integer":
        return int(value)
    if kind == "decimal":
        number = value if isinstance(value, Decimal) else Decimal(str(value))
        try:
            return number.quantize(Decimal(1).scaleb(-(column.target_type.scale or 0)))
        except InvalidOperation:
            return number
    if kind == "float":
        return float(value)
    if kind == "boolean":
        return bool(value)
    if kind == "date":
        if isinstance(value, str):
            return dt.date.fromisoformat(value[:10])
        return value.date() if isinstance(value, dt.datetime) else value
    if kind == "timestamp":
        value = _as_datetime(value)
        return value.astimezone(UTC).replace(tzinfo=None) if value.tzinfo else value
    if kind == "timestamp_tz":
        value = _as_datetime(value)
        # fakesnow's TIMESTAMP_TZ drops the offset (DESIGN.md); replicator writes UTC.
        return value.replace(tzinfo=UTC) if value.tzinfo is None else value.astimezone(UTC)
    if kind == "binary":
        return value.encode("utf-8") if isinstance(value, str) else bytes(value)
    if kind == "json":
        return _json_canonical(value)
    return str(value)  # string, time_text


RowForm = Callable[[dict[str, Any]], tuple[Any, ...]]


def source_row_form(columns: Sequence[PlannedColumn]) -> RowForm:
    """Source image (dict by source column) -> canonical values of ``columns``, as staged."""
    steps = [(c.source_column or "", value_converter(c), c) for c in columns]

    def form(image: dict[str, Any]) -> tuple[Any, ...]:
        return tuple(canonical(c, convert(image.get(name))) for name, convert, c in steps)

    return form


def target_row_form(columns: Sequence[PlannedColumn]) -> Callable[[Sequence[Any]], tuple[Any, ...]]:
    """A fetched target row (values in ``columns`` order) -> canonical values."""

    def form(row: Sequence[Any]) -> tuple[Any, ...]:
        return tuple(canonical(c, v) for c, v in zip(columns, row, strict=True))

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
