"""Reading the binlog into ``ChangeEvent``s: with ``source/fast/`` (the fast decoding path,
docs/fast-decode.md), the only modules that import pymysqlreplication.

A reader starts at a transaction boundary, yields the row changes of every transaction that
commits after it and at or before ``end``, and returns (never blocks). How transactions look
in the binlog (ROW format):

- MySQL:   Gtid, Query BEGIN, Table_map, *_rows ..., Xid            (DDL: Gtid, Query)
- MariaDB: Gtid (its BEGIN), Table_map, *_rows ..., Xid             (DDL: standalone Gtid, Query)
- non-transactional engines (MyISAM/Aria) end with Query COMMIT instead of Xid.

A transaction's events are buffered until its commit, which gives every change its commit
timestamp and the boundary after it (``end_position``: where a resumed reader restarts).
The library's own ``end_log_pos`` ignores the binlog file, so the end is checked here with
``BinlogPosition`` ordering, and its silent reconnect (which may resume mid-transaction and
drop rows, measured) is turned into a ``TransientSourceError`` so the engine resumes from the
last boundary instead.
"""

from __future__ import annotations

import os
import re
from collections.abc import Collection, Iterator
from typing import Any

from replicator.errors import SourceError, TransientSourceError
from replicator.model.changes import BinlogPosition, ChangeEvent, SchemaChange
from replicator.model.pipeline import MySQLSource
from replicator.model.selection import TableSelection, TableSelector, as_selector
from replicator.source.connection import classify_error, connect, connection_settings
from replicator.source.fast.payload import TRANSACTION_PAYLOAD
from replicator.source.positions import head_position
from replicator.source.values import (
    TIME2_BYTES,
    ValueStats,
    ZeroDates,
    binlog_converter,
    decode_time2,
    is_zero_date_source,
)

_DDL = re.compile(
    r"^\s*(?:/\*.*?\*/\s*)*(?P<verb>ALTER|CREATE|DROP|RENAME|TRUNCATE)\b", re.IGNORECASE | re.DOTALL
)
_DDL_OBJECT = re.compile(
    r"^\s*(?:/\*.*?\*/\s*)*(?:CREATE|DROP|ALTER)\s+(?:OR\s+REPLACE\s+)?(?:ONLINE\s+|IGNORE\s+)?"
    r"(?:TEMPORARY\s+)?(?P<object>TABLE|DATABASE|SCHEMA|INDEX|UNIQUE|FULLTEXT|SPATIAL|VIEW|"
    r"TRIGGER|PROCEDURE|FUNCTION|EVENT|USER|ROLE|SEQUENCE|DEFINER|ALGORITHM|SQL)\b",
    re.IGNORECASE | re.DOTALL,
)
_IDENT = r"(?:`(?:[^`]|``)+`|[A-Za-z0-9_$]+)"
_TABLE_NAME = re.compile(rf"(?P<db>{_IDENT})\s*\.\s*(?P<table>{_IDENT})|(?P<bare>{_IDENT})")
_TABLE_LISTS = re.compile(
    r"^\s*(?:/\*.*?\*/\s*)*(?:ALTER\s+(?:ONLINE\s+|IGNORE\s+)?TABLE|CREATE\s+(?:OR\s+REPLACE\s+)?"
    r"(?:TEMPORARY\s+)?TABLE|DROP\s+(?:TEMPORARY\s+)?TABLE|RENAME\s+TABLE|TRUNCATE(?:\s+TABLE)?)"
    r"\s+(?:IF\s+(?:NOT\s+)?EXISTS\s+)?(?P<rest>.*)$",
    re.IGNORECASE | re.DOTALL,
)
_MARIADB_FL_STANDALONE = 0x01

_patched = False


def _patch_library() -> None:
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


def _unquote(identifier: str) -> str:
    if identifier.startswith("`") and identifier.endswith("`"):
        return identifier[1:-1].replace("``", "`")
    return identifier


def replicated_schema_change(
    query: str, database: str, position: BinlogPosition, ts_ms: int,
    wanted: TableSelector | None,
) -> SchemaChange | None:
    """``schema_change``, kept only when it can concern the replicated tables (None: every
    table; ``TableSelector.wants_schema_change`` decides). Both readers, the library's and
    the fast one, filter DDL by this."""
    change = schema_change(query, database, position, ts_ms)
    if change is None or wanted is None:
        return change
    return change if wanted.wants_schema_change(database, change.tables) else None


