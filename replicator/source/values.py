"""One value normalisation for both ways a row leaves MySQL: the binlog and the snapshot.

The same row must give equal values of the same types whichever path read it (the engine
replays binlog changes over snapshot rows; any difference would show up as a spurious update
in the target). The target types are listed in /tmp/apis.md and ``model.values``:

- TIMESTAMP -> aware datetime in UTC (python-mysql-replication returns naive UTC; snapshot
  connections run with ``time_zone = '+00:00'``);
- FLOAT -> the shortest decimal that round-trips through float32, as a double (the binlog
  carries the float32 bits, 1.100000023841858; both paths give 1.1). The snapshot SELECTs a
  FLOAT as a DOUBLE, exactly: MariaDB prints a FLOAT with 6 digits only (3.40282e38 for
  3.4028235e38, 16777200 for 16777216), which would copy most float32 values rounded;
- SET -> members comma-joined in definition order, "" for the empty set (the library gives a
  Python set, and None for the empty set);
- BIT(n) -> int (the library gives a '0101' string, SELECT gives big-endian bytes);
- BINARY/VARBINARY/BLOB -> bytes (the library returns an empty BLOB as str ''); BINARY(n) is
  zero-padded to n bytes as SELECT returns it (the binlog strips the padding);
- YEAR 0000 -> 0 (the library adds 1900 to the stored 0);
- zero dates ('0000-00-00', and a TIMESTAMP of 0) -> None and counted, or a SourceError,
  by the source's ``zero_dates`` policy;
- TIME -> timedelta, negative and > 24 h (the library mis-decodes negative TIME with
  fractional seconds; ``decode_time2`` replaces its decoder, see binlog.py).
"""

from __future__ import annotations

import datetime as dt
import json
from collections.abc import Callable
from dataclasses import dataclass
from decimal import Decimal
from typing import TYPE_CHECKING, Any

from replicator.errors import SourceError
from replicator.model.catalog import MySQLType

if TYPE_CHECKING:
    import pyarrow as pa

UTC = dt.UTC
EPOCH = dt.datetime(1970, 1, 1)

Converter = Callable[[Any], Any]


@dataclass
class ValueStats:
    """What normalisation changed that a user should hear about (exposed in metrics)."""

    zero_dates: int = 0


class ZeroDates:
    """Applies a source's ``zero_dates`` policy ("null" or "error") and counts them."""

    def __init__(self, policy: str, stats: ValueStats | None = None) -> None:
        self.policy = policy
        self.stats = stats if stats is not None else ValueStats()

    def __call__(self, table: str, column: str, raw: Any) -> None:
        if self.policy == "error":
            raise SourceError(
                f"{table}.{column} holds a zero date ({raw!r}), which no warehouse can store",
                hint="set source.mysql.zero_dates: as_null to load zero dates as NULL, or fix the "
                f"rows: UPDATE {table} SET {column} = NULL WHERE {column} = '0000-00-00'",
            )
        self.stats.zero_dates += 1


def float32(value: float) -> float:
    """The shortest decimal that reads back as the same float32 (numpy's Dragon4), as a
    double. ``float32_column`` is the same rule over a column (Arrow's shortest form; a test
    holds the two equal over every exponent, subnormals and powers of two included)."""
    # numpy here, not at the top: `plan` imports this module (through the snapshot's SELECT)
    # and must start without numpy. 1.0 us a value with the import statement, 0.7 without;
    # the loop over %g widths this replaced took 2.6 us and missed the shortest form at some
    # powers of two.
    from numpy import float32 as numpy_float32

    return float(str(numpy_float32(value)))


def float32_column(array: pa.Array | pa.ChunkedArray) -> pa.Array | pa.ChunkedArray:
    """``float32`` over a column of doubles, in Arrow: float32, its shortest text, a double."""
    import pyarrow as pa
    import pyarrow.compute as pc

    return pc.cast(pc.cast(pc.cast(array, pa.float32()), pa.string()), pa.float64())


def set_text(members: Any, definition: tuple[str, ...] | list[str]) -> str:
    if not members:
        return ""
    chosen = set(members)
    return ",".join(member for member in definition if member in chosen)


