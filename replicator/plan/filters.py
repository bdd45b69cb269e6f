"""Row filters: a MySQL-flavoured predicate over source columns, compiled to a Python function.

``filter: "status <> 'deleted' AND amount >= 10"`` in the YAML. The predicate is parsed once
with sqlglot (MySQL dialect) and compiled to closures over a row image, so staging can
evaluate it per change without a database. Semantics follow MySQL where they matter:

- three-valued logic: a comparison with NULL is unknown, and only TRUE passes the filter;
- strings compare case-insensitively (MySQL's default ``*_ci`` collations); LIKE too;
- a string compared with a number, date or datetime is converted to that type first.

Supported: column names, literals, ``= <> != < <= > >= <=>``, ``AND OR NOT XOR``, ``IS [NOT]
NULL``, ``IS [NOT] TRUE/FALSE``, ``[NOT] IN (...)``, ``[NOT] BETWEEN``, ``[NOT] LIKE``,
``+ - * /``, ``LOWER UPPER LENGTH COALESCE``. Anything else is a FilterError at plan time.
"""

from __future__ import annotations

import datetime as dt
import re
from collections.abc import Callable, Iterable
from decimal import Decimal, InvalidOperation
from typing import Any

from replicator.errors import PlanError

Row = dict[str, Any]
Compiled = Callable[[Row], Any]


class FilterError(PlanError):
    """``offset``: where in the filter's text the problem is (0-based), for ``validate``."""

    def __init__(self, message: str, offset: int = 0, *, unknown_column: bool = False,
                 syntax: bool = False) -> None:
        super().__init__(
            message,
            hint="write the filter as a MySQL predicate over source columns, e.g. "
            "filter: \"status <> 'deleted' AND amount >= 10\"",
        )
        self.offset = offset
        self.unknown_column = unknown_column
        self.syntax = syntax


def _at(node: Any) -> int:
    from replicator.plan.expressions import _node_offset

    return _node_offset(node)


def compile_filter(text: str, source_columns: Iterable[str] | None) -> Callable[[Row], bool]:
    """``text`` -> a function telling whether a row image passes (TRUE, not NULL/FALSE).

    ``source_columns`` None: any column name is accepted (``validate`` without the table's
    columns checks syntax and functions only)."""
    import sqlglot
    from sqlglot.errors import ParseError, TokenError

    from replicator.plan.expressions import _offset, parse_message

    try:
        tree = sqlglot.parse_one(text, read="mysql")
    except ParseError as exc:
        error = exc.errors[0] if exc.errors else {}
        raise FilterError(f"cannot parse: {parse_message(error.get('description') or str(exc))}",
                          _offset(text, error.get("line"), error.get("col")), syntax=True) from None
    except TokenError as exc:
        raise FilterError(f"cannot parse: {exc}", 0, syntax=True) from None
    columns = None if source_columns is None else {name.lower(): name for name in source_columns}
    compiled = _Compiler(columns).compile(tree)
    return lambda row: compiled(row) is True


def _truth(value: Any) -> bool | None:
    if value is None:
        return None
    if isinstance(value, str):
        value = _to_number(value)
    return bool(value)


def _to_number(text: str) -> Decimal:
    match = re.match(r"^\s*[-+]?(\d+\.?\d*|\.\d+)([eE][-+]?\d+)?", text)
    try:
        return Decimal(match.group(0)) if match else Decimal(0)  # MySQL: '12abc' -> 12
    except InvalidOperation:
        return Decimal(0)


def _coerce(left: Any, right: Any) -> tuple[Any, Any]:
    """MySQL's implicit conversions for a comparison, for the cases filters meet."""
    if isinstance(left, str) and not isinstance(right, str):
        right, left = _coerce(right, left)
        return left, right
    if isinstance(right, str) and not isinstance(left, str):
        if isinstance(left, dt.datetime):
            parsed = dt.datetime.fromisoformat(right)
            if left.tzinfo is not None and parsed.tzinfo is None:
                parsed = parsed.replace(tzinfo=dt.UTC)
            return left, parsed
        if isinstance(left, dt.date):
            return left, dt.date.fromisoformat(right[:10])
        if isinstance(left, (int, float, Decimal)) and not isinstance(left, bool):
            return left, _to_number(right)
        if isinstance(left, bytes):
            return left, right.encode()
    if isinstance(left, str) and isinstance(right, str):
        return left.casefold(), right.casefold()
    if isinstance(left, float) and isinstance(right, Decimal):
        return Decimal(repr(left)), right
    if isinstance(left, Decimal) and isinstance(right, float):
        return left, Decimal(repr(right))
    return left, right


