"""Parsing an expression: the sqlglot tree (Spark's grammar, function names kept as written),
parse errors in words a user of SQL reads, and where in the text a node starts (the offset an
``ExpressionError`` reports).
"""

from __future__ import annotations

import re
from typing import Any

from replicator.plan.expressions.errors import ExpressionError


def _dialect() -> Any:
    """Spark's grammar with no function table: every call keeps the name it was written with
    (sqlglot's own normalisation rewrites to_date's format, IFNULL, ... lossily)."""
    global _RAW
    if _RAW is None:
        from sqlglot.dialects.spark import Spark

        class RawSpark(Spark):
            class Parser(Spark.Parser):
                FUNCTIONS: dict = {}  # noqa: RUF012 - sqlglot's own class attribute

        _RAW = RawSpark
    return _RAW


_RAW: Any = None


def parse(text: str) -> Any:
    """The sqlglot tree of an expression, or ExpressionError with the offset of the problem."""
    import sqlglot
    from sqlglot.errors import ParseError, TokenError

    try:
        trees = sqlglot.parse(text, read=_dialect())
    except ParseError as exc:
        error = exc.errors[0] if exc.errors else {}
        offset = _offset(text, error.get("line"), error.get("col"))
        description = parse_message(error.get("description") or str(exc))
        raise ExpressionError(f"syntax error: {description}", offset,
                              hint="write one Spark SQL expression, e.g. round(amount * 1.2, 2)") from None
    except TokenError as exc:
        raise ExpressionError(f"syntax error: {exc}", 0,
                              hint="check the quotes: strings are 'single-quoted'") from None
    trees = [t for t in trees if t is not None]
    if len(trees) != 1:
        raise ExpressionError("expected exactly one expression", 0,
                              hint="write one Spark SQL expression, e.g. round(amount * 1.2, 2)")
    from sqlglot import exp

    tree = trees[0]
    if isinstance(tree, (exp.Select, exp.Query, exp.Command)) or tree.find(exp.Select):
        raise ExpressionError("a computed column is an expression, not a query", node_offset(tree))
    return tree


_OPERATORS = {"Add": "+", "Sub": "-", "Mul": "*", "Div": "/", "Mod": "%", "EQ": "=", "NEQ": "<>",
              "GT": ">", "GTE": ">=", "LT": "<", "LTE": "<=", "And": "AND", "Or": "OR"}


def parse_message(description: str) -> str:
    """sqlglot's parse error in words a user of SQL reads."""
    match = re.search(r"Required keyword: '(\w+)' missing for <class '[\w.]*?(\w+)'>", description)
    if match:
        what = _OPERATORS.get(match.group(2), match.group(2).upper())
        return f"{what} is missing an operand" if match.group(2) in _OPERATORS else \
            f"{what} is incomplete ({match.group(1)} missing)"
    return description.split(". Line ")[0]


def _offset(text: str, line: int | None, col: int | None) -> int:
    if not line or not col:
        return 0
    lines = text.split("\n")
    before = sum(len(part) + 1 for part in lines[: line - 1])
    return max(0, min(len(text), before + col - 1))


def node_offset(node: Any) -> int:
    """Where a node starts in the text (sqlglot keeps positions on identifiers, literals and
    function names; an operator starts where its left-most such descendant does)."""
    best: int | None = None
    for child in node.walk():
        meta = child.meta if hasattr(child, "meta") else {}
        start = meta.get("start")
        if start is not None:
            name = getattr(child, "name", "")
            # a function's meta points at its name's end (start..end of the name token)
            best = start if best is None else min(best, start)
            del name
    return best or 0


def referenced_columns(text: str) -> list[str]:
    from sqlglot import exp

    return [c.name for c in parse(text).find_all(exp.Column)]


def parses_as_mysql(text: str) -> bool:
    """Whether ``text`` reads as MySQL (the filter dialect before this release)."""
    import sqlglot
    from sqlglot.errors import ParseError, TokenError

    try:
        sqlglot.parse_one(text, read="mysql")
    except (ParseError, TokenError):
        return False
    return True
