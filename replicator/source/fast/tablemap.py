"""Table_map events -> table shapes (the library's Table plus our generated row decoders),
cached by the map's bytes.

A rows event is preceded by its Table_map in every transaction (on an OLTP workload: one per
row). python-mysql-replication re-parses each one (~60% of its time, measured); here a map
seen before is one dict lookup. The key is the whole event body (table id, names, types,
metadata), so a map that changed after DDL, or a table id reused after a restart, is a new
key and is parsed afresh. The cache is bounded (cleared when full).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from replicator.source.fast.codec import RowCodec, compile_codec

MAX_SHAPES = 1024


@dataclass(frozen=True, eq=False)
class TableShape:
    table_id: int
    name: str  # "db.table" as the binlog spells it
    columns: int
    library_table: Any  # pymysqlreplication.table.Table
    codec: RowCodec | None  # None: the library decodes this table's rows
    fallback_reason: str | None
    full_bitmap: bytes  # the columns-present bitmap of a FULL row image


_shapes: dict[bytes, TableShape] = {}


def cached_shape(body: bytes) -> TableShape | None:
    return _shapes.get(body)


def map_names(body: bytes, post_header: int) -> tuple[int, str]:
    """(table id, "db.table") of a Table_map body, without parsing the columns."""
    table_id = int.from_bytes(body[:6], "little")
    pos = post_header
    schema_length = body[pos]
    schema = body[pos + 1:pos + 1 + schema_length].decode()
    pos += 2 + schema_length
    table_length = body[pos]
    table = body[pos + 1:pos + 1 + table_length].decode()
    return table_id, f"{schema}.{table}"


def parse_shape(body: bytes, packet: bytes, library: Any) -> TableShape:
    """Parse a Table_map with the library, generate its row decoders, and cache the shape."""
    table = library.table_map(packet)
    name = f"{table.schema}.{table.table}"
    compiled = compile_codec(table.columns, name)
    codec = compiled if isinstance(compiled, RowCodec) else None
    count = len(table.columns)
    full = bytearray(b"\xff" * ((count + 7) // 8))
    if count % 8:
        full[-1] = (1 << (count % 8)) - 1
    shape = TableShape(
        table_id=table.table_id, name=name, columns=count, library_table=table, codec=codec,
        fallback_reason=None if codec else str(compiled), full_bitmap=bytes(full),
    )
    if len(_shapes) >= MAX_SHAPES:
        _shapes.clear()
    _shapes[body] = shape
    return shape