def schema_change(query: str, database: str, position: BinlogPosition, ts_ms: int) -> SchemaChange | None:
    """A DDL statement -> SchemaChange (None for anything that is not DDL)."""
    match = _DDL.match(query)
    if not match:
        return None
    kind = match.group("verb").lower()
    object_match = _DDL_OBJECT.match(query)
    if kind in ("create", "drop", "alter") and object_match:
        if object_match.group("object").upper() in ("DATABASE", "SCHEMA"):
            return SchemaChange(database=database, sql=query, kind=kind, tables=(),
                                position=position, ts_ms=ts_ms)
        if object_match.group("object").upper() not in ("TABLE", "INDEX", "UNIQUE", "FULLTEXT",
                                                        "SPATIAL"):
            kind = "other"
    tables: list[str] = []
    lists = _TABLE_LISTS.match(query)
    if lists:
        rest = lists.group("rest")
        # ALTER/CREATE name one table first; DROP/TRUNCATE a list; RENAME a TO b, c TO d.
        names = re.split(r"\s*,\s*|\s+TO\s+", rest, flags=re.IGNORECASE)
        if kind in ("alter", "create", "truncate"):
            names = names[:1]
        for name in names:
            found = _TABLE_NAME.match(name.strip())
            if not found:
                continue
            if found.group("bare"):
                db, table = database, _unquote(found.group("bare"))
            else:
                db, table = _unquote(found.group("db")), _unquote(found.group("table"))
            tables.append(f"{db}.{table}")
    elif kind in ("create", "drop") and re.search(r"\bINDEX\b", query, re.IGNORECASE):
        on = re.search(rf"\bON\s+(?P<name>{_IDENT}(?:\s*\.\s*{_IDENT})?)", query, re.IGNORECASE)
        if on:
            found = _TABLE_NAME.match(on.group("name"))
            if found and found.group("bare"):
                tables.append(f"{database}.{_unquote(found.group('bare'))}")
            elif found:
                tables.append(f"{_unquote(found.group('db'))}.{_unquote(found.group('table'))}")
        kind = "alter"
    return SchemaChange(database=database, sql=query, kind=kind, tables=tuple(tables),
                        position=position, ts_ms=ts_ms)


class _Transaction:
    __slots__ = ("changes", "gtid", "in_progress", "start")

    def __init__(self, start: BinlogPosition, gtid: str | None, in_progress: bool) -> None:
        self.start = start
        self.gtid = gtid
        self.in_progress = in_progress
        self.changes: list[tuple[str, str, dict | None, dict | None]] = []


