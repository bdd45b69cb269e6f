"""The part of a row filter MySQL can decide, pushed into the snapshot's chunk SELECT.

A table's ``filter:`` is Spark SQL; the transform step (``transform.stage``) applies all of
it, in DuckDB, to every row the snapshot reads. Rows it drops need not be read at all, so
the snapshot adds to each chunk's ``WHERE`` a MySQL predicate built here. The one rule:
**the pushed-down predicate never drops a row the Spark filter keeps** (a row whose filter is
TRUE). Pushing down a *weaker* predicate (true on a superset of those rows) is always
correct, because the transform step still applies the full filter to what is read; so an
AND keeps only its pushable conjuncts, and where nothing is provably safe nothing is pushed.

What is pushed, and why MySQL's result is Spark's (TRUE, FALSE or NULL) on every row (for
temporal columns: on every row where Spark's is not NULL):

- a column of an integer type (not BIT, YEAR or a TINYINT(1) read as BOOLEAN) or DECIMAL
  compared (= <> < <= > >= <=>) with a number the user wrote (an integer or decimal
  literal, not a DOUBLE such as ``1e3``), or IN a list of such numbers: MySQL compares exact
  numbers exactly, as Spark does in their common decimal type. Only where that common type
  fits DECIMAL(38) unbounded (Spark would otherwise round the column, or fail on it);
- IS NULL of such a column, or of a string column: NULL is NULL on both sides;
- a VARCHAR/TEXT column of a UTF-8 (or ASCII) character set compared with, or IN a list of,
  string literals, as ``CAST(col AS BINARY) op x'<utf-8 hex>'``: Spark compares strings by
  code point, case-sensitively, with no trailing-space padding; the bytes of UTF-8 text
  compare in code-point order, and a binary comparison has no collation (no case folding,
  no PAD SPACE). CHAR (sql_mode PAD_CHAR_TO_FULL_LENGTH pads it), ENUM/SET, JSON and TIME
  columns and other character sets are left out. The literal is hex: no sql_mode
  (NO_BACKSLASH_ESCAPES) changes its meaning;
- a DATE, DATETIME or TIMESTAMP column compared with a date or timestamp literal (a string
  is parsed as Spark parses it when comparing, ``plan.expressions.casts.parse_date`` /
  ``parse_timestamp``), rendered as its canonical text. The snapshot session reads in UTC
  (``time_zone = '+00:00'``), so a TIMESTAMP column compares as the UTC wall clock the
  transform step sees, a DATETIME as its own wall clock (which the replicator reads as UTC).
  A zero date is NULL to Spark but a value to MySQL, so there MySQL says TRUE or FALSE where
  Spark says NULL: the comparison *refines* Spark's (equal wherever Spark's is not NULL).
  AND, OR and NOT are monotone in that order (Kleene logic: a NULL made TRUE or FALSE never
  turns a TRUE result into another), so a formula of refining parts refines the filter, and
  is TRUE wherever the filter is: refining parts may stand under NOT. IS NULL of a temporal
  column is never pushed (Spark says TRUE for a zero date, MySQL FALSE); IS NOT NULL is, but
  only outside NOT (MySQL's is TRUE on a superset of Spark's rows). Literals outside the
  column type's range are not pushed.
- AND, OR (every branch pushable), NOT (of a refining part only), BETWEEN, parentheses.

Everything else (functions, arithmetic, casts, LIKE, columns compared with columns, FLOAT/
DOUBLE columns, booleans) is not pushed. The MySQL text is built as a sqlglot tree and
rendered by sqlglot's MySQL dialect; literals are those the user wrote (row values never
enter SQL text). A row whose full filter would fail (an ANSI error such as a division by
zero in a part not pushed down) but which the pushed-down part rules out is not read, so it
no longer fails the snapshot; it is a row the filter would not keep either way.

Where the target may already hold rows (a re-copy, ``--snapshot always``), a merged table
turns a read row that fails the filter into a delete; unread rows are removed instead by
the copy's end (``engine.snapshot.remove_absent_rows`` or the re-copy's closing DELETE),
which needs a key that is not masked: tables without one get no pushdown
(``table_predicate``). A first copy into a target that already holds rows (a new checkpoint
over an old target) removes no row MySQL no longer has, and now no row it does not read.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Mapping, Sequence
from decimal import Decimal
from typing import Any

from replicator.errors import PlanError
from replicator.model.catalog import SourceColumn, SourceTable
from replicator.plan.expressions.casts import parse_date, parse_timestamp
from replicator.plan.expressions.checker import Checker
from replicator.plan.expressions.parsing import parse
from replicator.plan.expressions.spark_types import MAX_PRECISION, SparkType
from replicator.plan.model import TablePlan

_INTEGERS = frozenset({"tinyint", "smallint", "mediumint", "int", "integer", "bigint"})
_TEXTS = frozenset({"varchar", "tinytext", "text", "mediumtext", "longtext"})
# Character sets whose stored bytes are the UTF-8 of the text the reader decodes.
_UTF8 = frozenset({"utf8mb4", "utf8mb3", "utf8", "ascii"})
# MySQL keeps at most 30 digits after the point of an exact-value literal.
_MYSQL_MAX_SCALE = 30
_DATE_RANGE = (dt.datetime(1000, 1, 1), dt.datetime(9999, 12, 31, 23, 59, 59, 999999))
_TIMESTAMP_RANGE = (dt.datetime(1970, 1, 1, 0, 0, 1), dt.datetime(2038, 1, 19, 3, 14, 7, 999999))
_FLIPPED = {"EQ": "EQ", "NEQ": "NEQ", "NullSafeEQ": "NullSafeEQ", "GT": "LT", "GTE": "LTE",
            "LT": "GT", "LTE": "GTE"}


def _column_kind(column: SourceColumn, spark: SparkType) -> str | None:
    """How a column compares in MySQL exactly as in Spark: number, string, date, datetime,
    timestamp; None: not at all (left out)."""
    name = column.mysql_type.name
    if (name in _INTEGERS and spark.kind in ("int", "bigint")) or (
            name == "bigint" and spark.kind == "decimal" and spark.scale == 0):
        return "number"
    if name == "decimal" and spark.kind == "decimal" and (
            spark.precision, spark.scale) == (column.mysql_type.precision or 10,
                                              column.mysql_type.scale or 0):
        return "number"
    if name in _TEXTS and spark.kind == "string" and (column.charset or "").lower() in _UTF8:
        return "string"
    if name == "date" and spark.kind == "date":
        return "date"
    if name in ("datetime", "timestamp") and spark.kind == "timestamp":
        return name
    return None


def _number_shape(spark: SparkType) -> tuple[int, int] | None:
    """(integer digits, scale) of an exact numeric Spark type, as Spark widens it."""
    if spark.kind == "int":
        return 10, 0
    if spark.kind == "bigint":
        return 20, 0
    if spark.kind == "decimal":
        return spark.precision - spark.scale, spark.scale
    return None


def _capped(shapes: Sequence[tuple[int, int] | None]) -> bool:
    """Whether Spark's common type of these numbers would not hold them all exactly (it caps
    DECIMAL at 38 digits, rounding or failing on the column), or one is not exact."""
    if any(shape is None for shape in shapes):
        return True
    exact = [shape for shape in shapes if shape is not None]
    return max(s[0] for s in exact) + max(s[1] for s in exact) > MAX_PRECISION


class _Pushdown:
    def __init__(self, inputs: Mapping[str, SparkType], columns: Sequence[SourceColumn]) -> None:
        self.checker = Checker({name.lower(): (name, t) for name, t in inputs.items()})
        types = {name.lower(): t for name, t in inputs.items()}
        self.columns: dict[str, tuple[SourceColumn, str, SparkType]] = {}
        for column in columns:
            spark = types.get(column.name.lower())
            kind = _column_kind(column, spark) if spark is not None else None
            if kind is not None and spark is not None:
                self.columns[column.name.lower()] = (column, kind, spark)

    # -- AND / OR / NOT -------------------------------------------------------------------
    def superset(self, node: Any) -> Any:
        """A predicate TRUE wherever ``node`` is TRUE in Spark, or None."""
        from sqlglot import exp

        if isinstance(node, exp.Paren):
            return self.superset(node.this)
        if isinstance(node, exp.And):
            # A conjunct left out only widens the set: the transform step applies it.
            parts = [p for p in (self.superset(node.this), self.superset(node.expression))
                     if p is not None]
            return exp.and_(*parts) if parts else None
        if isinstance(node, exp.Or):
            left, right = self.superset(node.this), self.superset(node.expression)
            return None if left is None or right is None else exp.or_(left, right)
        if isinstance(node, exp.Between):
            return self.superset(self.between(node))
        if isinstance(node, exp.Not):
            inner = self.refining(node.this)
            if inner is not None:
                return exp.paren(exp.not_(inner))
            # IS NOT NULL of a temporal column: a zero date is NULL only to Spark, so MySQL's
            # IS NOT NULL holds on a superset of Spark's rows.
            return self.not_null(self.unwrap(node.this))
        return self.leaf(node)

    def refining(self, node: Any) -> Any:
        """A predicate refining ``node``'s Spark value (equal to it on every row where Spark's
        is not NULL), or None."""
        from sqlglot import exp

        if isinstance(node, exp.Paren):
            return self.refining(node.this)
        if isinstance(node, (exp.And, exp.Or)):
            left, right = self.refining(node.this), self.refining(node.expression)
            if left is None or right is None:
                return None
            return exp.and_(left, right) if isinstance(node, exp.And) else exp.or_(left, right)
        if isinstance(node, exp.Between):
            return self.refining(self.between(node))
        if isinstance(node, exp.Not):
            inner = self.refining(node.this)
            return None if inner is None else exp.paren(exp.not_(inner))
        return self.leaf(node)

    @staticmethod
    def unwrap(node: Any) -> Any:
        from sqlglot import exp

        while isinstance(node, exp.Paren):
            node = node.this
        return node

    @staticmethod
    def between(node: Any) -> Any:
        from sqlglot import exp

        return exp.And(this=exp.GTE(this=node.this, expression=node.args["low"]),
                       expression=exp.LTE(this=node.this, expression=node.args["high"]))

    def not_null(self, node: Any) -> Any:
        from sqlglot import exp

        if isinstance(node, exp.Is) and isinstance(node.expression, exp.Null):
            column = self.column(node.this)
            if column is not None:
                return exp.paren(exp.not_(exp.paren(self.is_null(column))))
        return None

    # -- leaves ---------------------------------------------------------------------------
    def column(self, node: Any) -> tuple[SourceColumn, str, SparkType] | None:
        from sqlglot import exp

        node = self.unwrap(node)
        if isinstance(node, exp.Column) and not node.table:
            return self.columns.get(node.name.lower())
        return None

    @staticmethod
    def column_sql(column: tuple[SourceColumn, str, SparkType]) -> Any:
        from sqlglot import exp

        return exp.column(column[0].name, quoted=True)

    def is_null(self, column: tuple[SourceColumn, str, SparkType]) -> Any:
        from sqlglot import exp

        return exp.Is(this=self.column_sql(column), expression=exp.Null())

    def constant(self, node: Any) -> tuple[Any, SparkType] | None:
        """The value and Spark type of a literal the user wrote (nothing is folded), never NULL."""
        try:
            typed = self.checker.check(node)
        except PlanError:
            return None  # not a literal this module reads; the transform step judges it
        if not typed.literal or typed.value is None:
            return None
        return typed.value, typed.type

    def leaf(self, node: Any) -> Any:
        """A comparison, IS NULL or IN whose MySQL value refines Spark's, or None."""
        from sqlglot import exp

        name = type(node).__name__
        if name in _FLIPPED:
            return self.comparison(node, name)
        if isinstance(node, exp.Is) and isinstance(node.expression, exp.Null):
            column = self.column(node.this)
            if column is None or column[1] not in ("number", "string"):
                return None  # a temporal column: Spark's NULL includes zero dates
            return exp.paren(self.is_null(column))
        if isinstance(node, exp.In) and not node.args.get("query") and node.expressions:
            return self.in_list(node)
        return None

    def comparison(self, node: Any, name: str) -> Any:
        from sqlglot import exp

        column, other = self.column(node.this), node.expression
        if column is None:
            column, other, name = self.column(node.expression), node.this, _FLIPPED[name]
        if column is None:
            return None
        constant = self.constant(other)
        if constant is None:
            return None
        literal = self.literal(column, *constant)
        if literal is None:
            return None
        left = self.column_sql(column)
        if column[1] == "string":
            left = exp.Cast(this=left, to=exp.DataType.build("BINARY", dialect="mysql"))
        operator = getattr(exp, name)
        return exp.paren(operator(this=left, expression=literal))

    def in_list(self, node: Any) -> Any:
        from sqlglot import exp

        column = self.column(node.this)
        if column is None or column[1] not in ("number", "string"):
            return None
        literals = []
        shapes = [_number_shape(column[2])]
        for item in node.expressions:
            constant = self.constant(item)
            literal = None if constant is None else self.literal(column, *constant)
            if literal is None or constant is None:
                return None  # a NULL in the list, or an item MySQL would compare otherwise
            literals.append(literal)
            shapes.append(_number_shape(constant[1]))
        if column[1] == "number" and _capped(shapes):
            return None  # Spark compares the column with every item in their common type
        left = self.column_sql(column)
        if column[1] == "string":
            left = exp.Cast(this=left, to=exp.DataType.build("BINARY", dialect="mysql"))
        return exp.paren(exp.In(this=left, expressions=literals))

    def literal(self, column: tuple[SourceColumn, str, SparkType], value: Any,
                spark: SparkType) -> Any:
        """The MySQL literal of a constant compared with ``column``, or None where MySQL's
        comparison would not be Spark's."""
        from sqlglot import exp

        kind = column[1]
        if kind == "number":
            if isinstance(value, bool) or not isinstance(value, (int, Decimal)):
                return None  # a DOUBLE literal compares as a double on both sides, inexactly
            text = format(value, "f") if isinstance(value, Decimal) else str(value)
            if _capped([_number_shape(column[2]), _number_shape(spark)]) or len(
                    text.partition(".")[2]) > _MYSQL_MAX_SCALE:
                return None
            return exp.Literal.number(text)
        if kind == "string":
            if spark.kind != "string" or not isinstance(value, str):
                return None
            return exp.HexString(this=value.encode("utf-8").hex())
        return self.temporal(kind, value, spark)

    @staticmethod
    def temporal(kind: str, value: Any, spark: SparkType) -> Any:
        from sqlglot import exp

        if kind == "date":
            if spark.kind == "string":
                value = parse_date(value)  # as Spark casts a string compared with a DATE
            elif spark.kind != "date":
                return None  # a timestamp: Spark compares the column as a TIMESTAMP
            if not isinstance(value, dt.date) or not 1000 <= value.year <= 9999:
                return None
            return exp.Literal.string(value.isoformat())
        if spark.kind == "string":
            value = parse_timestamp(value)
        elif spark.kind != "timestamp":
            return None  # a DATE literal: Spark widens it to midnight; left out
        if not isinstance(value, dt.datetime):
            return None
        if value.tzinfo is not None:
            value = value.astimezone(dt.UTC).replace(tzinfo=None)
        low, high = _TIMESTAMP_RANGE if kind == "timestamp" else _DATE_RANGE
        if not low <= value <= high:
            return None  # MySQL would not read the literal as a value of the column's type
        return exp.Literal.string(value.isoformat(sep=" ", timespec="microseconds"))