def _compare(op: Callable[[Any, Any], bool]) -> Callable[[Any, Any], Any]:
    def compare(left: Any, right: Any) -> Any:
        if left is None or right is None:
            return None
        left, right = _coerce(left, right)
        return op(left, right)

    return compare


def like_regex(
    pattern: str, *, ignore_case: bool, bad_escape: Exception | None = None
) -> re.Pattern[str]:
    """A SQL LIKE pattern as a regex for ``.match``: ``%`` any run, ``_`` one character,
    ``\\`` escapes. MySQL (filters, ``ignore_case`` for ``*_ci`` collations) takes any escaped
    character literally; Spark (computed columns) accepts only ``\\_ \\% \\\\`` and a pattern
    ending in a lone ``\\`` is an error: pass ``bad_escape`` to raise it then."""
    out = []
    escaped = False
    for char in pattern:
        if escaped:
            if bad_escape is not None and char not in "_%\\":
                raise bad_escape
            out.append(re.escape(char))
            escaped = False
        elif char == "\\":
            escaped = True
        elif char == "%":
            out.append(".*")
        elif char == "_":
            out.append(".")
        else:
            out.append(re.escape(char))
    if escaped and bad_escape is not None:
        raise bad_escape
    # \Z, not $: '$' also matches before a trailing newline ('a\n' LIKE 'a' is false).
    return re.compile("".join(out) + r"\Z", re.DOTALL | (re.IGNORECASE if ignore_case else 0))


def _arith(op: Callable[[Any, Any], Any]) -> Callable[[Any, Any], Any]:
    def apply(left: Any, right: Any) -> Any:
        if left is None or right is None:
            return None
        if isinstance(left, str):
            left = _to_number(left)
        if isinstance(right, str):
            right = _to_number(right)
        if isinstance(left, float) or isinstance(right, float):
            return op(float(left), float(right))
        try:
            return op(Decimal(left), Decimal(right))
        except (InvalidOperation, ZeroDivisionError):
            return None  # MySQL: x / 0 is NULL

    return apply


