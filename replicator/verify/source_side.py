"""Reading the source side of a comparison: MySQL rows typed exactly as replication types them.

Rows come back as the text the server sends and are typed by ``source.values``'
``snapshot_converter`` (the snapshot's own path, which equals the binlog path value for
value), in a session whose time zone is UTC, so TIMESTAMPs are instants. Pages are cut by
keyset pagination (``WHERE key > last ORDER BY key LIMIT n``), which walks the primary-key
index; no page holds the table open.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from typing import Any

from replicator.errors import SourceError
from replicator.model.catalog import SourceTable
from replicator.model.pipeline import SOURCE_TABLE_COLUMN, MySQLSource
from replicator.plan.model import TablePlan
from replicator.source.connection import classify_error, connection_settings, is_mariadb
from replicator.source.snapshot import quote_mysql_identifier
from replicator.source.values import ZeroDates, snapshot_converter

# Keys per `WHERE key IN (...)` lookup.
LOOKUP_BATCH = 500


def _key_sql(key_columns: Sequence[str]) -> str:
    inner = ", ".join(quote_mysql_identifier(column) for column in key_columns)
    return f"({inner})" if len(key_columns) > 1 else inner


def _marks(count: int) -> str:
    return "(" + ", ".join(["%s"] * count) + ")" if count > 1 else "%s"


class SourceReader:
    """Rows of one replicated table, as dicts by source column name."""

    def __init__(self, source: MySQLSource, table: SourceTable, plan: TablePlan,
                 *, source_name: str | None = None, condition: str | None = None) -> None:
        """``source_name``: one source table of a routed target (its rows carry it as
        SOURCE_TABLE_COLUMN; columns the table lacks are NULL, as replication makes them).
        ``condition``: a checked MySQL condition (``verify --where``: ``slice``) every read
        of rows is restricted to."""
        import pymysql

        self.source = source
        self.table = table
        self._constant: dict[str, Any] = {}
        key = [k for k in plan.source_key if not (source_name and k == SOURCE_TABLE_COLUMN)]
        self.key = tuple(key)
        wanted = [c.source_column for c in plan.data_columns if c.source_column]
        if plan.filter or plan.computed_columns:  # they may read excluded columns
            wanted += list(plan.excluded)
        columns = []
        for name in dict.fromkeys(wanted):
            column = table.column(name)
            if source_name and name == SOURCE_TABLE_COLUMN:
                self._constant[name] = source_name
            elif source_name and column is None:
                self._constant[name] = None  # a column only other tables of the target have
            elif column is None:
                raise SourceError(f"{table.name} has no column {name!r} any more",
                                  hint="run `replicator plan` to see the live schema")
            else:
                columns.append(column)
        self.key = tuple(table.column(k).name if table.column(k) else k for k in self.key)
        self.names = [c.name for c in columns]
        self._select = (
            f"SELECT {', '.join(quote_mysql_identifier(n) for n in self.names)} FROM "
            f"{quote_mysql_identifier(table.database)}.{quote_mysql_identifier(table.table)}"
        )
        # PyMySQL formats every statement with its parameters (``%s``), so a ``%`` of the
        # condition (MySQL's modulo) is doubled to stay one.
        self.condition = f"({condition.replace('%', '%%')})" if condition else None
        self._order = " ORDER BY " + ", ".join(quote_mysql_identifier(c) for c in self.key)
        settings = connection_settings(source)
        from pymysql.converters import conversions

        # Values as the server sends them (text/bytes), for snapshot_converter to type.
        settings["conv"] = {k: v for k, v in conversions.items() if not isinstance(k, int)}
        settings["init_command"] = "SET SESSION time_zone = '+00:00'"
        try:
            self._connection = pymysql.connect(**settings)
        except pymysql.err.MySQLError as exc:
            raise classify_error(exc, source, doing=f"connecting to verify {table.name}") from exc
        zero_dates = ZeroDates(source.zero_dates)
        mariadb = is_mariadb(self._connection)
        self._converters = [
            snapshot_converter(c.mysql_type, table=table.name, column=c.name,
                               zero_dates=zero_dates, mariadb=mariadb)
            for c in columns
        ]

    def query(self, sql: str, params: Sequence[Any]) -> list[tuple[Any, ...]]:
        """Any read of the table (values as the server sends them: text or bytes)."""
        import pymysql

        try:
            with self._connection.cursor() as cursor:
                cursor.execute(sql, list(params))
                return list(cursor.fetchall())
        except pymysql.err.MySQLError as exc:
            raise classify_error(exc, self.source, doing=f"reading {self.table.name}") from exc

    quote = staticmethod(quote_mysql_identifier)

    def estimated_rows(self) -> int:
        """InnoDB's estimate of the table's rows (information_schema; no scan)."""
        rows = self.query("SELECT TABLE_ROWS FROM information_schema.TABLES WHERE "
                          "TABLE_SCHEMA = %s AND TABLE_NAME = %s",
                          [self.table.database, self.table.table])
        return int(rows[0][0] or 0) if rows else 0

    @property
    def relation(self) -> str:
        """The table, quoted for MySQL."""
        return (f"{quote_mysql_identifier(self.table.database)}."
                f"{quote_mysql_identifier(self.table.table)}")

    def _where(self, *conditions: str) -> str:
        """`` WHERE`` with these conditions and the slice's (empty if none)."""
        every = [c for c in (*conditions, self.condition) if c]
        return " WHERE " + " AND ".join(every) if every else ""

    def _rows(self, sql: str, params: Sequence[Any]) -> list[dict[str, Any]]:
        raw = self.query(sql, params)
        names, converters, constant = self.names, self._converters, self._constant
        return [
            {**constant, **{n: v if v is None or f is None else f(v)
                            for n, f, v in zip(names, converters, row, strict=True)}}
            for row in raw
        ]

    def page(self, after: tuple[Any, ...] | None, limit: int) -> list[dict[str, Any]]:
        """Up to ``limit`` rows with key > ``after`` (None: from the start), in key order."""
        where, params = self._where(), []
        if after is not None:
            where = self._where(f"{_key_sql(self.key)} > {_marks(len(self.key))}")
            params = list(after)
        return self._rows(f"{self._select}{where}{self._order} LIMIT %s", [*params, limit])

    def between(self, column: str, lower: Any, upper: Any) -> list[dict[str, Any]]:
        """The rows with ``lower <= column < upper`` (a key column; None: unbounded)."""
        quoted = quote_mysql_identifier(column)
        conditions = ([f"{quoted} >= %s"] if lower is not None else []) + (
            [f"{quoted} < %s"] if upper is not None else [])
        return self._rows(self._select + self._where(*conditions),
                          [b for b in (lower, upper) if b is not None])

    def everything(self) -> Iterator[dict[str, Any]]:
        yield from self._rows(self._select + self._where(), [])

    def lookup(self, keys: Sequence[tuple[Any, ...]]) -> list[dict[str, Any]]:
        """The rows with these keys (MySQL-typed key values)."""
        rows: list[dict[str, Any]] = []
        width = len(self.key)
        for start in range(0, len(keys), LOOKUP_BATCH):
            batch = keys[start:start + LOOKUP_BATCH]
            marks = ", ".join([_marks(width)] * len(batch))
            params = [value for key in batch for value in key]
            rows += self._rows(self._select + self._where(f"{_key_sql(self.key)} IN ({marks})"),
                               params)
        return rows

    def key_of(self, row: dict[str, Any]) -> tuple[Any, ...]:
        return tuple(row[name] for name in self.key)

    def lookup_keys(self, keys: Sequence[tuple[Any, ...]], key_names: Sequence[str]
                    ) -> list[tuple[Any, ...]]:
        """Full keys (``key_names`` order) -> the values of this reader's own key."""
        at = [[n.lower() for n in key_names].index(k.lower()) for k in self.key]
        return [tuple(key[i] for i in at) for key in keys]

    def close(self) -> None:
        self._connection.close()
