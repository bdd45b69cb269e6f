"""``verify --where COND``: one slice of a table, selected alike on the source and the target.

The condition is the user's MySQL over the source table's columns, checked exactly as
``replicator snapshot --where`` checks it (``source.conditions.condition_sql``: one
expression, no subquery, only the table's columns; written back by sqlglot). MySQL runs it
as that text. The target must select the *same* rows, so the condition is carried over as
a sqlglot tree, never as text: each column is renamed to its target column, each literal
is retyped for the target column it is compared with, and the tree is rendered in the
warehouse's dialect.

That is only sound where both databases give the condition the same truth for the same
row, so verify accepts a small language and refuses the rest, saying why:

- comparisons (``= <> < <= > >=``), ``BETWEEN``, ``IN (literals)``, ``IS [NOT] NULL``,
  joined by ``AND``/``OR``/``NOT``; ``+ - * %`` over numbers (``%``: a sample,
  ``id % 10 = 3``). No function: MySQL's and the warehouse's functions differ.
- columns that the target holds as the same value in a type that compares alike:
  integers, DECIMAL, BIGINT UNSIGNED (as a DECIMAL), DATE, DATETIME and TIMESTAMP.
  Refused: text (MySQL compares by collation: ``'a' = 'A '`` is true; the warehouse
  compares characters), TINYINT(1)/BIT (a boolean in the target), FLOAT/DOUBLE, JSON,
  TIME (text in the target), binary, and columns that are excluded, masked, computed or
  of a declared ``type:`` (the target holds another value, or none).
- numbers compared with numbers (plain digits, no exponent), dates and times compared
  with a quoted ISO date or datetime (``'2026-01-01'``, ``'2026-01-01 12:00:00.5'``),
  which both sides then read as the same instant: a TIMESTAMP column in UTC (verify's
  MySQL session runs in UTC; the target's literal carries ``+00:00``).

Zero dates: ``'0000-00-00'`` is NULL in the target (``zero_dates: null``), but MySQL
compares it as a date before every other: a condition it satisfies (``born < '2000-01-01'``)
selects such a row on the source only, and it is reported missing. docs/verify.md says so.
"""

from __future__ import annotations

import datetime as dt
from dataclasses import dataclass
from typing import Any

from replicator.errors import UsageError
from replicator.model.catalog import SourceTable
from replicator.plan.model import PlannedColumn, TablePlan
from replicator.source.conditions import condition_sql

NUMERIC, DATE, DATETIME, TIMESTAMP_TZ = "numeric", "date", "datetime", "timestamp_tz"

_LANGUAGE = ("verify --where takes comparisons (= <> < <= > >=, BETWEEN, IN, IS [NOT] NULL) "
             "of integer, DECIMAL, DATE, DATETIME and TIMESTAMP columns with numbers or "
             "quoted ISO dates, joined by AND/OR/NOT, and + - * % over numbers")


@dataclass(frozen=True)
class TableSlice:
    """One table's slice: the condition as MySQL runs it and as the target runs it."""

    where: str  # as the user wrote it
    source_sql: str  # MySQL, over source columns
    target_sql: str  # the warehouse's SQL, over target columns

    def to_dict(self) -> dict[str, str]:
        return {"where": self.where, "source": self.source_sql, "target": self.target_sql}


def table_slice(where: str, source_table: SourceTable, table: TablePlan,
                target_dialect: str) -> TableSlice:
    """``where`` checked as ``snapshot --where`` checks it, then carried to the target's
    ``target_dialect`` (a sqlglot dialect: ``duckdb``, ``snowflake``). Raises
    ``UsageError`` (exit 2) where the target could not select the same rows."""
    import sqlglot

    checked = condition_sql(where, source_table)
    tree = sqlglot.parse_one(checked, read="mysql")
    columns = {c.source_column.lower(): c for c in table.data_columns if c.source_column}
    _Carrier(where, table, columns).check(tree)
    source = _retype_literals(tree, columns, for_target=False)
    target = _target_columns(_retype_literals(tree, columns, for_target=True), columns)
    return TableSlice(where, source.sql(dialect="mysql"), target.sql(dialect=target_dialect))


