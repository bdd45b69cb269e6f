"""Reading the binlog into ``ChangeEvent``s: with ``source/fast/`` (the fast decoding path,
docs/fast-decode.md), the only modules that import pymysqlreplication.

A reader starts at a transaction boundary, yields the row changes of every transaction that
commits after it and at or before ``end``, and returns (never blocks). Which events start and
end a transaction is decided once, in ``source.transactions``, for this reader and the fast one.

A transaction's events are buffered until its commit, which gives every change its commit
timestamp and the boundary after it (``end_position``: where a resumed reader restarts).
The library's own ``end_log_pos`` ignores the binlog file, so the end is checked here with
``BinlogPosition`` ordering, and its silent reconnect (which may resume mid-transaction and
drop rows, measured) is turned into a ``TransientSourceError`` so the engine resumes from the
last boundary instead.
"""

from __future__ import annotations

import os
from collections.abc import Collection, Iterator
from typing import Any

from replicator.errors import SourceError, TransientSourceError
from replicator.model.changes import BinlogPosition, ChangeEvent, SchemaChange
from replicator.model.pipeline import MySQLSource
from replicator.model.selection import TableSelection, TableSelector, as_selector
from replicator.source.connection import classify_error, connection_settings
from replicator.source.fast.payload import TRANSACTION_PAYLOAD
from replicator.source.fast.reader import read_changes_fast
from replicator.source.positions import binlog_head
from replicator.source.transactions import (
    MARIADB_FL_STANDALONE,
    Commit,
    TransactionAssembler,
    partial_json_refused,
)
from replicator.source.values import (
    ValueStats,
    ZeroDates,
    binlog_converter,
    is_zero_date_source,
    patch_library_time2,
)


def _change_events(items: list[Commit | SchemaChange]) -> Iterator[ChangeEvent | SchemaChange]:
    """The library reader's commits (rows already decoded) as ChangeEvents, in order."""
    for item in items:
        if isinstance(item, SchemaChange):
            yield item
            continue
        transaction_id = item.gtid or str(item.start)
        for row_index, (table_name, op, before, after) in enumerate(item.changes):
            yield ChangeEvent(
                table=table_name, op=op, position=item.start, row_index=row_index,
                ts_ms=item.ts_ms, before=before, after=after, gtid=item.gtid,
                transaction_id=transaction_id, end_position=item.end,
            )


def _library_stream(source: MySQLSource, start: BinlogPosition, server_id: int,
                    only_events: list[Any]) -> Any:
    """The library's non-blocking dump from ``start`` (``only_events``: the event classes
    the reader handles), with its silent reconnect refused."""
    import pymysql
    from pymysqlreplication import BinLogStreamReader

    stream_connections = 0

    def open_connection(**settings: Any) -> Any:
        # The library reconnects silently after a dropped stream, from the last event it saw
        # (possibly mid-transaction). Refuse: the engine resumes from the last boundary.
        nonlocal stream_connections
        if "cursorclass" not in settings:  # the stream, not the library's control connection
            stream_connections += 1
            if stream_connections > 1:
                raise TransientSourceError(
                    f"the binlog connection to {source.host}:{source.port} dropped "
                    f"(reader server_id {server_id})",
                    hint="replicator resumes from the last transaction boundary; if this "
                    f"repeats, another binlog reader uses server_id {server_id} (the server "
                    "drops the older of two readers with one server_id): give every pipeline "
                    "its own source.mysql.server_id",
                )
        return pymysql.connect(**settings)

    settings = connection_settings(source)
    settings.pop("autocommit", None)
    settings["passwd"] = settings.pop("password")
    return BinLogStreamReader(
        connection_settings=settings,
        server_id=server_id,
        log_file=start.file,
        log_pos=start.pos,
        resume_stream=True,
        blocking=False,
        only_events=only_events,
        filter_non_implemented_events=False,
        # No only_schemas/only_tables: the library compares them case-sensitively; the
        # filter below is case-insensitive (and rows are decoded lazily, only when wanted).
        pymysql_wrapper=open_connection,
        enable_logging=False,
    )