def as_bytes(value: Any, pad_to: int | None = None) -> bytes:
    if isinstance(value, str):
        value = value.encode("latin-1", errors="surrogateescape") if value else b""
    value = bytes(value)
    if pad_to is not None and len(value) < pad_to:
        value = value.ljust(pad_to, b"\x00")
    return value


def json_text(value: Any) -> str:
    """MySQL's binary JSON, decoded by the library into Python values -> JSON text in MySQL's
    own spelling (``{"a": 1, "b": [1, 2]}``); MariaDB's JSON is already text."""
    if isinstance(value, str):
        return value
    if isinstance(value, bytes):
        return value.decode("utf-8")

    def plain(node: Any) -> Any:
        if isinstance(node, bytes):
            return node.decode("utf-8")
        if isinstance(node, dict):
            return {plain(key): plain(item) for key, item in node.items()}
        if isinstance(node, (list, tuple)):
            return [plain(item) for item in node]
        return node

    return json.dumps(plain(value), ensure_ascii=False)


def decode_time2(data: bytes, fsp: int) -> dt.timedelta:
    """MySQL's TIME2 binary format (sql-common/my_time.cc, my_time_packed_from_binary)."""
    intpart = int.from_bytes(data[:3], "big") - 0x800000
    if fsp in (1, 2):
        frac = data[3]
        if intpart < 0 and frac:
            intpart += 1
            frac -= 0x100
        packed = (intpart << 24) + frac * 10_000
    elif fsp in (3, 4):
        frac = int.from_bytes(data[3:5], "big")
        if intpart < 0 and frac:
            intpart += 1
            frac -= 0x10000
        packed = (intpart << 24) + frac * 100
    elif fsp in (5, 6):
        packed = int.from_bytes(data[:6], "big") - 0x800000000000
    else:
        packed = intpart << 24
    negative = packed < 0
    packed = -packed if negative else packed
    hms = packed >> 24
    micros = packed % (1 << 24)
    hours, minutes, seconds = (hms >> 12) % (1 << 10), (hms >> 6) % (1 << 6), hms % (1 << 6)
    total = dt.timedelta(hours=hours, minutes=minutes, seconds=seconds, microseconds=micros)
    return -total if negative else total


TIME2_BYTES = {0: 3, 1: 4, 2: 4, 3: 5, 4: 5, 5: 6, 6: 6}

_patched = False


def patch_library_time2() -> None:
    """Replace the library's TIME2 decoder: it gets negative TIME with fractional seconds
    wrong (-838:59:59.000001 came back as -838:59:58.999999, measured on 1.0.17)."""
    global _patched
    if _patched:
        return
    from pymysqlreplication.row_event import RowsEvent

    def read_time2(self: Any, column: Any) -> Any:
        fsp = column.fsp or 0
        return decode_time2(self.packet.read(TIME2_BYTES[fsp]), fsp)

    RowsEvent._RowsEvent__read_time2 = read_time2
    _patched = True


# -- the snapshot path: text from SELECT (pymysql with no converters) -> values -----------------


def parse_time(text: str) -> dt.timedelta:
    negative = text.startswith("-")
    body = text[1:] if negative else text
    clock, _, fraction = body.partition(".")
    hours, minutes, seconds = (int(part) for part in clock.split(":"))
    micros = int((fraction + "000000")[:6]) if fraction else 0
    total = dt.timedelta(hours=hours, minutes=minutes, seconds=seconds, microseconds=micros)
    return -total if negative else total


def _is_zero_date(text: str) -> bool:
    date_part = text.split(" ", 1)[0]
    return any(int(part) == 0 for part in date_part.split("-"))


