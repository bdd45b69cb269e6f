"""The translator's core: every node CAST to the DuckDB type of its Spark type (decimal results
keep Spark's precision and scale; Spark's HALF_UP rounding is DuckDB's half-away-from-zero),
comparisons in their common type, arithmetic with Spark's errors where DuckDB would not fail
(division by zero; DuckDB raises on integer and decimal overflow by itself), CASE, TRIM, and
the conditional functions.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from replicator.plan.expressions.casts import parse_date, parse_timestamp
from replicator.plan.expressions.checker import Checker
from replicator.plan.expressions.parsing import node_offset
from replicator.plan.expressions.spark_types import (
    DATE,
    DOUBLE,
    INT,
    NULL,
    TIMESTAMP,
    SparkType,
    as_decimal_type,
    wider_type,
)
from replicator.plan.transpile.casts import cast_sql, duck_type, fail_sql, literal_sql
from replicator.plan.transpile.errors import Untranslatable

COMPARISONS = {"EQ": "=", "NEQ": "<>", "GT": ">", "GTE": ">=", "LT": "<", "LTE": "<=",
               "NullSafeEQ": "<=>"}

ColumnSql = Callable[[str], str]  # source column name -> its SQL, already in its Spark type


class OperatorTranslator:
    """Spark SQL nodes -> DuckDB SQL, for everything but named functions: comparisons,
    arithmetic (exact DECIMAL division included), concatenation, CASE, TRIM, the conditional
    functions, and the argument forms every function family uses. The checker
    (``plan.expressions``) types every node; ``translator`` adds the dispatch."""

    def __init__(self, columns: Mapping[str, SparkType], column_sql: ColumnSql) -> None:
        self.checker = Checker({name.lower(): (name, t) for name, t in columns.items()})
        self.columns = {name.lower(): name for name in columns}
        self.column_sql = column_sql

    def type(self, node: Any) -> SparkType:
        return self.checker.check(node).type

    def constant(self, node: Any) -> tuple[bool, Any]:
        """Whether ``node`` is a literal the user wrote, and its value (nothing is folded)."""
        typed = self.checker.check(node)
        return typed.literal, typed.value

    def fail(self, node: Any, what: str) -> Untranslatable:
        return Untranslatable(f"{what} is not supported", node_offset(node))

    def sql(self, node: Any) -> str:
        """DuckDB SQL for any node: the dispatch is ``translator``'s, which knows every
        function family."""
        raise NotImplementedError

    def as_type(self, node: Any, target: SparkType) -> str:
        """``node`` implicitly cast to ``target`` (Spark's implicit cast: ANSI CAST)."""
        return cast_sql(self.sql(node), self.type(node), target)

    def string_arg(self, node: Any) -> str:
        source = self.type(node)
        if source.kind == "binary":
            raise self.fail(node, "a BINARY argument")
        return cast_sql(self.sql(node), source, _spark("string"))

    def integer_arg(self, node: Any) -> str:
        return self.as_type(node, INT)

    def binary_arg(self, node: Any) -> str:
        if self.type(node).kind == "binary":
            return self.sql(node)
        return f"encode({self.string_arg(node)})"

    def common(self, nodes: list[Any]) -> SparkType:
        result = NULL
        for node in nodes:
            result = wider_type(result, self.type(node), 0, "")
        return result

    def comparison(self, node: Any, op: str) -> str:
        left, right = node.this, node.expression
        lt, rt = self.type(left), self.type(right)
        if lt.kind in ("null", "any") or rt.kind in ("null", "any") or lt == rt:
            common = lt if lt.kind not in ("null", "any") else rt
        elif lt.numeric and rt.numeric:
            common = self.common([left, right])
        elif {lt.kind, rt.kind} == {"date", "timestamp"}:
            common = TIMESTAMP
        elif "string" in (lt.kind, rt.kind) and ({lt.kind, rt.kind} & {"date", "timestamp"}):
            common = TIMESTAMP if "timestamp" in (lt.kind, rt.kind) else DATE  # a literal, folded
        else:
            common = lt
        a, b = self.side(left, common), self.side(right, common)
        if op == "<=>":
            return f"({a} IS NOT DISTINCT FROM {b})"
        return f"({a} {op} {b})"

    def side(self, node: Any, common: SparkType) -> str:
        """One side of a comparison in the common type; a string literal compared with a date
        or timestamp is read at plan time, as Spark's analyzer reads it."""
        constant, value = self.constant(node)
        if constant and isinstance(value, str) and common.kind in ("date", "timestamp"):
            parse_ = parse_date if common.kind == "date" else parse_timestamp
            return literal_sql(parse_(value), common)
        return self.as_type(node, common)

    def arithmetic(self, node: Any, name: str, result: SparkType) -> str:
        left, right = node.this, node.expression
        lt, rt = self.type(left), self.type(right)
        if name == "IntDiv":
            a, b = self.as_type(left, result), self.as_type(right, result)
            return (f"CASE WHEN {a} IS NULL THEN NULL WHEN {b} = 0 THEN "
                    f"{fail_sql('DIVIDE_BY_ZERO', 'Division by zero')} ELSE {a} // {b} END")
        if result.kind == "double":
            a, b = self.as_type(left, DOUBLE), self.as_type(right, DOUBLE)
        elif result.kind in ("int", "bigint"):
            a, b = self.as_type(left, result), self.as_type(right, result)
        else:  # decimal: DuckDB's exact decimal arithmetic, then Spark's precision and scale
            if name == "Div":
                return self.decimal_divide(node, result)
            a, b = self.sql(left), self.sql(right)
            for side, t in ((left, lt), (right, rt)):
                if t.kind != "decimal" and not t.integral:
                    raise self.fail(side, f"DECIMAL arithmetic with {t}")
            if name == "Mul" and _digits(lt) + _digits(rt) > 38:
                raise self.fail(node, "a DECIMAL product wider than 38 digits")
            a = f"CAST({a} AS DECIMAL({_digits(lt)},{_scale(lt)}))"
            b = f"CAST({b} AS DECIMAL({_digits(rt)},{_scale(rt)}))"
        op = {"Add": "+", "Sub": "-", "Mul": "*", "Div": "/", "Mod": "%"}[name]
        if name in ("Div", "Mod"):
            zero = fail_sql("DIVIDE_BY_ZERO", "Division by zero") if name == "Div" or result.kind != "double" \
                else "CAST('nan' AS DOUBLE)"
            if name == "Mod" and result.kind == "double":
                zero = fail_sql("DIVIDE_BY_ZERO", "Division by zero")
            if self.safe_division:
                zero = "NULL"
            minus_one = f"WHEN {b} = -1 THEN 0 " if name == "Mod" and result.integral else ""
            return (f"CAST(CASE WHEN {a} IS NULL THEN NULL WHEN {b} = 0 THEN {zero} {minus_one}ELSE {a} {op} {b} END "
                    f"AS {duck_type(result)})")
        return f"CAST({a} {op} {b} AS {duck_type(result)})"

    safe_division = False

    def decimal_divide(self, node: Any, result: SparkType) -> str:
        """Exact DECIMAL division (DuckDB would divide as DOUBLE): the unscaled integers in
        HUGEINT, rounded HALF_UP to Spark's result scale."""
        left, right = node.this, node.expression
        a_type = as_decimal_type(self.checker.check(left))
        b_type = as_decimal_type(self.checker.check(right))
        shift = result.scale + b_type.scale - a_type.scale
        if a_type.precision + max(shift, 0) > 38 or b_type.precision + max(-shift, 0) > 38:
            raise self.fail(node, "a DECIMAL division this wide")

        def unscaled(side: Any, t: SparkType) -> str:
            text = f"CAST(CAST({self.sql(side)} AS DECIMAL({t.precision},{t.scale})) AS VARCHAR)"
            return f"CAST(replace({text}, '.', '') AS HUGEINT)"

        numerator, denominator = unscaled(left, a_type), unscaled(right, b_type)
        if shift > 0:
            numerator = f"({numerator} * CAST('1{'0' * shift}' AS HUGEINT))"
        elif shift < 0:
            denominator = f"({denominator} * CAST('1{'0' * -shift}' AS HUGEINT))"
        quotient, remainder = f"({numerator} // {denominator})", f"({numerator} % {denominator})"
        rounded = (f"({quotient} + CASE WHEN abs({remainder}) >= abs({denominator}) - abs({remainder}) "
                   f"THEN sign({numerator}) * sign({denominator}) ELSE 0 END)")
        magnitude = f"CAST(abs({rounded}) AS VARCHAR)"
        # lpad also cuts a longer text: pad only up to one digit before the point.
        digits = f"lpad({magnitude}, CAST(greatest(length({magnitude}), {result.scale + 1}) AS INTEGER), '0')"
        if result.scale:
            digits = f"regexp_replace({digits}, '([0-9]{{{result.scale}}})$', '.\\1')"
        text = f"(CASE WHEN {rounded} < 0 THEN '-' ELSE '' END || {digits})"
        zero = "NULL" if self.safe_division else fail_sql("DIVIDE_BY_ZERO", "Division by zero")
        return (f"CASE WHEN {numerator} IS NULL THEN NULL WHEN {denominator} = 0 THEN {zero} "
                f"ELSE CAST({text} AS {duck_type(result)}) END")

    def concat(self, nodes: list[Any]) -> str:
        return "(" + " || ".join(self.string_arg(n) for n in nodes) + ")"

    def conditional(self, branches: list[tuple[Any, Any]], default: Any, result: SparkType) -> str:
        parts = [f"WHEN {self.sql(cond)} THEN {self.as_type(value, result)}" for cond, value in branches]
        otherwise = self.as_type(default, result) if default is not None else "NULL"
        return f"CAST(CASE {' '.join(parts)} ELSE {otherwise} END AS {duck_type(result)})"

    def trim(self, node: Any) -> str:
        chars = node.args.get("expression")
        position = (node.args.get("position") or "BOTH").upper()
        function = {"LEADING": "ltrim", "TRAILING": "rtrim"}.get(position, "trim")
        characters = self.string_arg(chars) if chars is not None else "' '"
        return f"{function}({self.string_arg(node.this)}, {characters})"

    # conditional functions: CASE in function form ---------------------------------------
    def fn_coalesce(self, node: Any, args: list[Any], result: SparkType) -> str:
        return f"coalesce({', '.join(self.as_type(a, result) for a in args)})"
    fn_nvl = fn_ifnull = fn_coalesce
    def fn_nullif(self, node: Any, args: list[Any], result: SparkType) -> str:
        from sqlglot import exp

        equal = self.comparison(exp.EQ(this=args[0], expression=args[1]), "=")
        return f"CASE WHEN {equal} THEN NULL ELSE {self.as_type(args[0], result)} END"
    def fn_nvl2(self, node: Any, args: list[Any], result: SparkType) -> str:
        return (f"CASE WHEN {self.sql(args[0])} IS NOT NULL THEN {self.as_type(args[1], result)} "
                f"ELSE {self.as_type(args[2], result)} END")


def _spark(kind: str) -> SparkType:
    return SparkType(kind)


def _digits(t: SparkType) -> int:
    return t.precision if t.kind == "decimal" else (10 if t.kind == "int" else 20)


def _scale(t: SparkType) -> int:
    return t.scale if t.kind == "decimal" else 0