class _ImageConverter:
    """Library row images -> our values, one converter list per table shape (cached)."""

    def __init__(self, zero_dates: ZeroDates) -> None:
        self.zero_dates = zero_dates
        self.converters: dict[tuple[Any, ...], list[tuple[str, Any]]] = {}

    def __call__(self, event: Any, image: dict[str, Any], none_sources: dict[str, str]) -> dict:
        table_name = f"{event.schema}.{event.table}"
        # Everything ``binlog_converter`` reads of a column: a DDL that changes only a SET's
        # members or a BINARY's length keeps names and types, and must not keep the converter.
        key = (event.schema, event.table, tuple(
            (c.name, c.type, tuple(getattr(c, "set_values", None) or ()),
             getattr(c, "max_length", None), getattr(c, "character_set_name", None))
            for c in event.columns))
        plan = self.converters.get(key)
        if plan is None:
            plan = []
            for column in event.columns:
                converter = binlog_converter(column, table=table_name, zero_dates=self.zero_dates)
                if converter is not None:
                    plan.append((column.name, converter))
            self.converters[key] = plan
        for name, value in image.items():
            if value is None and is_zero_date_source(none_sources.get(name)):
                self.zero_dates(table_name, name, "0000-00-00")
        for name, converter in plan:
            value = image.get(name)
            if value is not None or (name in none_sources and none_sources[name] == "empty set"):
                image[name] = converter(value)
        return image

    def rows(self, event: Any, table_name: str, op: str) -> Iterator[tuple]:
        """The event's rows as ``(table, op, before, after)``, converted."""
        for row in event.rows:
            if op == "c":
                yield table_name, op, None, self(event, row["values"], row["none_sources"])
            elif op == "d":
                yield table_name, op, self(event, row["values"], row["none_sources"]), None
            else:
                yield (table_name, op,
                       self(event, row["before_values"], row["before_none_sources"]),
                       self(event, row["after_values"], row["after_none_sources"]))


def read_changes(
    source: MySQLSource,
    *,
    start: BinlogPosition,
    end: BinlogPosition | None,
    tables: TableSelector | Collection[str | TableSelection] | None,
    server_id: int,
    stats: ValueStats | None = None,
    fast: bool | None = None,
    rows: bool = True,
    pause_tolerance_s: int | None = None,
) -> Iterator[ChangeEvent | SchemaChange]:
    """Changes of the transactions committed after ``start`` and at or before ``end``.

    ``start`` must be a transaction boundary. ``end=None``: the binlog head when called.
    ``tables``: "db.table" names (case-insensitive) and/or ``sources:`` selections (a
    ``TableSelector``) whose row changes are wanted; schema
    changes are yielded for their databases. ``server_id`` must be distinct per reader.
    ``stats`` counts zero dates loaded as NULL. ``fast``: decode with ``source.fast`` (the
    same events, ~10x faster); None: on unless the environment sets REPLICATOR_FAST_DECODE=0.
    ``rows=False``: schema changes only (the fast path skips rows events undecoded).
    ``pause_tolerance_s``: how long the consumer may stop reading before the server drops
    the dump (its net_write_timeout; fast path only, the library reads ahead on its own).
    """
    if fast is None:
        fast = os.environ.get("REPLICATOR_FAST_DECODE", "1").strip().lower() not in (
            "0", "false", "no", "off")
    if fast:
        yield from read_changes_fast(source, start=start, end=end, tables=tables,
                                     server_id=server_id, stats=stats, rows=rows,
                                     pause_tolerance_s=pause_tolerance_s)
        return
    if not rows:
        yield from (change for change in read_changes(
            source, start=start, end=end, tables=tables, server_id=server_id, stats=stats,
            fast=False) if isinstance(change, SchemaChange))
        return
    yield from _read_changes_library(source, start=start, end=end, tables=tables,
                                     server_id=server_id, stats=stats)


