"""DDL in the binlog: which statements change a schema, and which tables they name.

Both readers (``source.binlog`` and ``source.fast.reader``, through ``source.transactions``)
and ``replicator plan --ddl`` parse a Query event's statement with these functions.
"""

from __future__ import annotations

import re

from replicator.model.changes import BinlogPosition, SchemaChange
from replicator.model.selection import TableSelector

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
