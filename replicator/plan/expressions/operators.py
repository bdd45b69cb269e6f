"""The compiler's core: leaves (columns, literals), operators (logic, comparison, arithmetic
with Spark's result types, IS, IN, LIKE), CASE and IF, CAST and TRIM, the conditional
functions (coalesce, nvl, nullif, nvl2), and the argument checks every function family uses.

Spark 4's semantics (ANSI mode, the default): the types of Spark's analyzer (``1.2`` is
DECIMAL(2,1), ``int / int`` is DOUBLE, decimal arithmetic widens as Spark's does), errors
where Spark raises (division by zero, integer and decimal overflow, an invalid CAST) and NULL
where Spark returns NULL.
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable
from decimal import Decimal
from typing import Any

from replicator.plan.expressions.casts import cast_function, castable, parse_date, parse_timestamp
from replicator.plan.expressions.errors import EvaluationError, ExpressionError, fail_evaluation
from replicator.plan.expressions.java_patterns import like_regex
from replicator.plan.expressions.parsing import node_offset
from replicator.plan.expressions.spark_types import (
    ANY,
    BIGINT,
    BINARY,
    BOOLEAN,
    DATE,
    DECIMAL_CONTEXT,
    DOUBLE,
    INT,
    INT_MAX,
    INT_MIN,
    LONG_MAX,
    MAX_PRECISION,
    NULL,
    STRING,
    TIMESTAMP,
    Compiled,
    Fn,
    Row,
    SparkType,
    adjusted_decimal,
    as_decimal_type,
    check_int,
    compiled_constant,
    decimal,
    double_order_key,
    fit_decimal,
    identity,
    wider_type,
)

ARITHMETIC_OPERATORS = {"Add": "+", "Sub": "-", "Mul": "*", "Div": "/", "Mod": "%", "IntDiv": "div"}


class OperatorCompiler:
    """Spark SQL nodes -> closures over a row, for everything but named functions: columns,
    literals, operators, CASE, CAST, TRIM, and the argument checks every function family
    uses. ``compiler.Compiler`` adds the dispatch and the function families."""

    def __init__(self, columns: dict[str, tuple[str, SparkType]] | None) -> None:
        self.columns = columns  # None: any column name goes, of type ANY

    def error(self, node: Any, message: str, hint: str | None = None) -> ExpressionError:
        return ExpressionError(message, node_offset(node), hint)


    def compile(self, node: Any) -> Compiled:
        """The compiled form of any node: the dispatch is ``compiler.Compiler``'s, which knows
        every function family."""
        raise NotImplementedError

    # leaves -------------------------------------------------------------------------------
    def column(self, node: Any) -> Compiled:
        wanted = node.name.lower()
        if node.table:
            raise self.error(node, f"column {node.sql()!r}: write the column name alone",
                             hint="a computed column reads the row's own source columns")
        if self.columns is None:
            name = node.name
            return Compiled(lambda row: row.get(name), ANY)
        if wanted not in self.columns:
            import difflib

            names = [n for n, _ in self.columns.values()]
            close = difflib.get_close_matches(node.name, names, n=1, cutoff=0.6)
            hint = (f"did you mean '{close[0]}'?" if close else
                    f"the table's source columns are: {', '.join(names)}")
            raise self.error(node, f"unknown column {node.name!r}", hint=hint)
        name, type_ = self.columns[wanted]
        return Compiled(lambda row: row.get(name), type_)
    def literal(self, node: Any) -> Compiled:
        if node.is_string:
            return compiled_constant(node.this, STRING)
        text = str(node.this)
        if re.fullmatch(r"\d+", text):
            number = int(text)
            if number <= INT_MAX:
                return compiled_constant(number, INT)
            if number <= LONG_MAX:
                return compiled_constant(number, BIGINT)
            value = Decimal(text)
            return compiled_constant(value, decimal(len(text), 0))
        if re.fullmatch(r"\d+[lL]", text):
            return compiled_constant(int(text[:-1]), BIGINT)
        if re.fullmatch(r"(\d+\.?\d*|\.\d+)[eE][+-]?\d+|[\d.]+[dD]", text):
            return compiled_constant(float(text.rstrip("dD")), DOUBLE)
        if re.fullmatch(r"\d+\.?\d*|\.\d+", text):
            value = Decimal(text)
            digits = value.as_tuple()
            scale = max(0, -int(digits.exponent))
            precision = max(len(digits.digits), scale)
            if precision > MAX_PRECISION:
                return compiled_constant(float(text), DOUBLE)
            return compiled_constant(value, decimal(max(precision, 1), scale))
        if re.fullmatch(r"[\d.]+[bB][dD]", text):
            value = Decimal(text[:-2])
            scale = max(0, -int(value.as_tuple().exponent))
            return compiled_constant(value, decimal(max(len(value.as_tuple().digits), scale), scale))
        raise self.error(node, f"literal {text!r} is not supported")

    # operators -----------------------------------------------------------------------------
    def boolean(self, node: Any) -> Compiled:
        inner = self.compile(node)
        if inner.type.kind not in ("boolean", "null", "any"):
            raise self.error(node, f"{node.sql(dialect='spark')} is {inner.type}, not a condition",
                             hint="compare it: x = 1, x IS NOT NULL")
        return inner
    def negate(self, node: Any) -> Compiled:
        inner = self.compile(node.this)
        t = inner.type
        if inner.constant and t.kind in ("int", "bigint", "decimal", "double"):
            value = -inner.value if inner.value is not None else None
            if t.kind == "decimal" and node.this.is_number:
                return compiled_constant(value, t)
            if t.integral and value is not None and value < INT_MIN and t.kind == "int":
                return compiled_constant(value, BIGINT)
            return compiled_constant(value, t)
        if not (t.numeric or t.kind in ("null", "any")):
            raise self.error(node, f"cannot negate {t}")

        def negated(row: Row) -> Any:
            v = inner(row)
            if v is None:
                return None
            result = -v
            if t.integral:
                check_int(result, t)
            return result

        return Compiled(negated, t)
    def logic(self, node: Any) -> Compiled:
        from sqlglot import exp

        left, right = self.boolean(node.this), self.boolean(node.expression)
        if isinstance(node, exp.And):
            def both(row: Row) -> Any:
                a = left(row)
                if a is False:
                    return False
                b = right(row)
                if b is False:
                    return False
                return None if a is None or b is None else True

            return Compiled(both, BOOLEAN)

        def either(row: Row) -> Any:
            a = left(row)
            if a is True:
                return True
            b = right(row)
            if b is True:
                return True
            return None if a is None or b is None else False

        return Compiled(either, BOOLEAN)
    def comparable(self, node: Any, left: Compiled, right: Compiled) -> tuple[Compiled, Compiled]:
        """Both sides in one type (Spark's implicit casts for comparisons, our subset)."""
        lt, rt = left.type, right.type
        if "any" in (lt.kind, rt.kind) or "null" in (lt.kind, rt.kind) or lt == rt:
            return left, right
        if lt.numeric and rt.numeric:
            common = wider_type(lt, rt, node_offset(node), "the comparison")
            return self.coerce(left, common), self.coerce(right, common)
        for a, b in ((left, right), (right, left)):
            if a.type.kind == "string" and a.constant and b.type.kind in ("date", "timestamp"):
                target = b.type
                parse_ = parse_date if target.kind == "date" else parse_timestamp
                parsed = parse_(a.value) if a.value is not None else None
                if a.value is not None and parsed is None:
                    raise self.error(node, f"{a.value!r} is not a {target.kind}",
                                     hint="write dates as 'yyyy-MM-dd' and timestamps as 'yyyy-MM-dd HH:mm:ss'")
                converted = compiled_constant(parsed, target)
                return (converted, b) if a is left else (b, converted)
        if {lt.kind, rt.kind} == {"date", "timestamp"}:
            return self.coerce(left, TIMESTAMP), self.coerce(right, TIMESTAMP)
        raise self.error(node, f"comparison of {lt} with {rt}",
                         hint="CAST one side so both have one type, e.g. CAST(x AS STRING)")
    def coerce(self, node: Compiled, target: SparkType) -> Compiled:
        if node.type == target or "any" in (node.type.kind, target.kind) or node.type.kind == "null":
            # "any": a column whose type validate does not know (no source_type, no catalog);
            # the plan, built from the catalog, checks the expression again with it.
            return node
        convert = cast_function(node.type, target, safe=False)
        if node.constant:
            return compiled_constant(convert(node.value), target)
        fn = node.fn
        return Compiled(lambda row: convert(fn(row)), target)
    def comparison(self, node: Any) -> Compiled:
        left, right = self.comparable(node, self.compile(node.this), self.compile(node.expression))
        if left.type.kind == "double" or right.type.kind == "double":
            key: Callable[[Any], Any] = double_order_key
        else:
            key = identity
        name = type(node).__name__
        ops: dict[str, Callable[[Any, Any], bool]] = {
            "EQ": lambda a, b: a == b, "NEQ": lambda a, b: a != b, "GT": lambda a, b: a > b,
            "GTE": lambda a, b: a >= b, "LT": lambda a, b: a < b, "LTE": lambda a, b: a <= b,
        }
        if name == "NullSafeEQ":
            def null_safe(row: Row) -> bool:
                a, b = left(row), right(row)
                if a is None or b is None:
                    return a is None and b is None
                return key(a) == key(b)

            return Compiled(null_safe, BOOLEAN)
        op = ops[name]

        def compare(row: Row) -> Any:
            a, b = left(row), right(row)
            if a is None or b is None:
                return None
            return op(key(a), key(b))

        return Compiled(compare, BOOLEAN)
    def arithmetic(self, node: Any, op: str) -> Compiled:
        left, right = self.compile(node.this), self.compile(node.expression)
        lt, rt = left.type, right.type
        offset = node_offset(node)
        for side in (lt, rt):
            if not (side.numeric or side.kind in ("null", "any")):
                raise ExpressionError(f"arithmetic ({op}) on {side}", offset,
                                      hint="CAST the operand to a number, or use concat() for strings")
        if "any" in (lt.kind, rt.kind):
            return Compiled(lambda row: None, ANY)
        if lt.kind == "null" and rt.kind == "null":
            lt = rt = INT
        lt = rt if lt.kind == "null" else lt
        rt = lt if rt.kind == "null" else rt
        if op == "div":
            if not (lt.integral and rt.integral):
                raise ExpressionError("div needs integer operands", offset,
                                      hint="CAST the operands to BIGINT, or use / and floor()")

            def int_div(row: Row) -> Any:
                a, b = left(row), right(row)
                if a is None or b is None:
                    return None
                if b == 0:
                    fail_evaluation("DIVIDE_BY_ZERO", "Division by zero")
                quotient = abs(a) // abs(b) * (1 if (a >= 0) == (b >= 0) else -1)
                return check_int(quotient, BIGINT)

            return Compiled(int_div, BIGINT)
        if op == "/" and lt.integral and rt.integral:
            lt = rt = DOUBLE
            left, right = self.coerce(left, DOUBLE), self.coerce(right, DOUBLE)
        if "double" in (lt.kind, rt.kind):
            left, right = self.coerce(left, DOUBLE), self.coerce(right, DOUBLE)
            return Compiled(_double_op(op, left, right), DOUBLE)
        if lt.integral and rt.integral:
            result = BIGINT if "bigint" in (lt.kind, rt.kind) else INT
            return Compiled(_integral_op(op, left, right, result), result)
        a, b = as_decimal_type(left), as_decimal_type(right)
        p1, s1, p2, s2 = a.precision, a.scale, b.precision, b.scale
        if op in ("+", "-"):
            scale = max(s1, s2)
            result = adjusted_decimal(max(p1 - s1, p2 - s2) + scale + 1, scale)
        elif op == "*":
            result = adjusted_decimal(p1 + p2 + 1, s1 + s2)
        elif op == "/":
            scale = max(6, s1 + p2 + 1)
            result = adjusted_decimal(p1 - s1 + s2 + scale, scale)
        else:  # %
            scale = max(s1, s2)
            result = adjusted_decimal(min(p1 - s1, p2 - s2) + scale, scale)
        return Compiled(_decimal_op(op, left, right, result), result)
    def is_(self, node: Any) -> Compiled:
        from sqlglot import exp

        inner = self.compile(node.this)
        target = node.expression
        if isinstance(target, exp.Null):
            return Compiled(lambda row: inner(row) is None, BOOLEAN)
        if isinstance(target, exp.Boolean):
            flag = bool(target.this)
            self.boolean(node.this)
            return Compiled(lambda row: inner(row) is flag, BOOLEAN)
        raise self.error(node, f"IS {target.sql()} is not supported")
    def in_(self, node: Any) -> Compiled:
        if node.args.get("query") or node.args.get("unnest") or node.args.get("field"):
            raise self.error(node, "IN (SELECT ...) is not supported in a computed column")
        from sqlglot import exp

        checks = [self.comparison(exp.EQ(this=node.this, expression=option)) for option in node.expressions]

        def member(row: Row) -> Any:
            results = [check(row) for check in checks]
            if True in results:
                return True
            return None if None in results else False

        return Compiled(member, BOOLEAN)
    def like(self, node: Any) -> Compiled:
        inner = self.compile(node.this)
        pattern = self.compile(node.expression)
        if not pattern.constant or pattern.type.kind != "string":
            raise self.error(node.expression, "LIKE needs a string literal pattern")
        if inner.type.kind not in ("string", "null", "any"):
            raise self.error(node, f"LIKE on {inner.type}", hint="CAST(x AS STRING) LIKE '...'")
        regex = like_regex(pattern.value, self.error(node.expression, "bad LIKE escape"))
        return Compiled(lambda row: None if (v := inner(row)) is None else bool(regex.match(v)), BOOLEAN)
    def conditional(self, node: Any, branches: list[tuple[Any, Any]], default: Any) -> Compiled:
        conditions = [self.boolean(cond) for cond, _ in branches]
        values = [self.compile(value) for _, value in branches]
        otherwise = self.compile(default) if default is not None else compiled_constant(None, NULL)
        result = NULL
        for value in [*values, otherwise]:
            result = wider_type(result, value.type, node_offset(node), "CASE/IF")
        values = [self.coerce(v, result) for v in values]
        otherwise = self.coerce(otherwise, result)
        pairs = list(zip(conditions, values, strict=True))

        def choose(row: Row) -> Any:
            for condition, value in pairs:
                if condition(row) is True:
                    return value(row)
            return otherwise(row)

        return Compiled(choose, result)
    def case(self, node: Any) -> Compiled:
        from sqlglot import exp

        subject = node.this
        branches = []
        for when in node.args.get("ifs") or []:
            condition = when.this if subject is None else exp.EQ(this=subject, expression=when.this)
            branches.append((condition, when.args.get("true")))
        return self.conditional(node, branches, node.args.get("default"))
    def cast(self, node: Any) -> Compiled:
        from sqlglot import exp

        inner = self.compile(node.this)
        target = self.spark_type(node.args["to"])
        safe = isinstance(node, exp.TryCast) and bool(node.args.get("safe"))
        if not castable(inner.type, target):
            raise self.error(node, f"cannot CAST {inner.type} to {target}")
        convert = cast_function(inner.type, target, safe=safe)
        if inner.constant:
            try:
                return compiled_constant(convert(inner.value), target)
            except EvaluationError as exc:
                raise self.error(node, exc.message) from None
        fn = inner.fn
        return Compiled(lambda row: convert(fn(row)), target)
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
    def trim(self, node: Any) -> Compiled:
        inner = self.stringy(node.this, self.compile(node.this))
        chars_node = node.args.get("expression")
        chars: Compiled = self.stringy(chars_node, self.compile(chars_node)) if chars_node is not None else compiled_constant(" ", STRING)
        position = (node.args.get("position") or "BOTH").upper()
        return self.trimmed(inner, chars, position)
    def trimmed(self, inner: Compiled, chars: Compiled, position: str) -> Compiled:
        def trimmed(row: Row) -> Any:
            v, c = inner(row), chars(row)
            if v is None or c is None:
                return None
            if position == "LEADING":
                return v.lstrip(c)
            if position == "TRAILING":
                return v.rstrip(c)
            return v.strip(c)

        return Compiled(trimmed, STRING)

    # argument helpers --------------------------------------------------------------------------
    def arity(self, node: Any, args: list[Compiled], low: int, high: int | None = None) -> None:
        high = low if high is None else high
        if not low <= len(args) <= high:
            name = str(node.this).lower() if hasattr(node, "this") and isinstance(node.this, str) else "function"
            wanted = str(low) if low == high else f"{low} to {high}"
            raise self.error(node, f"{name}() takes {wanted} arguments, not {len(args)}")
    def stringy(self, node: Any, arg: Compiled) -> Compiled:
        """A string argument; other scalar types are cast to STRING as Spark does implicitly."""
        if arg.type.kind in ("string", "null", "any"):
            return arg
        if arg.type.kind == "binary":
            raise self.error(node, "a BINARY value where a string is expected",
                             hint="CAST(x AS STRING) decodes it as UTF-8")
        return self.coerce(arg, STRING)
    def integer(self, node: Any, arg: Compiled, what: str) -> Compiled:
        if arg.type.kind in ("int", "null", "any"):
            return arg
        if arg.type.kind == "bigint":
            convert = cast_function(BIGINT, INT, safe=False)
            fn = arg.fn
            return Compiled(lambda row: convert(fn(row)), INT)
        raise self.error(node, f"{what} must be an integer, not {arg.type}")
    def constant_int(self, node: Any, arg: Compiled, what: str) -> int:
        if not arg.constant or not arg.type.integral:
            raise self.error(node, f"{what} must be an integer literal")
        return int(arg.value)

    # conditional functions: CASE in function form ------------------------------------------
    def fn_coalesce(self, node: Any, args: list[Compiled]) -> Compiled:
        if not args:
            raise self.error(node, "coalesce() needs arguments")
        result = NULL
        for arg in args:
            result = wider_type(result, arg.type, node_offset(node), "coalesce")
        parts = [self.coerce(a, result) for a in args]
        return Compiled(lambda row: next((v for p in parts if (v := p(row)) is not None), None), result)
    def fn_nvl(self, node: Any, args: list[Compiled]) -> Compiled:
        self.arity(node, args, 2)
        return self.fn_coalesce(node, args)
    fn_ifnull = fn_nvl
    def fn_nullif(self, node: Any, args: list[Compiled]) -> Compiled:
        self.arity(node, args, 2)
        left, right = self.comparable(node, args[0], args[1])
        first = args[0]

        def nullif(row: Row) -> Any:
            a, b = left(row), right(row)
            if a is not None and b is not None and a == b:
                return None
            return first(row)

        return Compiled(nullif, first.type)
    def fn_nvl2(self, node: Any, args: list[Compiled]) -> Compiled:
        self.arity(node, args, 3)
        test = args[0]
        result = wider_type(args[1].type, args[2].type, node_offset(node), "nvl2")
        yes, no = self.coerce(args[1], result), self.coerce(args[2], result)
        return Compiled(lambda row: yes(row) if test(row) is not None else no(row), result)
    def fn_if(self, node: Any, args: list[Compiled]) -> Compiled:  # pragma: no cover - parsed as exp.If
        raise self.error(node, "if() takes 3 arguments")


def _integral_op(op: str, left: Compiled, right: Compiled, result: SparkType) -> Fn:
    def apply(row: Row) -> Any:
        a, b = left(row), right(row)
        if a is None or b is None:
            return None
        if op == "+":
            value = a + b
        elif op == "-":
            value = a - b
        elif op == "*":
            value = a * b
        else:  # % with Java's sign (of the dividend)
            if b == 0:
                fail_evaluation("REMAINDER_BY_ZERO", "Remainder by zero")
            value = abs(a) % abs(b) * (1 if a >= 0 else -1)
        return check_int(value, result)

    return apply


def _double_op(op: str, left: Compiled, right: Compiled) -> Fn:
    def apply(row: Row) -> Any:
        a, b = left(row), right(row)
        if a is None or b is None:
            return None
        if op == "+":
            return a + b
        if op == "-":
            return a - b
        if op == "*":
            return a * b
        if b == 0:
            fail_evaluation("DIVIDE_BY_ZERO" if op == "/" else "REMAINDER_BY_ZERO",
                            "Division by zero" if op == "/" else "Remainder by zero")
        if op == "/":
            return a / b
        return math.fmod(a, b)

    return apply


def _decimal_op(op: str, left: Compiled, right: Compiled, result: SparkType) -> Fn:
    def apply(row: Row) -> Any:
        a, b = left(row), right(row)
        if a is None or b is None:
            return None
        a, b = Decimal(a), Decimal(b)
        if op == "+":
            value = DECIMAL_CONTEXT.add(a, b)
        elif op == "-":
            value = DECIMAL_CONTEXT.subtract(a, b)
        elif op == "*":
            value = DECIMAL_CONTEXT.multiply(a, b)
        elif op == "/":
            if b == 0:
                fail_evaluation("DIVIDE_BY_ZERO", "Division by zero")
            value = DECIMAL_CONTEXT.divide(a, b)
        else:
            if b == 0:
                fail_evaluation("REMAINDER_BY_ZERO", "Remainder by zero")
            value = DECIMAL_CONTEXT.remainder(a, b)  # sign of the dividend, like Java's BigDecimal
        return fit_decimal(value, result)

    return apply
