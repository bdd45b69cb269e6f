"""Computed columns and filters: a Spark SQL expression over a row's source columns, parsed
and type-checked as Spark 4's analyzer does. Nothing here evaluates it.

``total: {expression: "round(amount * 1.2, 2)", type: "NUMBER(14,2)"}`` in the YAML. The
expression is parsed once with sqlglot (Spark dialect, function names kept as written:
``parsing``) and checked: its columns, functions, argument types and result type, with the
errors Spark's analyzer gives (ANSI mode, the default) and the offset of the offending part,
so ``validate`` and ``plan`` report them inside the YAML scalar. The engine runs it: the
transform step evaluates ``plan.transpile``'s DuckDB SQL over each batch, and folds what is
constant itself (issue 17: a hand-written evaluator is not an option). A differential test
(tests/integration/test_transforms_spark_differential.py) proves the types and the values
against a real Spark session.

This module holds the entry points (``check_expression``, ``check_filter``) and the
dispatch, which joins the function families.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from replicator.plan.expressions.date_functions import DateFunctions
from replicator.plan.expressions.errors import FUNCTIONS, ExpressionError
from replicator.plan.expressions.numeric_functions import NumericFunctions
from replicator.plan.expressions.operators import ARITHMETIC_OPERATORS
from replicator.plan.expressions.parsing import parse, parses_as_mysql
from replicator.plan.expressions.spark_types import BOOLEAN, NULL, SparkType, Typed, literal
from replicator.plan.expressions.string_functions import StringFunctions


def _by_name(columns: Mapping[str, SparkType] | None) -> dict[str, tuple[str, SparkType]] | None:
    return None if columns is None else {name.lower(): (name, t) for name, t in columns.items()}


def check_expression(text: str, columns: Mapping[str, SparkType] | None) -> SparkType:
    """``text`` over source columns of the given Spark types -> the Spark type of its value,
    or ExpressionError. ``columns`` None (validate, when the YAML does not say the table's
    columns) or a column of type ``ANY`` disables the checks that depend on them; plan
    checks again with every column's type."""
    return Checker(_by_name(columns)).check(parse(text)).type


FILTER_HINT = ("a filter is a Spark SQL condition over source columns, like computed columns: "
               "filter: \"status <> 'test' AND amount >= 10\" (docs/configuration.md#row-filters)")


def check_filter(text: str, columns: Mapping[str, SparkType] | None) -> SparkType:
    """A row filter: a Spark SQL condition (BOOLEAN) over source columns; only TRUE passes.

    Filters were MySQL predicates before this release; one that no longer parses or checks as
    Spark SQL gets a hint saying so (MySQL's XOR, LIKE's case-insensitivity and `||` as OR are
    gone: Spark compares strings by code point, case-sensitively)."""
    try:
        result = check_expression(text, columns)
        if result.kind not in ("boolean", "null", "any"):
            raise ExpressionError(f"the filter is {result}, not a condition", 0,
                                  hint="compare it: x = 1, x IS NOT NULL")
    except ExpressionError as exc:
        if parses_as_mysql(text):
            raise ExpressionError(
                f"{exc.message} (filters are Spark SQL now, not MySQL)", exc.offset,
                hint="rewrite the filter in Spark SQL: XOR -> (a AND NOT b) OR (NOT a AND b), "
                "`col` quoting stays, || means concatenation, string comparisons are "
                "case-sensitive (lower(x) = 'abc'); " + FILTER_HINT) from None
        raise
    return result


class Checker(StringFunctions, NumericFunctions, DateFunctions):
    """Spark SQL nodes -> their types: the dispatch over node types; the operators are
    ``operators.OperatorChecker``'s, each function family (``fn_<name>``) its own module's."""

    def check(self, node: Any) -> Typed:
        """The type of any node: one flat branch per sqlglot node type, in one place, so the
        syntax a computed column may use reads at a glance."""
        from sqlglot import exp

        if isinstance(node, exp.Paren):
            return self.check(node.this)
        if isinstance(node, exp.Column):
            return self.column(node)
        if isinstance(node, exp.Literal):
            return self.literal(node)
        if isinstance(node, exp.Boolean):
            return literal(bool(node.this), BOOLEAN)
        if isinstance(node, exp.Null):
            return literal(None, NULL)
        if isinstance(node, exp.Neg):
            return self.negate(node)
        if isinstance(node, exp.Not):
            self.boolean(node.this)
            return Typed(BOOLEAN)
        if isinstance(node, (exp.And, exp.Or)):
            return self.logic(node)
        if type(node).__name__ in ("EQ", "NEQ", "GT", "GTE", "LT", "LTE", "NullSafeEQ"):
            return self.comparison(node)
        if type(node).__name__ in ARITHMETIC_OPERATORS:
            return self.arithmetic(node, ARITHMETIC_OPERATORS[type(node).__name__])
        if isinstance(node, exp.Concat):  # adjacent string literals: 'a' 'b'
            return self.function_concat(node, [self.check(e) for e in node.expressions])
        if isinstance(node, exp.DPipe):
            return self.function_concat(node, [self.check(node.this), self.check(node.expression)])
        if isinstance(node, exp.Is):
            return self.is_(node)
        if isinstance(node, exp.In):
            return self.in_(node)
        if isinstance(node, exp.Between):
            low = exp.GTE(this=node.this, expression=node.args["low"])
            high = exp.LTE(this=node.this, expression=node.args["high"])
            return self.logic(exp.And(this=low, expression=high))
        if isinstance(node, exp.Like) and not node.args.get("escape"):
            return self.like(node)
        if isinstance(node, exp.Case):
            return self.case(node)
        if isinstance(node, exp.If):
            return self.conditional(node, [(node.this, node.args.get("true"))], node.args.get("false"))
        if isinstance(node, (exp.Cast, exp.TryCast)):
            return self.cast(node)
        if isinstance(node, exp.Trim):
            return self.trim(node)
        if isinstance(node, exp.Substring):
            args = [self.check(a) for a in (node.this, node.args.get("start"), node.args.get("length")) if a is not None]
            return self.fn_substring(node, args)
        if isinstance(node, (exp.Initcap, exp.Floor, exp.Ceil)):
            extra = node.args.get("decimals") or node.args.get("to")
            delimiters = node.args.get("expression") if isinstance(node, exp.Initcap) else None
            if node.this is None or extra is not None or (
                    delimiters is not None and delimiters.sql() != "' '"):
                raise self.error(node, f"{node.sql_name().lower()}() takes 1 argument here")
            handler = {exp.Initcap: self.fn_initcap, exp.Floor: self.fn_floor, exp.Ceil: self.fn_ceil}[type(node)]
            return handler(node, [self.check(node.this)])
        if isinstance(node, exp.Anonymous):
            name = str(node.this).lower()
            handler = getattr(self, f"fn_{name}", None)
            if name not in FUNCTIONS or handler is None:
                raise self.error(node, f"function {name}() is not supported in a computed column")
            return handler(node, [self.check(a) for a in node.expressions])
        if isinstance(node, (exp.CurrentDate, exp.CurrentTimestamp)):
            raise self.error(node, f"{node.sql()} is not supported: a computed column must give "
                             "the same value each time a row is replayed",
                             hint="use a source column, or the ts metadata column (metadata: [ts])")
        raise self.error(node, f"{node.sql(dialect='spark')!r} is not supported in a computed column")