class _Compiler:
    def __init__(self, columns: dict[str, str] | None) -> None:
        self.columns = columns

    def compile(self, node: Any) -> Compiled:
        from sqlglot import exp

        if isinstance(node, exp.Paren):
            return self.compile(node.this)
        if isinstance(node, exp.Column):
            wanted = node.name.lower()
            if self.columns is None and not node.table:
                name = node.name
                return lambda row: row.get(name)
            if node.table or self.columns is None or wanted not in self.columns:
                known = ", ".join(self.columns.values()) if self.columns else ""
                raise FilterError(
                    f"unknown column {node.sql(dialect='mysql')!r}; source columns are: {known}",
                    _at(node), unknown_column=True,
                )
            name = self.columns[wanted]
            return lambda row: row.get(name)
        if isinstance(node, exp.Literal):
            if node.is_string:
                text = node.this
                return lambda row: text
            number = Decimal(node.this)
            value = int(number) if number == number.to_integral_value() and "." not in node.this else number
            return lambda row: value
        if isinstance(node, exp.Boolean):
            flag = node.this
            return lambda row: flag
        if isinstance(node, exp.Null):
            return lambda row: None
        if isinstance(node, exp.Neg):
            inner = self.compile(node.this)
            return lambda row: None if (v := inner(row)) is None else -v
        if isinstance(node, exp.Not):
            inner = self.compile(node.this)
            return lambda row: None if (v := _truth(inner(row))) is None else not v
        if isinstance(node, (exp.And, exp.Or, exp.Xor)):
            left, right = self.compile(node.left), self.compile(node.right)
            kind = type(node)
            return lambda row: _logic(kind, _truth(left(row)), _truth(right(row)))
        comparisons: dict[type, Callable[[Any, Any], bool]] = {
            exp.EQ: lambda a, b: a == b,
            exp.NEQ: lambda a, b: a != b,
            exp.GT: lambda a, b: a > b,
            exp.GTE: lambda a, b: a >= b,
            exp.LT: lambda a, b: a < b,
            exp.LTE: lambda a, b: a <= b,
        }
        if type(node) in comparisons:
            compare = _compare(comparisons[type(node)])
            left, right = self.compile(node.left), self.compile(node.right)
            return lambda row: compare(left(row), right(row))
        if isinstance(node, exp.NullSafeEQ):
            equal = _compare(lambda a, b: a == b)
            left, right = self.compile(node.left), self.compile(node.right)

            def null_safe(row: Row) -> bool:
                a, b = left(row), right(row)
                return (a is None and b is None) or (a is not None and b is not None and equal(a, b))

            return null_safe
        if isinstance(node, exp.Is):
            inner = self.compile(node.this)
            target = node.expression
            if isinstance(target, exp.Null):
                return lambda row: inner(row) is None
            if isinstance(target, exp.Boolean):
                flag = target.this
                return lambda row: _truth(inner(row)) is flag
            raise FilterError(f"unsupported IS {target.sql(dialect='mysql')}", _at(node))
        if isinstance(node, exp.In):
            if node.args.get("query") or node.args.get("unnest"):
                raise FilterError("IN (SELECT ...) is not supported in a filter", _at(node))
            inner = self.compile(node.this)
            options = [self.compile(option) for option in node.expressions]
            equal = _compare(lambda a, b: a == b)

            def member(row: Row) -> bool | None:
                value = inner(row)
                if value is None:
                    return None
                results = [equal(value, option(row)) for option in options]
                if True in results:
                    return True
                return None if None in results else False

            return member
        if isinstance(node, exp.Between):
            inner, low, high = (self.compile(node.this), self.compile(node.args["low"]),
                                self.compile(node.args["high"]))
            gte, lte = _compare(lambda a, b: a >= b), _compare(lambda a, b: a <= b)
            return lambda row: _logic(exp.And, gte(inner(row), low(row)), lte(inner(row), high(row)))
        if isinstance(node, (exp.Like, exp.ILike)):
            inner = self.compile(node.this)
            if not isinstance(node.expression, exp.Literal) or not node.expression.is_string:
                raise FilterError("LIKE needs a string literal pattern", _at(node))
            regex = like_regex(node.expression.this, ignore_case=True)
            return lambda row: None if (v := inner(row)) is None else bool(regex.match(str(v)))
        arithmetic: dict[type, Callable[[Any, Any], Any]] = {
            exp.Add: lambda a, b: a + b,
            exp.Sub: lambda a, b: a - b,
            exp.Mul: lambda a, b: a * b,
            exp.Div: lambda a, b: a / b,
        }
        if type(node) in arithmetic:
            apply = _arith(arithmetic[type(node)])
            left, right = self.compile(node.left), self.compile(node.right)
            return lambda row: apply(left(row), right(row))
        if isinstance(node, (exp.Lower, exp.Upper)):
            inner = self.compile(node.this)
            method = str.lower if isinstance(node, exp.Lower) else str.upper
            return lambda row: None if (v := inner(row)) is None else method(str(v))
        if isinstance(node, exp.Length):
            inner = self.compile(node.this)
            # MySQL LENGTH counts bytes (CHAR_LENGTH counts characters).
            return lambda row: None if (v := inner(row)) is None else len(
                v if isinstance(v, bytes) else str(v).encode()
            )
        if isinstance(node, exp.Coalesce):
            parts = [self.compile(node.this)] + [self.compile(e) for e in node.expressions]
            return lambda row: next((v for p in parts if (v := p(row)) is not None), None)
        raise FilterError(f"unsupported expression {node.sql(dialect='mysql')!r} in a filter", _at(node))


def _logic(kind: type, left: bool | None, right: bool | None) -> bool | None:
    from sqlglot import exp

    if kind is exp.And:
        if left is False or right is False:
            return False
        return None if left is None or right is None else True
    if kind is exp.Or:
        if left is True or right is True:
            return True
        return None if left is None or right is None else False
    if left is None or right is None:  # XOR
        return None
    return left != right
