"""Source vs target, row by row, all columns, through the type mapping.

Both sides are read independently of the pipeline (plain PyMySQL on the source, the target's
own DB-API connection) and every value is brought to one canonical form by the column's
*target* kind (``plan.types``): DECIMAL as ``Decimal``, TIMESTAMP as a UTC instant, TIME as
MySQL's text, BIT(1)/TINYINT(1) as bool, JSON as parsed JSON, bytes as bytes. Masked
columns are not compared (the target holds a hash by design); metadata columns neither.
"""

from __future__ import annotations

import datetime as dt
import json
from dataclasses import dataclass, field
from decimal import Decimal
from typing import TYPE_CHECKING, Any

from replicator.plan.identifiers import qualified_name, quote_identifier
from replicator.source.arrow_types import time_text

if TYPE_CHECKING:
    from replicator.plan.model import PlannedColumn, TablePlan

_ZERO_DATES = ("0000-00-00", "0000-00-00 00:00:00")


def _bits_int(value: Any) -> int:
    return int.from_bytes(value, "big") if isinstance(value, (bytes, bytearray)) else int(value)


def canonical(value: Any, column: PlannedColumn) -> Any:
    """One value from either side, in the form both sides must agree on."""
    if value is None or (isinstance(value, str) and value in _ZERO_DATES
                         and column.target_type.kind in ("date", "timestamp", "timestamp_tz")):
        return None
    kind = column.target_type.kind
    mysql = column.mysql_type.name if column.mysql_type else ""
    if kind == "integer":
        return _bits_int(value)
    if kind == "decimal" or mysql == "decimal":
        return Decimal(str(value)) if not isinstance(value, Decimal) else value
    if kind == "float":
        return float(f"{float(value):.6g}")  # MySQL FLOAT is 4 bytes: 6 significant digits
    if kind == "boolean":
        return bool(_bits_int(value)) if not isinstance(value, bool) else value
    if kind == "time_text":
        if isinstance(value, dt.timedelta):
            return time_text(value, column.target_type.fsp or 0)
        return str(value)
    if kind == "timestamp_tz":
        if isinstance(value, dt.datetime) and value.tzinfo is not None:
            value = value.astimezone(dt.UTC).replace(tzinfo=None)
        return value
    if kind == "json":
        return json.dumps(json.loads(value), sort_keys=True)
    if kind == "binary":
        if mysql == "bit" and not isinstance(value, (bytes, bytearray)):
            width = ((column.mysql_type.length or 1) + 7) // 8 if column.mysql_type else 1
            return int(value).to_bytes(width, "big")
        return bytes(value)
    if mysql == "set" and isinstance(value, (set, frozenset)):
        members = column.mysql_type.values if column.mysql_type else tuple(sorted(value))
        return ",".join(m for m in members if m in value)
    return value


@dataclass
class TableComparison:
    table: str
    source_rows: int = 0
    target_rows: int = 0
    missing: list[Any] = field(default_factory=list)  # keys in the source only
    extra: list[Any] = field(default_factory=list)  # keys in the target only
    different: list[tuple[Any, str, Any, Any]] = field(default_factory=list)  # key, column, src, tgt
    duplicates: list[Any] = field(default_factory=list)  # keys the target holds more than once

    @property
    def equal(self) -> bool:
        return not (self.missing or self.extra or self.different or self.duplicates)

    def describe(self, limit: int = 5) -> str:
        if self.equal:
            return f"{self.table}: {self.source_rows} rows, identical"
        parts = [f"{self.table}: source {self.source_rows} rows, target {self.target_rows}"]
        if self.missing:
            parts.append(f"missing in target: {self.missing[:limit]}")
        if self.extra:
            parts.append(f"extra in target: {self.extra[:limit]}")
        if self.duplicates:
            parts.append(f"keys more than once in target: {self.duplicates[:limit]}")
        for key, column, source, target in self.different[:limit]:
            parts.append(f"key {key} column {column}: source {source!r} != target {target!r}")
        return "\n  ".join(parts)


def _compared_columns(table: TablePlan) -> list[PlannedColumn]:
    return [c for c in table.data_columns if c.source_column and not c.mask]


def _backticked(name: str) -> str:
    return "`" + name.replace("`", "``") + "`"


def read_source_rows(source_connection: Any, table: TablePlan) -> list[tuple[Any, ...]]:
    """Rows of the compared columns from MySQL (a PyMySQL connection), UTC for TIMESTAMP."""
    columns = _compared_columns(table)
    names = ", ".join(_backticked(str(c.source_column)) for c in columns)
    name = f"{_backticked(table.source_database)}.{_backticked(table.source_table)}"
    with source_connection.cursor() as cursor:
        cursor.execute("SET time_zone = '+00:00'")
        cursor.execute(f"SELECT {names} FROM {name}")
        return list(cursor.fetchall())


def read_target_rows(target_connection: Any, table: TablePlan) -> list[tuple[Any, ...]]:
    """Rows of the compared columns from the warehouse (any DB-API connection)."""
    columns = _compared_columns(table)
    names = ", ".join(quote_identifier(c.target_column) for c in columns)
    where = ""
    if table.deletes == "soft":
        where = f" WHERE NOT COALESCE({quote_identifier('_DELETED')}, FALSE)"
    cursor = target_connection.cursor()
    try:
        cursor.execute(f"SELECT {names} FROM {qualified_name(table.target_parts)}{where}")
        return list(cursor.fetchall())
    finally:
        cursor.close()


def compare_table(source_connection: Any, target_connection: Any, table: TablePlan) -> TableComparison:
    columns = _compared_columns(table)
    key_positions = [i for i, c in enumerate(columns) if c.source_column in table.source_key]

    def keyed(rows: list[tuple[Any, ...]], seen_twice: list[Any]) -> dict[tuple[Any, ...], tuple[Any, ...]]:
        result: dict[tuple[Any, ...], tuple[Any, ...]] = {}
        for row in rows:
            values = tuple(canonical(v, c) for v, c in zip(row, columns, strict=True))
            key = tuple(values[i] for i in key_positions)
            if key in result:
                seen_twice.append(key)  # a dict would hide it
            result[key] = values
        return result

    source_rows = read_source_rows(source_connection, table)
    target_rows = read_target_rows(target_connection, table)
    comparison = TableComparison(table.source_name, len(source_rows), len(target_rows))
    source = keyed(source_rows, [])
    target = keyed(target_rows, comparison.duplicates)
    comparison.missing = sorted(set(source) - set(target), key=repr)
    comparison.extra = sorted(set(target) - set(source), key=repr)
    for key in sorted(set(source) & set(target), key=repr):
        for column, a, b in zip(columns, source[key], target[key], strict=True):
            if a != b:
                comparison.different.append((key, column.target_column, a, b))
    return comparison
