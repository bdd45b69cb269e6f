"""The DuckDB dialect of the translation (``base.BaseTranslator`` holds what both dialects
share): every node CAST to the DuckDB type of its Spark type (decimal results keep Spark's
precision and scale; Spark's HALF_UP rounding is DuckDB's half-away-from-zero), arithmetic
with Spark's errors where DuckDB would not fail (division by zero; DuckDB raises on integer
and decimal overflow by itself), exact DECIMAL division, and the argument forms every DuckDB
function family uses.
"""

from __future__ import annotations

from typing import Any

from replicator.plan.expressions.spark_types import (
    DOUBLE,
    STRING,
    SparkType,
    as_decimal_type,
)
from replicator.plan.transpile.base import BaseTranslator, decimal_scale
from replicator.plan.transpile.casts import (
    cast_sql,
    duck_type,
    fail_sql,
    literal_sql,
    string_literal,
)


class OperatorTranslator(BaseTranslator):
    """Spark SQL nodes -> DuckDB SQL: the dialect's data and hooks (``BaseTranslator`` has
    the dispatch and the shared rules), arithmetic (exact DECIMAL division included), and
    the argument forms of the function families (``translator`` adds them)."""

    sql_type = staticmethod(duck_type)
    literal = staticmethod(literal_sql)
    cast = staticmethod(cast_sql)
    quote = staticmethod(string_literal)
    arithmetic_names = ("Add", "Sub", "Mul", "Div", "Mod", "IntDiv")
    substring_function = "substring"

    def position_sum(self, start: str, length: str) -> str:
        return f"(CAST({start} AS BIGINT) + {length})"  # two INTEGERs overflow past 2^31

    def string_arg(self, node: Any) -> str:
        source = self.type(node)
        if source.kind == "binary":
            raise self.fail(node, "a BINARY argument")
        return cast_sql(self.sql(node), source, STRING)

    def binary_arg(self, node: Any) -> str:
        if self.type(node).kind == "binary":
            return self.sql(node)
        return f"encode({self.string_arg(node)})"

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
            a = f"CAST({a} AS DECIMAL({_digits(lt)},{decimal_scale(lt)}))"
            b = f"CAST({b} AS DECIMAL({_digits(rt)},{decimal_scale(rt)}))"
        op = {"Add": "+", "Sub": "-", "Mul": "*", "Div": "/", "Mod": "%"}[name]
        if name in ("Div", "Mod"):
            zero = "NULL" if self.safe_division else fail_sql("DIVIDE_BY_ZERO", "Division by zero")
            minus_one = f"WHEN {b} = -1 THEN 0 " if name == "Mod" and result.integral else ""
            return (f"CAST(CASE WHEN {a} IS NULL THEN NULL WHEN {b} = 0 THEN {zero} {minus_one}ELSE {a} {op} {b} END "
                    f"AS {duck_type(result)})")
        return f"CAST({a} {op} {b} AS {duck_type(result)})"

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


def _digits(t: SparkType) -> int:
    return t.precision if t.kind == "decimal" else (10 if t.kind == "int" else 20)

