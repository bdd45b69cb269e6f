"""MySQL column -> Arrow type of its change-batch column (``model.change_batch``).

The one mapping every producer of change batches uses: the binlog decoder (from the Table_map,
``binlog_arrow_type``) and the snapshot reader (from the catalog, ``source_arrow_type``) must
give a column the same Arrow type, so a table's batches concatenate and the target sees the
same values whichever path read a row. The Python value an Arrow value turns back into
(``to_pylist``) equals what ``source.values`` gives today, type for type, except where noted:

==========================  ===============================  ==================================
MySQL                       Arrow                            value
==========================  ===============================  ==================================
TINYINT..BIGINT             int8/16/32/64                    int
... UNSIGNED                uint8/16/32/64 (MEDIUMINT: 32)   int (BIGINT UNSIGNED max fits)
YEAR                        int16                            int (YEAR 0000 is 0)
DECIMAL(p,s)                decimal128(p,s), p > 38: 256     Decimal with exponent -s
FLOAT / DOUBLE              float64                          float (FLOAT: shortest float32)
DATE                        date32                           date
DATETIME(fsp)               timestamp[us]                    naive datetime
TIMESTAMP(fsp)              timestamp[us, tz=UTC]            aware datetime in UTC
TIME(fsp)                   string, MySQL's text             '-838:59:59.000000' (not timedelta)
CHAR/VARCHAR/TEXT/ENUM/SET  string                           str (SET: members, definition order)
JSON                        string                           JSON text
BIT(n)                      uint64                           int
BINARY/VARBINARY/BLOB       binary                           bytes (BINARY(n) zero-padded)
GEOMETRY and the like       binary                           bytes (WKB as stored)
UUID/INET4/INET6 (MariaDB)  string                           text
==========================  ===============================  ==================================

TIME is text because no Arrow/Parquet time type holds -838:59:59 or 838:59:59; the text is
``time_text`` (MySQL's own spelling, fsp digits as declared), exactly what the staging column
of a TIME gets today (``model.text.time_text``). ``parse_time`` reads it back.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from replicator.model import change_batch
from replicator.model.catalog import BINARY_TYPES, MySQLType, SourceColumn, SourceTable
from replicator.model.text import time_text  # the one TIME printer, re-exported for decoders

if TYPE_CHECKING:
    import pyarrow as pa

# Arrow's decimal128 holds 38 digits; MySQL's DECIMAL up to 65.
MAX_DECIMAL128 = 38

_SIGNED_BITS = {"tinyint": 8, "smallint": 16, "mediumint": 32, "int": 32, "bigint": 64}
_GEOMETRY = frozenset({"geometry", "point", "linestring", "polygon", "multipoint",
                       "multilinestring", "multipolygon", "geometrycollection", "vector"})


def _integer(bits: int, unsigned: bool) -> pa.DataType:
    import pyarrow as pa

    return {
        (8, False): pa.int8(), (16, False): pa.int16(), (32, False): pa.int32(),
        (64, False): pa.int64(), (8, True): pa.uint8(), (16, True): pa.uint16(),
        (32, True): pa.uint32(), (64, True): pa.uint64(),
    }[(bits, unsigned)]


def decimal_type(precision: int, scale: int) -> pa.DataType:
    import pyarrow as pa

    if precision > MAX_DECIMAL128:
        return pa.decimal256(precision, scale)
    return pa.decimal128(precision, scale)


def source_arrow_type(column: SourceColumn | MySQLType) -> pa.DataType:
    """The Arrow type of a catalog column's change-batch column (see the module table)."""
    import pyarrow as pa

    mysql_type = column.mysql_type if isinstance(column, SourceColumn) else column
    name = mysql_type.name
    if name in _SIGNED_BITS:
        return _integer(_SIGNED_BITS[name], mysql_type.unsigned)
    if name == "year":
        return pa.int16()
    if name == "decimal":
        return decimal_type(mysql_type.precision or 10, mysql_type.scale or 0)
    if name in ("float", "double"):
        return pa.float64()
    if name == "date":
        return pa.date32()
    if name == "datetime":
        return pa.timestamp("us")
    if name == "timestamp":
        return pa.timestamp("us", tz="UTC")
    if name == "bit":
        return pa.uint64()
    if name in BINARY_TYPES or name in _GEOMETRY:
        return pa.binary()
    return pa.string()  # char, varchar, text, enum, set, json, time, uuid, inet4/6


def source_kind_name(column: SourceColumn | MySQLType) -> str:
    """The batch kind (``transform.columns.source_kind``) of ``source_arrow_type(column)``,
    without pyarrow: `plan --offline` prints the statement the warehouse runs over snapshot
    chunk files and must run where pyarrow is not installed. A unit test holds the two in
    step for every MySQL type."""
    mysql_type = column.mysql_type if isinstance(column, SourceColumn) else column
    name = mysql_type.name
    if name in _SIGNED_BITS:
        return "uint" if mysql_type.unsigned else "int"
    kinds = {"year": "int", "decimal": "decimal", "float": "float", "double": "float",
             "date": "date", "datetime": "timestamp", "timestamp": "timestamp_tz",
             "bit": "uint"}
    if name in kinds:
        return kinds[name]
    if name in BINARY_TYPES or name in _GEOMETRY:
        return "binary"
    return "string"