def pushdown(text: str, inputs: Mapping[str, SparkType], columns: Sequence[SourceColumn]) -> Any:
    """The sqlglot MySQL predicate of Spark filter ``text`` (over source columns of these
    Spark types, read from these MySQL columns) that never drops a row the filter keeps,
    or None. A filter that does not check pushes nothing (``validate`` reports it)."""
    try:
        tree = parse(text)
        translator = _Pushdown(inputs, columns)
        translator.checker.check(tree)  # the filter as a whole type-checks
        return translator.superset(tree)
    except PlanError:
        return None


def table_predicate(table: TablePlan, source: SourceTable) -> Any:
    """The pushed-down predicate of one plan reading ``source`` (sqlglot), or None: no
    filter, an outbox route (its rows are events), or a merged table whose copy could not
    remove the rows it no longer reads (module doc)."""
    if not table.filter or table.outbox is not None:
        return None
    every_change = table.keeps_every_change or table.mode == "scd2"
    if not every_change and (not table.source_key or any(c.mask for c in table.key_columns)):
        return None
    return pushdown(table.filter, dict(table.filter_inputs), source.columns)


def readers_of(tables: Sequence[TablePlan], source_name: str) -> list[TablePlan]:
    """The plans reading source table ``db.table`` (an outbox's routes, a routed target and a
    named one): one snapshot of it serves them all, so it reads what any of them keeps."""
    return [t for t in tables if any(n.lower() == source_name.lower() for n in t.source_names)]


def snapshot_predicate(readers: Sequence[TablePlan], source: SourceTable) -> str | None:
    """The MySQL predicate a snapshot chunk of ``source`` is read with: the OR of each
    reader's (a row any reader keeps is read), or None where one reader needs every row."""
    from sqlglot import exp

    parts = [table_predicate(reader, source) for reader in readers]
    if not parts or any(part is None for part in parts):
        return None
    unique = list({part.sql(dialect="mysql"): part for part in parts}.values())
    return str(exp.or_(*unique).sql(dialect="mysql"))


__all__ = ["pushdown", "readers_of", "snapshot_predicate", "table_predicate"]