def _kind(column: PlannedColumn) -> str | None:
    """How the column compares on both sides alike, or None (refused: ``_refusal``)."""
    mysql = column.mysql_type
    if (mysql is None or column.mask or column.expression is not None
            or column.declared_type):
        return None
    kind, name = column.target_type.kind, mysql.name
    if kind == "integer" and name in ("tinyint", "smallint", "mediumint", "int", "bigint",
                                      "year"):
        return NUMERIC
    if kind == "decimal" and (name == "decimal" or (name == "bigint" and mysql.unsigned)):
        return NUMERIC
    if kind == "date" and name == "date":
        return DATE
    if kind == "timestamp" and name == "datetime":
        return DATETIME
    if kind == "timestamp_tz" and name == "timestamp":
        return TIMESTAMP_TZ
    return None


def _refusal(name: str, column: PlannedColumn | None) -> str:
    if column is None:
        return f"{name} is not in the target (excluded), so the target cannot select by it"
    if column.mask:
        return f"{name} is masked in the target (mask: {column.mask})"
    if column.expression is not None or column.declared_type:
        return f"{name}'s target value is made by the transform step"
    kind = column.target_type.kind
    why = {
        "string": "MySQL compares text by its collation (case and trailing spaces ignored), "
                  "the warehouse by characters",
        "boolean": "the target holds it as a BOOLEAN",
        "float": "a double compares and prints differently on each side",
        "json": "JSON",
        "time_text": "a TIME is text in the target",
        "binary": "binary",
    }.get(kind, f"{column.mysql_type.name.upper() if column.mysql_type else '?'} -> {kind}")
    return f"{name} cannot select the same rows on both sides ({why})"


class _Carrier:
    """Checks that every node of the condition means the same on both sides."""

    def __init__(self, where: str, table: TablePlan, columns: dict[str, PlannedColumn]):
        self.where = where
        self.table = table
        self.columns = columns

    def _refuse(self, why: str) -> UsageError:
        return UsageError(f"--where {self.where!r} on {self.table.source_name}: {why}",
                          hint=_LANGUAGE)

    def check(self, node: Any) -> None:
        from sqlglot import exp

        if isinstance(node, exp.Paren):
            self.check(node.this)
        elif isinstance(node, exp.And | exp.Or):
            self.check(node.left)
            self.check(node.right)
        elif isinstance(node, exp.Not):
            self.check(node.this)
        elif isinstance(node, exp.EQ | exp.NEQ | exp.GT | exp.GTE | exp.LT | exp.LTE):
            self._same(node, [node.left, node.right])
        elif isinstance(node, exp.Between):
            self._same(node, [node.this, node.args["low"], node.args["high"]])
        elif isinstance(node, exp.In):
            if node.args.get("query") or node.args.get("unnest") or node.args.get("field"):
                raise self._refuse("IN takes a list of literals")
            self._same(node, [node.this, *node.expressions])
        elif isinstance(node, exp.Is):
            if not isinstance(node.expression, exp.Null):
                raise self._refuse(f"{node.sql('mysql')}: IS takes NULL only")
            self._operand(node.this)
        else:
            raise self._refuse(f"{node.sql('mysql')} is not a comparison verify can carry to "
                               "the target")

    def _same(self, node: Any, operands: list[Any]) -> None:
        """The operands of one comparison: one kind (numbers, or one temporal kind with
        quoted literals)."""
        kinds = {self._operand(operand) for operand in operands} - {"null", "text"}
        texts = [o for o in operands if self._operand(o) == "text"]
        if len(kinds) > 1:
            raise self._refuse(f"{node.sql('mysql')} compares a "
                               + " with a ".join(sorted(kinds)))
        kind = next(iter(kinds), None)
        if texts and kind not in (DATE, DATETIME, TIMESTAMP_TZ):
            raise self._refuse(f"{node.sql('mysql')}: a quoted literal compares only with a "
                               "DATE, DATETIME or TIMESTAMP column")
        if kind is None:
            raise self._refuse(f"{node.sql('mysql')} compares no column")
        for text in texts:
            _parse_temporal(text.this, kind, self._refuse)

    def _operand(self, node: Any) -> str:
        """``numeric``, a temporal kind, ``text`` (a quoted literal) or ``null``."""
        from sqlglot import exp

        if isinstance(node, exp.Paren):
            return self._operand(node.this)
        if isinstance(node, exp.Column):
            column = self.columns.get(node.name.lower())
            kind = _kind(column) if column is not None else None
            if kind is None:
                raise self._refuse(_refusal(node.name, column))
            return kind
        if isinstance(node, exp.Null):
            return "null"
        if isinstance(node, exp.Literal):
            if node.is_string:
                return "text"
            if any(c in node.this for c in "eExX"):
                raise self._refuse(f"{node.sql('mysql')}: write the number in plain digits")
            return NUMERIC
        if isinstance(node, exp.Neg):
            if self._operand(node.this) != NUMERIC:
                raise self._refuse(f"{node.sql('mysql')}: only a number can be negated")
            return NUMERIC
        if isinstance(node, exp.Add | exp.Sub | exp.Mul | exp.Mod):
            if {self._operand(node.left), self._operand(node.right)} != {NUMERIC}:
                raise self._refuse(f"{node.sql('mysql')}: + - * % take numbers only")
            return NUMERIC
        raise self._refuse(f"{node.sql('mysql')} cannot be evaluated alike on both sides "
                           "(no functions: each database has its own)")


