"""Chunked snapshot reads: primary-key ranges that Spark can read in parallel.

The engine records the binlog position first, then reads every chunk with a plain
non-locking SELECT (InnoDB's consistent read), then streams the binlog from the recorded
position. Changes made while the chunks are read are replayed as full-image upserts and
deletes, so the target converges to the source exactly; no chunk needs to see the same
instant as another.

Chunk boundaries are picked by ordered key sampling: from the previous boundary, the key
``chunk_rows`` rows further on (``ORDER BY key LIMIT 1 OFFSET chunk_rows - 1``, which walks
the primary-key index). Composite keys compare as row values: ``(a, b) > (%s, %s)``.
Values come out typed exactly as ``binlog.read_changes`` types them (``source.values``).
"""

from __future__ import annotations

import time
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import Any

from replicator.errors import SourceError
from replicator.model.catalog import SourceTable
from replicator.model.changes import BinlogPosition, ChangeEvent
from replicator.model.pipeline import MySQLSource
from replicator.source.connection import classify_error, connection_settings, is_mariadb
from replicator.source.values import ValueStats, ZeroDates, snapshot_converter

# Row indexes of one chunk live in their own band, so (position, row_index) stays a total
# order over a whole snapshot however many rows a chunk ends up with.
_ROW_INDEX_BAND = 1 << 32


@dataclass(frozen=True)
class Chunk:
    """Rows of one table with ``lower < key <= upper`` (None: unbounded). Picklable."""

    table: str  # "db.table"
    index: int
    key_columns: tuple[str, ...]
    lower: tuple[Any, ...] | None = None  # exclusive
    upper: tuple[Any, ...] | None = None  # inclusive


def quote_identifier(name: str) -> str:
    """MySQL identifier quoting: the one place names enter SQL text."""
    return "`" + name.replace("`", "``") + "`"


def _table_sql(table: SourceTable) -> str:
    return f"{quote_identifier(table.database)}.{quote_identifier(table.table)}"


def _key_sql(key_columns: Sequence[str]) -> str:
    inner = ", ".join(quote_identifier(column) for column in key_columns)
    return f"({inner})" if len(key_columns) > 1 else inner


def _marks(count: int) -> str:
    return "(" + ", ".join(["%s"] * count) + ")" if count > 1 else "%s"


def _connect(source: MySQLSource, *, raw: bool) -> Any:
    """A connection whose session reads TIMESTAMPs in UTC; ``raw``: values come back as the
    text (or bytes) the server sends, for ``source.values`` to type exactly."""
    import pymysql
    from pymysql.converters import conversions

    settings = connection_settings(source)
    if raw:
        settings["conv"] = {k: v for k, v in conversions.items() if not isinstance(k, int)}
    settings["init_command"] = "SET SESSION time_zone = '+00:00'"
    try:
        return pymysql.connect(**settings)
    except pymysql.err.MySQLError as exc:
        raise classify_error(exc, source, doing="connecting for the snapshot") from exc


def plan_chunks(source: MySQLSource, table: SourceTable, *, chunk_rows: int) -> list[Chunk]:
    """Key ranges of about ``chunk_rows`` rows covering the whole table.

    A table without a primary key is one chunk (it cannot be split by key).
    """
    import pymysql

    if chunk_rows < 1:
        raise ValueError("chunk_rows must be positive")
    key = tuple(table.primary_key)
    if not key:
        return [Chunk(table=table.name, index=0, key_columns=())]
    chunks: list[Chunk] = []
    lower: tuple[Any, ...] | None = None
    key_sql = _key_sql(key)
    select = ", ".join(quote_identifier(column) for column in key)
    order = ", ".join(quote_identifier(column) for column in key)
    try:
        with _connect(source, raw=False) as connection, connection.cursor() as cursor:
            while True:
                where, params = "", []
                if lower is not None:
                    where, params = f" WHERE {key_sql} > {_marks(len(key))}", list(lower)
                cursor.execute(
                    f"SELECT {select} FROM {_table_sql(table)}{where}"
                    f" ORDER BY {order} LIMIT 1 OFFSET %s",
                    [*params, chunk_rows - 1],
                )
                row = cursor.fetchone()
                if row is None:
                    chunks.append(Chunk(table.name, len(chunks), key, lower, None))
                    return chunks
                upper = tuple(row)
                chunks.append(Chunk(table.name, len(chunks), key, lower, upper))
                lower = upper
    except pymysql.err.MySQLError as exc:
        raise classify_error(exc, source, doing=f"planning snapshot chunks of {table.name}") from exc


def read_chunk(
    source: MySQLSource,
    table: SourceTable,
    chunk: Chunk,
    *,
    position: BinlogPosition,
    stats: ValueStats | None = None,
) -> Iterator[ChangeEvent]:
    """The rows of one chunk as ``r`` events (after-image only), typed like the binlog path."""
    import pymysql
    import pymysql.cursors

    zero_dates = ZeroDates(source.zero_dates, stats)
    names = [column.name for column in table.columns]
    where: list[str] = []
    params: list[Any] = []
    if chunk.lower is not None:
        where.append(f"{_key_sql(chunk.key_columns)} > {_marks(len(chunk.key_columns))}")
        params.extend(chunk.lower)
    if chunk.upper is not None:
        where.append(f"{_key_sql(chunk.key_columns)} <= {_marks(len(chunk.key_columns))}")
        params.extend(chunk.upper)
    sql = f"SELECT {', '.join(quote_identifier(n) for n in names)} FROM {_table_sql(table)}"
    if where:
        sql += " WHERE " + " AND ".join(where)
    if chunk.key_columns:
        sql += " ORDER BY " + ", ".join(quote_identifier(c) for c in chunk.key_columns)
    ts_ms = int(time.time() * 1000)
    base = chunk.index * _ROW_INDEX_BAND
    try:
        with _connect(source, raw=True) as connection:
            mariadb = is_mariadb(connection)
            converters = [
                snapshot_converter(column.mysql_type, table=table.name, column=column.name,
                                   zero_dates=zero_dates, mariadb=mariadb)
                for column in table.columns
            ]
            with connection.cursor(pymysql.cursors.SSCursor) as cursor:
                cursor.execute(sql, params)
                for number, row in enumerate(cursor):
                    after = {
                        name: value if value is None or convert is None else convert(value)
                        for name, convert, value in zip(names, converters, row, strict=True)
                    }
                    yield ChangeEvent(
                        table=table.name, op="r", position=position, row_index=base + number,
                        ts_ms=ts_ms, after=after, end_position=position,
                    )
    except SourceError:
        raise
    except pymysql.err.MySQLError as exc:
        raise classify_error(exc, source, doing=f"reading a snapshot chunk of {table.name}") from exc