def partial_json_refused(table: str) -> SourceError:
    """A PARTIAL_UPDATE_ROWS_EVENT holds a JSON column's update as a diff against the old
    document (binlog_row_value_options=PARTIAL_JSON), not the new value: replaying it would
    need the target's current document, which a MERGE of values cannot use."""
    return SourceError(
        f"the binlog holds a partial JSON update of {table} (MySQL "
        "binlog_row_value_options=PARTIAL_JSON): the changed JSON documents are logged as "
        "diffs, not values, and cannot be replicated",
        hint="SET PERSIST binlog_row_value_options = '' on the server, then re-snapshot the "
        "tables changed since: `replicator run PIPELINE.yaml --snapshot always`",
    )


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
        from replicator.source.fast.reader import read_changes_fast

        yield from read_changes_fast(source, start=start, end=end, tables=tables,
                                     server_id=server_id, stats=stats, rows=rows,
                                     pause_tolerance_s=pause_tolerance_s)
        return
    if not rows:
        yield from (change for change in read_changes(
            source, start=start, end=end, tables=tables, server_id=server_id, stats=stats,
            fast=False) if isinstance(change, SchemaChange))
        return
    import pymysql
    from pymysqlreplication import BinLogStreamReader
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

    _patch_library()
    # Every test of a table name goes through the selector (exact names and `sources:`
    # patterns alike); `in` matches case-insensitively.
    wanted = as_selector(tables)
    zero_dates = ZeroDates(source.zero_dates, stats)

    if end is None:
        try:
            with connect(source) as connection:
                end = head_position(connection)
        except pymysql.err.MySQLError as exc:
            raise classify_error(exc, source, doing="reading the binlog position") from exc
    if start >= end:
        return

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
    stream = BinLogStreamReader(
        connection_settings=settings,
        server_id=server_id,
        log_file=start.file,
        log_pos=start.pos,
        resume_stream=True,
        blocking=False,
        only_events=[
            RotateEvent, GtidEvent, MariadbGtidEvent, QueryEvent, XidEvent,
            WriteRowsEvent, UpdateRowsEvent, DeleteRowsEvent,
            # Not decoded by the library, but never skipped silently: refused below.
            PartialUpdateRowsEvent, NotImplementedEvent,
        ],
        filter_non_implemented_events=False,
        # No only_schemas/only_tables: the library compares them case-sensitively; the
        # filter below is case-insensitive (and rows are decoded lazily, only when wanted).
        pymysql_wrapper=open_connection,
        enable_logging=False,
    )
    file = start.file
    boundary = start
    transaction: _Transaction | None = None
    converters: dict[tuple[Any, ...], list[tuple[str, Any]]] = {}

    def event_start(event: Any) -> BinlogPosition:
        return BinlogPosition(file, event.packet.log_pos - event.packet.event_size)

    def begin(event: Any, gtid: str | None, in_progress: bool) -> bool:
        """Start a transaction at ``event``; False when it starts at or past ``end``."""
        nonlocal transaction
        position = event_start(event)
        if position >= end:
            return False
        transaction = _Transaction(position, gtid, in_progress)
        return True

    def convert(event: Any, image: dict[str, Any], none_sources: dict[str, str]) -> dict:
        table_name = f"{event.schema}.{event.table}"
        key = (event.schema, event.table, tuple((c.name, c.type) for c in event.columns))
        plan = converters.get(key)
        if plan is None:
            plan = []
            for column in event.columns:
                converter = binlog_converter(column, table=table_name, zero_dates=zero_dates)
                if converter is not None:
                    plan.append((column.name, converter))
            converters[key] = plan
        for name, value in image.items():
            if value is None and is_zero_date_source(none_sources.get(name)):
                zero_dates(table_name, name, "0000-00-00")
        for name, converter in plan:
            value = image.get(name)
            if value is not None or (name in none_sources and none_sources[name] == "empty set"):
                image[name] = converter(value)
        return image

    def finish(event: Any) -> Iterator[ChangeEvent]:
        nonlocal transaction, boundary
        assert transaction is not None
        boundary = BinlogPosition(file, event.packet.log_pos)
        ts_ms = int(event.timestamp) * 1000
        gtid = transaction.gtid
        transaction_id = gtid or str(transaction.start)
        for row_index, (table_name, op, before, after) in enumerate(transaction.changes):
            yield ChangeEvent(
                table=table_name, op=op, position=transaction.start, row_index=row_index,  # type: ignore[arg-type]
                ts_ms=ts_ms, before=before, after=after, gtid=gtid,
                transaction_id=transaction_id, end_position=boundary,
            )
        transaction = None

    try:
        for event in stream:
            if isinstance(event, RotateEvent):
                file = event.next_binlog
                if transaction is None and event.packet.log_pos and event.timestamp:
                    boundary = BinlogPosition(file, event.position)
                continue
            if isinstance(event, MariadbGtidEvent):
                if not begin(event, event.gtid, not event.flags & _MARIADB_FL_STANDALONE):
                    return
                continue
            if isinstance(event, GtidEvent):
                if not begin(event, event.gtid, False):
                    return
                continue
            if isinstance(event, QueryEvent):
                query = event.query.strip()
                verb = query[:8].upper()
                if verb.startswith("BEGIN") or verb.startswith("XA START"):
                    if transaction is None and not begin(event, None, True):
                        return
                    assert transaction is not None
                    transaction.in_progress = True
                    continue
                if transaction is not None and transaction.in_progress and not (
                    verb.startswith("COMMIT") or verb.startswith("ROLLBACK")
                ):
                    continue  # SAVEPOINT and the like, inside a transaction
                if transaction is None and not begin(event, None, False):
                    return
                assert transaction is not None
                database = event.schema.decode() if isinstance(event.schema, bytes) else event.schema
                position = transaction.start
                yield from finish(event)
                change = replicated_schema_change(query, database, position,
                                                  int(event.timestamp) * 1000, wanted)
                if change is not None:
                    yield change
                if boundary >= end:
                    return
                continue
            if isinstance(event, XidEvent):
                if transaction is None:  # a start that was not a boundary
                    raise SourceError(
                        f"binlog position {start} is not a transaction boundary",
                        hint="resume only from positions replicator recorded (checkpoints, "
                        "SHOW MASTER STATUS)",
                    )
                yield from finish(event)
                if boundary >= end:
                    return
                continue
            if isinstance(event, NotImplementedEvent):
                if event.packet.event_type == TRANSACTION_PAYLOAD:
                    raise SourceError(
                        "the binlog holds compressed transactions (MySQL "
                        "binlog_transaction_compression=ON), which only the fast decoder reads",
                        hint="unset REPLICATOR_FAST_DECODE (the fast decoder is the default)",
                    )
                continue
            # rows events
            table_name = f"{event.schema}.{event.table}"
            if wanted is not None and table_name.lower() not in wanted:
                continue
            if isinstance(event, PartialUpdateRowsEvent):
                raise partial_json_refused(table_name)
            if transaction is None:
                raise SourceError(
                    f"binlog position {start} is not a transaction boundary (rows of "
                    f"{table_name} without their transaction start)",
                    hint="resume only from positions replicator recorded",
                )
            changes = transaction.changes
            if isinstance(event, WriteRowsEvent):
                for row in event.rows:
                    changes.append((table_name, "c", None,
                                    convert(event, row["values"], row["none_sources"])))
            elif isinstance(event, DeleteRowsEvent):
                for row in event.rows:
                    changes.append((table_name, "d",
                                    convert(event, row["values"], row["none_sources"]), None))
            else:
                for row in event.rows:
                    changes.append((
                        table_name, "u",
                        convert(event, row["before_values"], row["before_none_sources"]),
                        convert(event, row["after_values"], row["after_none_sources"]),
                    ))
    except SourceError:
        raise
    except (pymysql.err.MySQLError, OSError) as exc:
        raise classify_error(exc, source, doing="reading the binlog", server_id=server_id) from exc
    finally:
        stream.close()
