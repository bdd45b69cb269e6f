"""The checker's core: leaves (columns, literals), operators (logic, comparison, arithmetic
with Spark's result types, IS, IN, LIKE), CASE and IF, CAST and TRIM, the conditional
functions (coalesce, nvl, nullif, nvl2), and the argument checks every function family uses.

Spark 4's analyzer (ANSI mode, the default) gives the types: ``1.2`` is DECIMAL(2,1),
``int / int`` is DOUBLE, decimal arithmetic widens as Spark's does. What Spark refuses at
analysis is an ``ExpressionError`` with the offset of the offending part. Nothing is
evaluated: a row's value (and a row's error: division by zero, overflow, an invalid CAST) is
the engine's (``plan.transpile``), and so is the value of an expression over literals.
"""

from __future__ import annotations

import re
from decimal import Decimal
from typing import Any

from replicator.plan.expressions.casts import castable, parse_date, parse_timestamp
from replicator.plan.expressions.errors import ExpressionError
from replicator.plan.expressions.java_patterns import check_like
from replicator.plan.expressions.parsing import node_offset
from replicator.plan.expressions.spark_types import (
    ANY,
    BIGINT,
    BINARY,
    BOOLEAN,
    DATE,
    DOUBLE,
    INT,
    INT_MAX,
    LONG_MAX,
    MAX_PRECISION,
    NULL,
    STRING,
    TIMESTAMP,
    SparkType,
    Typed,
    adjusted_decimal,
    as_decimal_type,
    decimal,
    literal,
    wider_type,
)

ARITHMETIC_OPERATORS = {"Add": "+", "Sub": "-", "Mul": "*", "Div": "/", "Mod": "%", "IntDiv": "div"}