def _read_changes_library(
    source: MySQLSource,
    *,
    start: BinlogPosition,
    end: BinlogPosition | None,
    tables: TableSelector | Collection[str | TableSelection] | None,
    server_id: int,
    stats: ValueStats | None,
) -> Iterator[ChangeEvent | SchemaChange]:
    """``read_changes`` through the library's own event decoding (REPLICATOR_FAST_DECODE=0).

    Longer than most functions on purpose: one loop that hands each library event to the
    transaction assembler (``source.transactions``), which makes every decision."""
    import pymysql
    from pymysqlreplication.event import (
        GtidEvent,
        MariadbGtidEvent,
        NotImplementedEvent,
        QueryEvent,
        RotateEvent,
        XidEvent,
    )
    from pymysqlreplication.row_event import (
        DeleteRowsEvent,
        PartialUpdateRowsEvent,
        UpdateRowsEvent,
        WriteRowsEvent,
    )

    patch_library_time2()
    # Every test of a table name goes through the selector (exact names and `sources:`
    # patterns alike); `in` matches case-insensitively.
    wanted = as_selector(tables)
    zero_dates = ZeroDates(source.zero_dates, stats)

    if end is None:
        end = binlog_head(source)
    if start >= end:
        return

    stream = _library_stream(source, start, server_id, [
        RotateEvent, GtidEvent, MariadbGtidEvent, QueryEvent, XidEvent,
        WriteRowsEvent, UpdateRowsEvent, DeleteRowsEvent,
        # Not decoded by the library, but never skipped silently: refused below.
        PartialUpdateRowsEvent, NotImplementedEvent,
    ])
    assembler = TransactionAssembler(start, end, wanted)
    convert = _ImageConverter(zero_dates)
    def event_start(event: Any) -> int:
        return event.packet.log_pos - event.packet.event_size

    try:
        for event in stream:
            if isinstance(event, RotateEvent):
                assembler.rotate(event.next_binlog, event.position,
                                 bool(event.packet.log_pos and event.timestamp))
                continue
            if isinstance(event, MariadbGtidEvent):
                assembler.gtid(event_start(event), event.gtid,
                               not event.flags & MARIADB_FL_STANDALONE)
            elif isinstance(event, GtidEvent):
                assembler.gtid(event_start(event), event.gtid, False)
            elif isinstance(event, QueryEvent):
                database = event.schema.decode() if isinstance(event.schema, bytes) else event.schema
                yield from _change_events(assembler.query(
                    event_start(event), event.packet.log_pos, int(event.timestamp), database,
                    event.query.strip()))
            elif isinstance(event, XidEvent):
                yield from _change_events(assembler.xid(event.packet.log_pos,
                                                        int(event.timestamp)))
            elif isinstance(event, NotImplementedEvent):
                if event.packet.event_type == TRANSACTION_PAYLOAD:
                    raise SourceError(
                        "the binlog holds compressed transactions (MySQL "
                        "binlog_transaction_compression=ON), which only the fast decoder reads",
                        hint="unset REPLICATOR_FAST_DECODE (the fast decoder is the default)",
                    )
                continue
            else:  # rows events
                table_name = f"{event.schema}.{event.table}"
                if wanted is not None and table_name.lower() not in wanted:
                    continue
                if isinstance(event, PartialUpdateRowsEvent):
                    raise partial_json_refused(table_name)
                if assembler.tx_start is None:
                    raise assembler.not_a_boundary(table_name)
                op = ("c" if isinstance(event, WriteRowsEvent)
                      else "d" if isinstance(event, DeleteRowsEvent) else "u")
                assembler.changes.extend(convert.rows(event, table_name, op))
                continue
            if assembler.done:
                return
    except SourceError:
        raise
    except (pymysql.err.MySQLError, OSError) as exc:
        raise classify_error(exc, source, doing="reading the binlog", server_id=server_id) from exc
    finally:
        stream.close()