def _parse_temporal(text: str, kind: str, refuse: Any) -> dt.date:
    try:
        if kind == DATE:
            return dt.date.fromisoformat(text)
        value = dt.datetime.fromisoformat(text)
    except ValueError:
        raise refuse(f"{text!r} is not an ISO "
                     + ("date (YYYY-MM-DD)" if kind == DATE
                        else "datetime (YYYY-MM-DD[ HH:MM:SS[.ffffff]])")) from None
    if value.tzinfo is not None:
        raise refuse(f"{text!r}: write the time without an offset "
                     + ("(a TIMESTAMP is read in UTC)" if kind == TIMESTAMP_TZ
                        else "(a DATETIME has no time zone)"))
    return value


def _retype_literals(tree: Any, columns: dict[str, PlannedColumn], *, for_target: bool) -> Any:
    """A copy with quoted literals as one spelling of their column's kind (the same value
    on both sides); for the target, typed (a CAST)."""
    from sqlglot import exp

    def partner_kind(literal: Any) -> str:
        parent = literal.parent
        while isinstance(parent, exp.Paren):
            parent = parent.parent
        for operand in parent.iter_expressions():
            while isinstance(operand, exp.Paren):
                operand = operand.this
            if isinstance(operand, exp.Column):
                kind = _kind(columns[operand.name.lower()])
                assert kind is not None
                return kind
        raise AssertionError("checked by _Carrier")

    def retype(node: Any) -> Any:
        if isinstance(node, exp.Literal) and node.is_string:
            kind = partner_kind(node)
            value = _parse_temporal(node.this, kind, AssertionError)
            text = (value.isoformat() if kind == DATE
                    else value.isoformat(sep=" ", timespec="microseconds"))
            if not for_target:
                return exp.Literal.string(text)
            if kind == TIMESTAMP_TZ:
                return exp.Cast(this=exp.Literal.string(text + "+00:00"),
                                to=exp.DataType.build("TIMESTAMPTZ"))
            return exp.Cast(this=exp.Literal.string(text),
                            to=exp.DataType.build("DATE" if kind == DATE else "TIMESTAMP"))
        return node

    return tree.transform(retype)


def _target_columns(tree: Any, columns: dict[str, PlannedColumn]) -> Any:
    """Source columns renamed to their target columns (quoted as the plan spells them)."""
    from sqlglot import exp

    def rename(node: Any) -> Any:
        if isinstance(node, exp.Column):
            return exp.column(columns[node.name.lower()].target_column, quoted=True)
        return node

    return tree.transform(rename)
