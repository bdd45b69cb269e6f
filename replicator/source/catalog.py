"""The live catalog from information_schema: columns, MySQL types, primary keys.

COLUMN_TYPE carries the whole type (``decimal(38,10) unsigned``, ``enum('a','b')``,
``datetime(6)``) and is parsed by ``MySQLType.parse``. MariaDB's JSON is an alias of LONGTEXT
with a ``json_valid()`` CHECK constraint; such columns are reported as ``json`` so both
servers plan the same.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence
from typing import Any

from replicator.errors import SourceError
from replicator.model.catalog import Catalog, MySQLType, MySQLTypeError, SourceColumn, SourceTable
from replicator.model.pipeline import MySQLSource
from replicator.model.selection import TableSelection
from replicator.source.connection import classify_error, connect

_JSON_CHECK = re.compile(r"json_valid\(`(?P<column>(?:[^`]|``)+)`\)", re.IGNORECASE)


def read_catalog(
    source: MySQLSource, tables: Iterable[tuple[str, str]],
    selections: Sequence[TableSelection] = (),
) -> Catalog:
    """The (database, table) pairs that exist, with columns and primary keys, plus every base
    table a ``sources:`` selection matches.

    Missing tables are simply absent (callers report them with their own context). Names
    match case-insensitively, preferring an exact match.
    """
    wanted = list(dict.fromkeys((db, table) for db, table in tables))
    if selections:
        wanted += [t for t in _selected_tables(source, selections) if t not in wanted]
    if not wanted:
        return Catalog(tables=())
    column_rows, key_rows, json_columns = _information_schema_rows(
        source, sorted({db.lower() for db, _ in wanted}))
    columns = _source_columns(column_rows, json_columns)
    keys: dict[tuple[str, str], list[str]] = {}
    for schema, table, column in key_rows:
        keys.setdefault((schema, table), []).append(str(column))

    found: list[SourceTable] = []
    for db, table in wanted:
        match = _match(columns, db, table)
        if match is None:
            continue
        found.append(
            SourceTable(
                database=match[0],
                table=match[1],
                columns=tuple(columns[match]),
                primary_key=tuple(keys.get(match, ())),
            )
        )
    return Catalog(tables=tuple(dict.fromkeys(found)))


def _information_schema_rows(
    source: MySQLSource, schemas: list[str],
) -> tuple[Sequence[Any], Sequence[Any], set[tuple[str, str, str]]]:
    """The column rows and primary-key rows of the schemas (lower case), and MariaDB's JSON
    columns (which information_schema shows as longtext), in one connection."""
    import pymysql

    marks = ",".join(["%s"] * len(schemas))
    try:
        with connect(source) as connection, connection.cursor() as cursor:
            cursor.execute(
                "SELECT TABLE_SCHEMA, TABLE_NAME, COLUMN_NAME, COLUMN_TYPE, IS_NULLABLE,"
                " ORDINAL_POSITION, CHARACTER_SET_NAME, COLUMN_DEFAULT"
                " FROM information_schema.COLUMNS"
                f" WHERE LOWER(TABLE_SCHEMA) IN ({marks})"
                " ORDER BY TABLE_SCHEMA, TABLE_NAME, ORDINAL_POSITION",
                schemas,
            )
            column_rows = cursor.fetchall()
            cursor.execute(
                "SELECT TABLE_SCHEMA, TABLE_NAME, COLUMN_NAME"
                " FROM information_schema.KEY_COLUMN_USAGE"
                f" WHERE CONSTRAINT_NAME = 'PRIMARY' AND LOWER(TABLE_SCHEMA) IN ({marks})"
                " ORDER BY TABLE_SCHEMA, TABLE_NAME, ORDINAL_POSITION",
                schemas,
            )
            key_rows = cursor.fetchall()
            json_columns = _mariadb_json_columns(cursor, schemas)
    except pymysql.err.MySQLError as exc:
        raise classify_error(exc, source, doing="reading the catalog") from exc
    return column_rows, key_rows, json_columns


def _source_columns(column_rows: Sequence[Any], json_columns: set[tuple[str, str, str]],
                    ) -> dict[tuple[str, str], list[SourceColumn]]:
    """information_schema.COLUMNS rows as ``SourceColumn``s per (schema, table)."""
    columns: dict[tuple[str, str], list[SourceColumn]] = {}
    for schema, table, column, column_type, nullable, ordinal, charset, default in column_rows:
        type_text = str(column_type)
        if (schema, table, column) in json_columns and type_text.lower() == "longtext":
            type_text = "json"
        try:
            mysql_type = MySQLType.parse(type_text)
        except MySQLTypeError as exc:
            raise SourceError(
                f"{schema}.{table}.{column}: {exc}",
                hint=f"exclude the column (columns: {{{column}: {{exclude: true}}}})",
            ) from exc
        columns.setdefault((schema, table), []).append(
            SourceColumn(
                name=str(column),
                mysql_type=mysql_type,
                nullable=str(nullable).upper() == "YES",
                ordinal=int(ordinal),
                charset=None if charset is None or mysql_type.name == "json" else str(charset),
                default=None if default is None else str(default),
            )
        )
    return columns


# Schemas of the server itself: never selected by a pattern (`.*\..*` means user tables).
SYSTEM_SCHEMAS = ("information_schema", "mysql", "performance_schema", "sys")


def _selected_tables(
    source: MySQLSource, selections: Sequence[TableSelection]
) -> list[tuple[str, str]]:
    """(database, table) of every base table some selection matches, in name order."""
    import pymysql

    marks = ",".join(["%s"] * len(SYSTEM_SCHEMAS))
    try:
        with connect(source) as connection, connection.cursor() as cursor:
            cursor.execute(
                "SELECT TABLE_SCHEMA, TABLE_NAME FROM information_schema.TABLES"
                f" WHERE TABLE_TYPE = 'BASE TABLE' AND LOWER(TABLE_SCHEMA) NOT IN ({marks})"
                " ORDER BY TABLE_SCHEMA, TABLE_NAME",
                SYSTEM_SCHEMAS,
            )
            rows = cursor.fetchall()
    except pymysql.err.MySQLError as exc:
        raise classify_error(exc, source, doing="listing the tables to match") from exc
    return [
        (str(db), str(table)) for db, table in rows
        if any(selection.matches(f"{db}.{table}") for selection in selections)
    ]


def list_tables(source: MySQLSource, database: str) -> list[str]:
    """Base tables of a database, by name (for ``init``)."""
    import pymysql

    try:
        with connect(source) as connection, connection.cursor() as cursor:
            cursor.execute(
                "SELECT TABLE_NAME FROM information_schema.TABLES"
                " WHERE TABLE_SCHEMA = %s AND TABLE_TYPE = 'BASE TABLE' ORDER BY TABLE_NAME",
                (database,),
            )
            return [str(row[0]) for row in cursor.fetchall()]
    except pymysql.err.MySQLError as exc:
        raise classify_error(exc, source, doing="listing tables") from exc


def _match(
    columns: dict[tuple[str, str], list[SourceColumn]], db: str, table: str
) -> tuple[str, str] | None:
    if (db, table) in columns:
        return (db, table)
    for key in columns:
        if (key[0].lower(), key[1].lower()) == (db.lower(), table.lower()):
            return key
    return None


def _mariadb_json_columns(cursor, schemas: list[str]) -> set[tuple[str, str, str]]:
    """Columns guarded by ``json_valid(col)``: MariaDB's JSON type (MySQL has no such table
    column and a JSON type of its own, so an error here just means "not MariaDB")."""
    import pymysql

    marks = ",".join(["%s"] * len(schemas))
    try:
        cursor.execute(
            "SELECT CONSTRAINT_SCHEMA, TABLE_NAME, CHECK_CLAUSE"
            " FROM information_schema.CHECK_CONSTRAINTS"
            f" WHERE LOWER(CONSTRAINT_SCHEMA) IN ({marks})",
            schemas,
        )
    except pymysql.err.MySQLError:
        return set()
    found: set[tuple[str, str, str]] = set()
    for schema, table, clause in cursor.fetchall():
        if table is None:
            continue
        for match in _JSON_CHECK.finditer(str(clause)):
            found.add((str(schema), str(table), match.group("column").replace("``", "`")))
    return found
