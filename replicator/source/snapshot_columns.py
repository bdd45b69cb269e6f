"""How each column of a snapshot chunk is SELECTed, and how its Arrow column is finished.

The snapshot reads chunks with connectorx (Rust, straight into Arrow; see ``source.snapshot``
for why). connectorx types most columns exactly, but it cannot hold every MySQL value: it
panics on negative or > 24 h TIME, on zero dates, and on DECIMALs past 28 digits
(rust_decimal), and it gives DECIMAL(p,s) as decimal128(38,10) (rounding a scale past 10).
So those columns are SELECTed as the server's own text (``CAST(col AS CHAR)``, in a session
with ``time_zone = '+00:00'``) and typed here with Arrow's vectorized casts; BIT is selected
as an unsigned integer. Every column ends in ``arrow_types.source_arrow_type`` of its catalog
column, the type the binlog decoder gives it, so a row has equal values whichever path read it.

The PyMySQL fallback (TLS sources, which connectorx's URL cannot verify as we do) hands in
every column as text or bytes; ``finish_column`` casts those the same way.
"""

from __future__ import annotations

import datetime as dt
from decimal import Decimal
from typing import TYPE_CHECKING, Any

from replicator.model.catalog import SourceColumn
from replicator.source.arrow_types import source_arrow_type, time_text
from replicator.source.values import ZeroDates, float32_column, json_text

if TYPE_CHECKING:
    import pyarrow as pa

# Selected as the server's text: what connectorx cannot hold exactly (module docstring).
_AS_TEXT = frozenset({"decimal", "numeric", "dec", "fixed", "date", "datetime",
                      "timestamp", "time", "uuid", "inet4", "inet6"})
# Selected as a DOUBLE, exactly (source.values: the server's text of a FLOAT has 6 digits).
_FLOAT = frozenset({"float", "real"})
_TEMPORAL = frozenset({"date", "datetime", "timestamp"})
# A zero date is any date part with a zero field ('0000-00-00', '2024-00-05'): no warehouse
# stores it (same rule as source.values._is_zero_date).
_ZERO_DATE = r"^(0000-|\d{4}-00-|\d{4}-\d{2}-00)"


def quote_mysql_identifier(name: str) -> str:
    """MySQL identifier quoting (backticks): the one place names enter MySQL SQL text; the
    warehouse side quotes with ``plan.identifiers.quote_identifier``."""
    return "`" + name.replace("`", "``") + "`"


def select_expression(column: SourceColumn) -> str:
    """The SELECT-list item for a column, aliased to the column's own name."""
    name = column.mysql_type.name
    quoted = quote_mysql_identifier(column.name)
    if name == "bit":
        return f"CAST({quoted} AS UNSIGNED) AS {quoted}"
    if name in _AS_TEXT:
        return f"CAST({quoted} AS CHAR) AS {quoted}"
    if name in _FLOAT:
        return f"CAST({quoted} AS DOUBLE) AS {quoted}"
    return quoted


def finish_column(array: pa.Array | pa.ChunkedArray, column: SourceColumn, *, table: str,
                  zero_dates: ZeroDates, mariadb: bool) -> pa.Array | pa.ChunkedArray:
    """The change-batch column of ``column`` from what the driver returned for it."""
    import pyarrow as pa
    import pyarrow.compute as pc

    target = source_arrow_type(column)
    name = column.mysql_type.name
    if name in _TEMPORAL:
        array = _null_zero_dates(array, column, table=table, zero_dates=zero_dates)
        if name == "date":
            return pc.cast(array, target)
        naive = pc.cast(array, pa.timestamp("us"))
        return pc.cast(naive, target)  # TIMESTAMP: read in a '+00:00' session, so it is UTC
    if name == "json" and not mariadb and len(array):
        # MySQL's binary JSON: the binlog path re-spells it (source.values.json_text); so
        # does this, value by value. MariaDB's JSON is text stored as written (no-op).
        import json

        return pa.array([None if v is None else json_text(json.loads(v))
                         for v in array.to_pylist()], target)
    if name in _FLOAT:
        return float32_column(pc.cast(array, pa.float64()))
    if pa.types.is_binary(target):
        if pa.types.is_string(array.type) or pa.types.is_large_string(array.type):
            # a BINARY column as text (only if a driver decoded it): the bytes as sent
            return pa.array([None if v is None else v.encode("utf-8", "surrogateescape")
                             for v in array.to_pylist()], target)
        return pc.cast(array, target)
    # TIME stays the server's text (CAST(TIME(fsp) AS CHAR) spells it as time_text does)
    return pc.cast(array, target)


def _null_zero_dates(array: Any, column: SourceColumn, *, table: str,
                     zero_dates: ZeroDates) -> Any:
    import pyarrow.compute as pc

    zero = pc.match_substring_regex(array, _ZERO_DATE)
    count = pc.sum(zero).as_py() or 0
    if not count:
        return array
    first = array.filter(zero)[0].as_py()
    zero_dates(table, column.name, first)  # raises under zero_dates: error
    zero_dates.stats.zero_dates += count - 1  # the call above counted one
    return pc.if_else(zero, None, array)


def sql_literal(value: Any) -> str:
    """A chunk bound as a SQL literal, for the connectorx reader, which takes no bind
    parameters. Built from the TYPED value, never from text: numbers by ``int``/``Decimal``
    formatting, dates by ``isoformat`` (digits and separators only), strings and bytes as hex
    (``_utf8mb4 X'...'`` compares under the column's collation; hex needs no escaping, so no
    sql_mode such as NO_BACKSLASH_ESCAPES changes its meaning)."""
    if isinstance(value, bool):
        return str(int(value))
    if isinstance(value, int):
        return str(int(value))
    if isinstance(value, Decimal):
        if not value.is_finite():
            raise ValueError(f"not a MySQL value: {value!r}")
        return format(value, "f")
    if isinstance(value, float):
        return repr(float(value))
    if isinstance(value, dt.datetime):
        return "'" + value.replace(tzinfo=None).isoformat(sep=" ") + "'"
    if isinstance(value, dt.date):
        return "'" + value.isoformat() + "'"
    if isinstance(value, dt.timedelta):
        return "'" + time_text(value, 6) + "'"
    if isinstance(value, str):
        return "_utf8mb4 X'" + value.encode("utf-8").hex() + "'"
    if isinstance(value, (bytes, bytearray, memoryview)):
        return "X'" + bytes(value).hex() + "'"
    raise TypeError(f"no SQL literal for a chunk bound of type {type(value).__name__}")