def wide_decimal(column: SourceColumn) -> bool:
    """A DECIMAL over Arrow's decimal128 (its change-batch column is decimal256)."""
    return column.mysql_type.name == "decimal" and (column.mysql_type.precision or 10) > MAX_DECIMAL128


# -- from a binlog Table_map column (python-mysql-replication's ``Column``) -------------------

# pymysql.constants.FIELD_TYPE numbers (kept here so this module imports no driver).
_TINY, _SHORT, _LONG, _FLOAT, _DOUBLE, _TIMESTAMP, _LONGLONG, _INT24 = 1, 2, 3, 4, 5, 7, 8, 9
_DATE, _TIME, _DATETIME, _YEAR, _NEWDATE, _VARCHAR, _BIT = 10, 11, 12, 13, 14, 15, 16
_TIMESTAMP2, _DATETIME2, _TIME2 = 17, 18, 19
_JSON, _DECIMAL, _NEWDECIMAL, _ENUM, _SET = 245, 0, 246, 247, 248
_TINY_BLOB, _MEDIUM_BLOB, _LONG_BLOB, _BLOB, _VAR_STRING, _STRING, _GEOMETRY_TYPE = (
    249, 250, 251, 252, 253, 254, 255
)
_BINLOG_INTEGER_BITS = {_TINY: 8, _SHORT: 16, _INT24: 32, _LONG: 32, _LONGLONG: 64}
_BINLOG_STRINGISH = frozenset({_VARCHAR, _VAR_STRING, _STRING, _TINY_BLOB, _MEDIUM_BLOB,
                               _LONG_BLOB, _BLOB})


def binlog_arrow_type(column: Any) -> pa.DataType:
    """The Arrow type of a Table_map column: the same as ``source_arrow_type`` of the catalog
    column it describes (the binlog knows the storage type, the catalog the declared one)."""
    import pyarrow as pa

    kind = column.type
    if kind in _BINLOG_INTEGER_BITS:
        return _integer(_BINLOG_INTEGER_BITS[kind], bool(getattr(column, "unsigned", False)))
    if kind == _YEAR:
        return pa.int16()
    if kind in (_NEWDECIMAL, _DECIMAL):
        return decimal_type(int(column.precision), int(column.decimals))
    if kind in (_FLOAT, _DOUBLE):
        return pa.float64()
    if kind in (_DATE, _NEWDATE):
        return pa.date32()
    if kind in (_DATETIME, _DATETIME2):
        return pa.timestamp("us")
    if kind in (_TIMESTAMP, _TIMESTAMP2):
        return pa.timestamp("us", tz="UTC")
    if kind == _BIT:
        return pa.uint64()
    if kind == _GEOMETRY_TYPE:
        return pa.binary()
    if kind in _BINLOG_STRINGISH and (column.character_set_name or "binary") == "binary":
        return pa.binary()
    return pa.string()  # text, enum, set, json, time


# -- the whole change batch -----------------------------------------------------------------


# The ``__replicator_*`` columns' batch kinds: "int" is int64, "string" is utf8.
INTERNAL_KINDS = {
    change_batch.OP: "string", change_batch.FILE: "string", change_batch.FILE_SEQ: "int",
    change_batch.POS: "int", change_batch.ROW_INDEX: "int", change_batch.TS_MS: "int",
    change_batch.GTID: "string", change_batch.TRANSACTION_ID: "string",
    change_batch.TABLE: "string",
}


def internal_fields() -> list[pa.Field]:
    """The ``__replicator_*`` columns of every change batch, in ``INTERNAL_COLUMNS`` order."""
    import pyarrow as pa

    types = {"int": pa.int64(), "string": pa.string()}
    return [pa.field(name, types[INTERNAL_KINDS[name]]) for name in change_batch.INTERNAL_COLUMNS]


def change_batch_schema(table: SourceTable, *, before: bool = True) -> pa.Schema:
    """The schema of ``table``'s change batches: its columns (catalog order), the internal
    columns, and (``before``) the sparse before-image, a ``before_column`` per column."""
    import pyarrow as pa

    fields = [pa.field(column.name, source_arrow_type(column)) for column in table.columns]
    fields += internal_fields()
    if before:
        fields += [pa.field(change_batch.before_column(field.name), field.type)
                   for field in fields[:len(table.columns)]]
    return pa.schema(fields)


__all__ = ["INTERNAL_KINDS", "binlog_arrow_type", "change_batch_schema", "decimal_type",
           "internal_fields", "source_arrow_type", "source_kind_name", "time_text", "wide_decimal"]
