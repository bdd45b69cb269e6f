"""A table's row filter (Spark SQL) as Snowflake SQL over the external stage's raw table,
where Snowflake decides it exactly as Spark does; elsewhere nothing (the plan refuses it).

The transform step's filter is translated for DuckDB (``transform.expressions``: Spark's
casts, overflow errors, Unicode case rules as DuckDB functions); that translation has no
Snowflake rendering. This is the part of the language whose meaning the two engines share
without any function, rendered from the parsed tree, and nothing else (an exact subset, not
a weaker predicate as ``plan.pushdown`` builds for MySQL: the whole filter or no filter):

- a number column (an integer type read as an integer, a DECIMAL) compared (= <> < <= > >=),
  IN, BETWEEN with numbers the user wrote (integer or plain decimal literals, not ``1e3``),
  where Spark's common decimal type holds both sides (at most 38 digits: Spark would round
  otherwise). Snowflake compares NUMBERs exactly, as Spark its decimals;
- a VARCHAR/TEXT column compared, IN, BETWEEN with string literals: Spark compares by code
  point, case-sensitively, trailing spaces counting; so does Snowflake's comparison of text
  without a collation. A ``DEFAULT_DDL_COLLATION`` set on the account, database or schema
  would give the raw table's columns one (docs/snowflake.md asks for none there; fakesnow
  cannot parse a ``COLLATE`` to pin it). The literals are bind parameters;
- IS [NOT] NULL of either; AND, OR, NOT (Kleene logic on both sides), parentheses, TRUE,
  FALSE.

Columns are the raw table's, typed as staged (``stage_copy.raw_columns``): a column the
target does not keep, or keeps in another kind (a TINYINT(1) as BOOLEAN), is not there.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import Any

from replicator.errors import ReplicatorError
from replicator.plan.expressions.parsing import parse
from replicator.plan.model import PlannedColumn, TablePlan
from replicator.plan.statements.names import q

_INTEGER_BITS = {"int": 10, "bigint": 20}  # Spark's integer types as decimal digits
_NUMBER = re.compile(r"^[0-9]+(\.[0-9]+)?$")
_MAX_PRECISION = 38
_TEXTS = frozenset({"varchar", "tinytext", "text", "mediumtext", "longtext"})
_INTEGERS = frozenset({"tinyint", "smallint", "mediumint", "int", "integer", "bigint"})
_COMPARISONS = {"EQ": "=", "NEQ": "<>", "LT": "<", "LTE": "<=", "GT": ">", "GTE": ">="}


class _NotExact(Exception):
    """A part of the filter Snowflake would not decide exactly as Spark."""


def _shape(text: str) -> tuple[int, int]:
    """(integer digits, scale) of a plain number literal."""
    whole, _, fraction = text.partition(".")
    return len(whole.lstrip("0") or "0"), len(fraction)


class _Render:
    def __init__(self, table: TablePlan, bind: Callable[[object], str]) -> None:
        self.bind = bind
        spark = {name.lower(): t for name, t in table.filter_inputs}
        self.columns: dict[str, tuple[PlannedColumn, str, tuple[int, int]]] = {}
        for column in table.data_columns:
            name = (column.source_column or "").lower()
            kind = self._kind(column, spark.get(name))
            if kind is not None and name not in self.columns:
                self.columns[name] = (column, *kind)

    @staticmethod
    def _kind(column: PlannedColumn, spark: Any) -> tuple[str, tuple[int, int]] | None:
        """("number", its Spark shape) or ("string", _) of a raw column the filter may read."""
        mysql, goal = column.mysql_type, column.target_type
        if mysql is None or spark is None or column.mask is not None:
            return None
        if mysql.name in _INTEGERS and spark.kind in _INTEGER_BITS and goal.kind == "integer":
            return "number", (_INTEGER_BITS[spark.kind], 0)
        if mysql.name in _INTEGERS | {"decimal"} and spark.kind == "decimal" \
                and goal.kind in ("integer", "decimal"):
            return "number", (spark.precision - spark.scale, spark.scale)
        if mysql.name in _TEXTS and spark.kind == "string" and goal.kind == "string":
            return "string", (0, 0)
        return None

    def predicate(self, node: Any) -> str:
        from sqlglot import exp

        if isinstance(node, exp.Paren):
            return f"({self.predicate(node.this)})"
        if isinstance(node, exp.And | exp.Or):
            word = "AND" if isinstance(node, exp.And) else "OR"
            return f"({self.predicate(node.this)} {word} {self.predicate(node.expression)})"
        if isinstance(node, exp.Not):
            return f"(NOT {self.predicate(node.this)})"
        if isinstance(node, exp.Boolean):
            return "TRUE" if node.this else "FALSE"
        if isinstance(node, exp.Is) and isinstance(node.expression, exp.Null):
            return f"({self.column(node.this)[0]} IS NULL)"
        name = type(node).__name__
        if name in _COMPARISONS:
            left, right = node.this, node.expression
            if not isinstance(left, exp.Column):
                left, right = right, left
                name = {"LT": "GT", "LTE": "GTE", "GT": "LT", "GTE": "LTE"}.get(name, name)
            column, kind = self.column(left)
            return f"({column} {_COMPARISONS[name]} {self.literal(right, kind)})"
        if isinstance(node, exp.In) and not node.args.get("query"):
            column, kind = self.column(node.this)
            items = ", ".join(self.literal(item, kind) for item in node.expressions)
            return f"({column} IN ({items}))"
        if isinstance(node, exp.Between):
            column, kind = self.column(node.this)
            return (f"({column} BETWEEN {self.literal(node.args['low'], kind)} AND "
                    f"{self.literal(node.args['high'], kind)})")
        raise _NotExact(name)

    def column(self, node: Any) -> tuple[str, tuple[str, tuple[int, int]]]:
        from sqlglot import exp

        if not isinstance(node, exp.Column) or node.table:
            raise _NotExact("not a column")
        found = self.columns.get(node.name.lower())
        if found is None:
            raise _NotExact(node.name)
        column, kind, shape = found
        return q(column.source_column or ""), (kind, shape)

    def literal(self, node: Any, kind: tuple[str, tuple[int, int]]) -> str:
        from sqlglot import exp

        what, (digits, scale) = kind
        sign = ""
        if isinstance(node, exp.Neg):
            sign, node = "-", node.this
        if not isinstance(node, exp.Literal):
            raise _NotExact("not a literal")
        if what == "string":
            if not node.is_string or sign:
                raise _NotExact("not a string literal")
            return self.bind(node.this)
        text = str(node.this)
        if node.is_string or not _NUMBER.match(text):
            raise _NotExact("not a plain number")
        literal_digits, literal_scale = _shape(text)
        if max(digits, literal_digits) + max(scale, literal_scale) > _MAX_PRECISION:
            raise _NotExact("Spark would round the common type")
        return sign + text


def filter_sql(table: TablePlan, bind: Callable[[object], str]) -> str | None:
    """The table's filter as Snowflake SQL over its raw table (string literals bound by
    ``bind``), or None: not in the exact subset (the module's docstring)."""
    if not table.filter:
        return None
    try:
        return _Render(table, bind).predicate(parse(table.filter))
    except (_NotExact, ReplicatorError):
        return None


__all__ = ["filter_sql"]
