"""A re-copy's condition (``replicator snapshot FILE --table db.t --where "..."``).

The user writes a MySQL condition over the table's own columns, as Debezium's incremental
snapshots take ``additional-conditions``: only the rows it selects are read again and
upserted (a backfill after a fix, a range that drifted). It is parsed with sqlglot's MySQL
grammar and written back by it, so what reaches MySQL is one expression, never a second
statement; it may not read other tables (a subquery) nor name columns the table does not
have. The text is the user's SQL, like a filter; no row value is ever put into it.
"""

from __future__ import annotations

from typing import Any

from replicator.errors import UsageError
from replicator.model.catalog import SourceTable

_HINT = ("write a MySQL condition over the table's columns, e.g. "
         "--where \"id BETWEEN 1000 AND 2000 OR updated_at >= '2026-01-01'\"")


def condition_sql(text: str, table: SourceTable) -> str:
    """``text`` checked and written back as MySQL (raises ``UsageError`` with a hint)."""
    import sqlglot
    from sqlglot import exp
    from sqlglot.errors import SqlglotError

    try:
        nodes = [node for node in sqlglot.parse(text, read="mysql") if node is not None]
    except SqlglotError as exc:
        raise UsageError(f"--where {text!r} is not a MySQL condition: "
                         f"{str(exc).splitlines()[0]}", hint=_HINT) from None
    if len(nodes) != 1:
        raise UsageError(f"--where {text!r} is not one condition", hint=_HINT)
    node = nodes[0]
    if isinstance(node, exp.Query | exp.DDL | exp.DML | exp.Command | exp.Alias):
        raise UsageError(f"--where {text!r} is not a condition", hint=_HINT)
    if node.find(exp.Select) is not None:
        raise UsageError(f"--where {text!r} reads another table (a subquery)",
                         hint="a re-copy's condition reads the copied table's columns only")
    _check_columns(text, node, table)
    return node.sql(dialect="mysql")


def _check_columns(text: str, node: Any, table: SourceTable) -> None:
    from sqlglot import exp

    for column in node.find_all(exp.Column):
        if column.table:
            raise UsageError(f"--where {text!r}: write {column.name} without a table name",
                             hint=_HINT)
        if table.column(column.name) is None:
            raise UsageError(
                f"--where {text!r}: {table.name} has no column {column.name}",
                hint="its columns are: " + ", ".join(c.name for c in table.columns))