class OperatorChecker:
    """Spark SQL nodes -> their Spark types, for everything but named functions: columns,
    literals, operators, CASE, CAST, TRIM, and the argument checks every function family
    uses. ``compiler.Checker`` adds the dispatch and the function families."""

    def __init__(self, columns: dict[str, tuple[str, SparkType]] | None) -> None:
        self.columns = columns  # None: any column name goes, of type ANY

    def error(self, node: Any, message: str, hint: str | None = None) -> ExpressionError:
        return ExpressionError(message, node_offset(node), hint)

    def check(self, node: Any) -> Typed:
        """The type of any node: the dispatch is ``compiler.Checker``'s, which knows every
        function family."""
        raise NotImplementedError

    # leaves -------------------------------------------------------------------------------
    def column(self, node: Any) -> Typed:
        wanted = node.name.lower()
        if node.table:
            raise self.error(node, f"column {node.sql()!r}: write the column name alone",
                             hint="a computed column reads the row's own source columns")
        if self.columns is None:
            return Typed(ANY)
        if wanted not in self.columns:
            import difflib

            names = [n for n, _ in self.columns.values()]
            close = difflib.get_close_matches(node.name, names, n=1, cutoff=0.6)
            hint = (f"did you mean '{close[0]}'?" if close else
                    f"the table's source columns are: {', '.join(names)}")
            raise self.error(node, f"unknown column {node.name!r}", hint=hint)
        return Typed(self.columns[wanted][1])

    def literal(self, node: Any) -> Typed:
        if node.is_string:
            return literal(node.this, STRING)
        text = str(node.this)
        if re.fullmatch(r"\d+", text):
            number = int(text)
            if number <= INT_MAX:
                return literal(number, INT)
            if number <= LONG_MAX:
                return literal(number, BIGINT)
            return literal(Decimal(text), decimal(len(text), 0))
        if re.fullmatch(r"\d+[lL]", text):
            return literal(int(text[:-1]), BIGINT)
        if re.fullmatch(r"(\d+\.?\d*|\.\d+)[eE][+-]?\d+|[\d.]+[dD]", text):
            return literal(float(text.rstrip("dD")), DOUBLE)
        if re.fullmatch(r"\d+\.?\d*|\.\d+", text):
            value = Decimal(text)
            digits = value.as_tuple()
            scale = max(0, -int(digits.exponent))
            precision = max(len(digits.digits), scale)
            if precision > MAX_PRECISION:
                return literal(float(text), DOUBLE)
            return literal(value, decimal(max(precision, 1), scale))
        if re.fullmatch(r"[\d.]+[bB][dD]", text):
            value = Decimal(text[:-2])
            scale = max(0, -int(value.as_tuple().exponent))
            return literal(value, decimal(max(len(value.as_tuple().digits), scale), scale))
        raise self.error(node, f"literal {text!r} is not supported")

    # operators -----------------------------------------------------------------------------
    def boolean(self, node: Any) -> Typed:
        inner = self.check(node)
        if inner.type.kind not in ("boolean", "null", "any"):
            raise self.error(node, f"{node.sql(dialect='spark')} is {inner.type}, not a condition",
                             hint="compare it: x = 1, x IS NOT NULL")
        return inner

    def negate(self, node: Any) -> Typed:
        inner = self.check(node.this)
        t = inner.type
        if inner.literal and t.numeric:  # -5 is a literal to Spark's parser, not a negation
            return literal(-inner.value if inner.value is not None else None, t)
        if not (t.numeric or t.kind in ("null", "any")):
            raise self.error(node, f"cannot negate {t}")
        return Typed(t)

    def logic(self, node: Any) -> Typed:
        self.boolean(node.this)
        self.boolean(node.expression)
        return Typed(BOOLEAN)

    def comparable(self, node: Any, left: Typed, right: Typed) -> SparkType:
        """The common type both sides are compared in (Spark's implicit casts, our subset);
        a string literal compared with a DATE or TIMESTAMP must read as one."""
        lt, rt = left.type, right.type
        if "any" in (lt.kind, rt.kind) or "null" in (lt.kind, rt.kind) or lt == rt:
            return lt if lt.kind not in ("null", "any") else rt
        if lt.numeric and rt.numeric:
            return wider_type(lt, rt, node_offset(node), "the comparison")
        for a, b in ((left, right), (right, left)):
            if a.type.kind == "string" and a.literal and b.type.kind in ("date", "timestamp"):
                parse_ = parse_date if b.type.kind == "date" else parse_timestamp
                if a.value is not None and parse_(a.value) is None:
                    raise self.error(node, f"{a.value!r} is not a {b.type.kind}",
                                     hint="write dates as 'yyyy-MM-dd' and timestamps as 'yyyy-MM-dd HH:mm:ss'")
                return b.type
        if {lt.kind, rt.kind} == {"date", "timestamp"}:
            return TIMESTAMP
        raise self.error(node, f"comparison of {lt} with {rt}",
                         hint="CAST one side so both have one type, e.g. CAST(x AS STRING)")

    def comparison(self, node: Any) -> Typed:
        self.comparable(node, self.check(node.this), self.check(node.expression))
        return Typed(BOOLEAN)

    def arithmetic(self, node: Any, op: str) -> Typed:
        left, right = self.check(node.this), self.check(node.expression)
        lt, rt = left.type, right.type
        offset = node_offset(node)
        for side in (lt, rt):
            if not (side.numeric or side.kind in ("null", "any")):
                raise ExpressionError(f"arithmetic ({op}) on {side}", offset,
                                      hint="CAST the operand to a number, or use concat() for strings")
        if "any" in (lt.kind, rt.kind):
            return Typed(ANY)
        if lt.kind == "null" and rt.kind == "null":
            lt = rt = INT
        lt = rt if lt.kind == "null" else lt
        rt = lt if rt.kind == "null" else rt
        if op == "div":
            if not (lt.integral and rt.integral):
                raise ExpressionError("div needs integer operands", offset,
                                      hint="CAST the operands to BIGINT, or use / and floor()")
            return Typed(BIGINT)
        if op == "/" and lt.integral and rt.integral:
            return Typed(DOUBLE)
        if "double" in (lt.kind, rt.kind):
            return Typed(DOUBLE)
        if lt.integral and rt.integral:
            return Typed(BIGINT if "bigint" in (lt.kind, rt.kind) else INT)
        a = as_decimal_type(Typed(lt, left.literal, left.value))
        b = as_decimal_type(Typed(rt, right.literal, right.value))
        p1, s1, p2, s2 = a.precision, a.scale, b.precision, b.scale
        if op in ("+", "-"):
            scale = max(s1, s2)
            return Typed(adjusted_decimal(max(p1 - s1, p2 - s2) + scale + 1, scale))
        if op == "*":
            return Typed(adjusted_decimal(p1 + p2 + 1, s1 + s2))
        if op == "/":
            scale = max(6, s1 + p2 + 1)
            return Typed(adjusted_decimal(p1 - s1 + s2 + scale, scale))
        scale = max(s1, s2)  # %
        return Typed(adjusted_decimal(min(p1 - s1, p2 - s2) + scale, scale))

    def is_(self, node: Any) -> Typed:
        from sqlglot import exp

        self.check(node.this)
        target = node.expression
        if isinstance(target, exp.Null):
            return Typed(BOOLEAN)
        if isinstance(target, exp.Boolean):
            self.boolean(node.this)
            return Typed(BOOLEAN)
        raise self.error(node, f"IS {target.sql()} is not supported")

    def in_(self, node: Any) -> Typed:
        if node.args.get("query") or node.args.get("unnest") or node.args.get("field"):
            raise self.error(node, "IN (SELECT ...) is not supported in a computed column")
        from sqlglot import exp

        for option in node.expressions:
            self.comparison(exp.EQ(this=node.this, expression=option))
        return Typed(BOOLEAN)

    def like(self, node: Any) -> Typed:
        inner = self.check(node.this)
        pattern = self.check(node.expression)
        if not pattern.literal or pattern.type.kind != "string":
            raise self.error(node.expression, "LIKE needs a string literal pattern")
        if inner.type.kind not in ("string", "null", "any"):
            raise self.error(node, f"LIKE on {inner.type}", hint="CAST(x AS STRING) LIKE '...'")
        check_like(pattern.value, self.error(node.expression, "bad LIKE escape"))
        return Typed(BOOLEAN)

    def conditional(self, node: Any, branches: list[tuple[Any, Any]], default: Any) -> Typed:
        for condition, _ in branches:
            self.boolean(condition)
        values = [self.check(value) for _, value in branches]
        values.append(self.check(default) if default is not None else Typed(NULL))
        return Typed(self.common(node, values, "CASE/IF"))

    def common(self, node: Any, args: list[Typed], what: str) -> SparkType:
        result = NULL
        for arg in args:
            result = wider_type(result, arg.type, node_offset(node), what)
        return result

    def case(self, node: Any) -> Typed:
        from sqlglot import exp

        subject = node.this
        branches = []
        for when in node.args.get("ifs") or []:
            condition = when.this if subject is None else exp.EQ(this=subject, expression=when.this)
            branches.append((condition, when.args.get("true")))
        return self.conditional(node, branches, node.args.get("default"))

    def cast(self, node: Any) -> Typed:
        inner = self.check(node.this)
        target = self.spark_type(node.args["to"])
        if not castable(inner.type, target):
            raise self.error(node, f"cannot CAST {inner.type} to {target}")
        if inner.literal and inner.type.kind == "string" and target.kind in ("date", "timestamp") \
                and inner.value is not None:
            # DATE '2024-01-01' (a typed literal): read as Spark reads it, or refused here
            parse_ = parse_date if target.kind == "date" else parse_timestamp
            value = parse_(inner.value)
            if value is None:
                raise self.error(node, f"{inner.value!r} is not a {target.kind}",
                                 hint="write dates as 'yyyy-MM-dd' and timestamps as 'yyyy-MM-dd HH:mm:ss'")
            return literal(value, target)
        return Typed(target)

    def spark_type(self, node: Any) -> SparkType:
        text = node.sql(dialect="spark").lower().replace(" ", "")
        simple = {"int": INT, "integer": INT, "bigint": BIGINT, "long": BIGINT, "double": DOUBLE,
                  "string": STRING, "date": DATE, "timestamp": TIMESTAMP, "boolean": BOOLEAN,
                  "binary": BINARY, "decimal": decimal(10, 0)}
        if text in simple:
            return simple[text]
        match = re.fullmatch(r"(?:decimal|numeric|dec)\((\d+)(?:,(\d+))?\)", text)
        if match:
            precision, scale = int(match.group(1)), int(match.group(2) or 0)
            if not 1 <= precision <= MAX_PRECISION or scale > precision:
                raise self.error(node, f"DECIMAL({precision},{scale}) is not a Spark type",
                                 hint="precision 1..38, scale <= precision")
            return decimal(precision, scale)
        raise self.error(node, f"CAST to {text} is not supported",
                         hint="CAST to INT, BIGINT, DOUBLE, DECIMAL(p,s), STRING, DATE, TIMESTAMP, "
                         "BOOLEAN or BINARY")

    def trim(self, node: Any) -> Typed:
        self.stringy(node.this, self.check(node.this))
        chars = node.args.get("expression")
        if chars is not None:
            self.stringy(chars, self.check(chars))
        return Typed(STRING)

    # argument helpers --------------------------------------------------------------------------
    def arity(self, node: Any, args: list[Typed], low: int, high: int | None = None) -> None:
        high = low if high is None else high
        if not low <= len(args) <= high:
            name = str(node.this).lower() if hasattr(node, "this") and isinstance(node.this, str) else "function"
            wanted = str(low) if low == high else f"{low} to {high}"
            raise self.error(node, f"{name}() takes {wanted} arguments, not {len(args)}")

    def stringy(self, node: Any, arg: Typed) -> Typed:
        """A string argument; other scalar types are cast to STRING as Spark does implicitly."""
        if arg.type.kind == "binary":
            raise self.error(node, "a BINARY value where a string is expected",
                             hint="CAST(x AS STRING) decodes it as UTF-8")
        return arg if arg.type.kind in ("string", "null", "any") else Typed(STRING)

    def integer(self, node: Any, arg: Typed, what: str) -> Typed:
        if arg.type.kind in ("int", "bigint", "null", "any"):
            return arg  # a BIGINT is cast to INT by the engine (an overflow is its error)
        raise self.error(node, f"{what} must be an integer, not {arg.type}")

    def constant_int(self, node: Any, arg: Typed, what: str) -> int:
        if not arg.literal or not arg.type.integral:
            raise self.error(node, f"{what} must be an integer literal")
        return int(arg.value)

    # conditional functions: CASE in function form ------------------------------------------
    def fn_coalesce(self, node: Any, args: list[Typed]) -> Typed:
        if not args:
            raise self.error(node, "coalesce() needs arguments")
        return Typed(self.common(node, args, "coalesce"))

    def fn_nvl(self, node: Any, args: list[Typed]) -> Typed:
        self.arity(node, args, 2)
        return self.fn_coalesce(node, args)

    fn_ifnull = fn_nvl

    def fn_nullif(self, node: Any, args: list[Typed]) -> Typed:
        self.arity(node, args, 2)
        self.comparable(node, args[0], args[1])
        return Typed(args[0].type)

    def fn_nvl2(self, node: Any, args: list[Typed]) -> Typed:
        self.arity(node, args, 3)
        return Typed(wider_type(args[1].type, args[2].type, node_offset(node), "nvl2"))

    def fn_if(self, node: Any, args: list[Typed]) -> Typed:  # pragma: no cover - parsed as exp.If
        raise self.error(node, "if() takes 3 arguments")