def snapshot_converter(
    mysql_type: MySQLType, *, table: str, column: str, zero_dates: ZeroDates, mariadb: bool
) -> Converter | None:
    """A function from the text (or bytes) SELECT returns to the normalised value."""
    name = mysql_type.name
    if name in ("tinyint", "smallint", "mediumint", "int", "bigint", "year"):
        return int
    if name == "decimal":
        return Decimal
    if name == "double":
        return float
    if name == "float":
        return lambda text: float32(float(text))
    if name == "bit":
        return lambda raw: int.from_bytes(as_bytes(raw), "big")
    if name in ("binary", "varbinary", "tinyblob", "blob", "mediumblob", "longblob"):
        return as_bytes
    if name == "json":
        if mariadb:
            return None  # LONGTEXT: the text as stored, exactly what the binlog carries
        return lambda text: json_text(json.loads(text))
    if name == "date":

        def date_value(text: str) -> dt.date | None:
            if _is_zero_date(text):
                zero_dates(table, column, text)
                return None
            return dt.date.fromisoformat(text)

        return date_value
    if name in ("datetime", "timestamp"):
        aware = name == "timestamp"

        def datetime_value(text: str) -> dt.datetime | None:
            if _is_zero_date(text):
                zero_dates(table, column, text)
                return None
            value = dt.datetime.fromisoformat(text)
            return value.replace(tzinfo=UTC) if aware else value

        return datetime_value
    if name == "time":
        return parse_time
    if name in ("geometry", "point", "linestring", "polygon", "multipoint", "multilinestring",
                "multipolygon", "geometrycollection"):
        return as_bytes
    return None  # strings, enum, set: the text as the server sends it


# -- the binlog path: values decoded by python-mysql-replication -> values --------------------

# pymysql.constants.FIELD_TYPE numbers (kept here so this module imports no driver).
_DECIMAL, _TINY, _SHORT, _LONG, _FLOAT, _DOUBLE = 0, 1, 2, 3, 4, 5
_TIMESTAMP, _LONGLONG, _INT24, _DATE, _TIME, _DATETIME, _YEAR = 7, 8, 9, 10, 11, 12, 13
_VARCHAR, _BIT, _TIMESTAMP2, _DATETIME2, _TIME2 = 15, 16, 17, 18, 19
_JSON, _NEWDECIMAL, _ENUM, _SET = 245, 246, 247, 248
_TINY_BLOB, _MEDIUM_BLOB, _LONG_BLOB, _BLOB, _VAR_STRING, _STRING, _GEOMETRY = (
    249, 250, 251, 252, 253, 254, 255
)
_STRINGISH = frozenset({_VARCHAR, _VAR_STRING, _STRING, _TINY_BLOB, _MEDIUM_BLOB, _LONG_BLOB,
                        _BLOB})
_ZERO_DATE_SOURCES = ("out of date range", "out of datetime range", "out of datetime2 range")


def binlog_converter(column: Any, *, table: str, zero_dates: ZeroDates) -> Converter | None:
    """For one Table_map column (python-mysql-replication ``Column``): the function that
    takes the library's value to ours, or None when it is already right.

    Zero dates arrive as None from the library (told apart from NULL by its none_sources)
    and are handled by the reader; a zero TIMESTAMP arrives as the epoch and is handled here.
    """
    kind = column.type
    name = column.name
    if kind in (_TIMESTAMP, _TIMESTAMP2):

        def timestamp_value(value: dt.datetime) -> dt.datetime | None:
            if value == EPOCH:  # TIMESTAMP 0 is MySQL's zero timestamp (the range starts at 1 s)
                zero_dates(table, name, "0000-00-00 00:00:00")
                return None
            return value.replace(tzinfo=UTC)

        return timestamp_value
    if kind == _FLOAT:
        return float32
    if kind == _SET:
        definition = tuple(column.set_values or ())
        return lambda members: set_text(members, definition)
    if kind == _BIT:
        return lambda bits: int(bits, 2) if isinstance(bits, str) else int(bits)
    if kind == _YEAR:
        return lambda year: 0 if year == 1900 else year
    if kind == _JSON:
        return json_text
    if kind in _STRINGISH and (column.character_set_name or "binary") == "binary":
        pad_to = column.max_length if kind == _STRING else None
        return lambda raw: as_bytes(raw, pad_to)
    if kind == _GEOMETRY:
        return as_bytes
    return None


def is_zero_date_source(none_source: str | None) -> bool:
    return none_source in _ZERO_DATE_SOURCES
