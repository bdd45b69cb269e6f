"""The math functions: round and bround, floor and ceil, abs, mod and pmod, try_divide
(division with NULL for a zero divisor), greatest and least, in Spark's result types.
"""

from __future__ import annotations

from typing import Any

from replicator.plan.expressions.spark_types import SparkType
from replicator.plan.transpile.casts import duck_type, fail_sql
from replicator.plan.transpile.operators import OperatorTranslator


class NumericFunctions(OperatorTranslator):
    """Translates ``fn_<name>`` of the math functions (``OperatorTranslator`` does the rest)."""

    def _round(self, node: Any, args: list[Any], result: SparkType, function: str) -> str:
        source = self.type(args[0])
        places = int(self.constant(args[1])[1]) if len(args) > 1 else 0
        if source.kind == "double" or (source.integral and places < 0):
            raise self.fail(node, f"{function}() of {source}")
        if source.integral:
            return self.sql(args[0])
        value = f"{'round' if function == 'round' else 'round_even'}({self.sql(args[0])}, {places})"
        return f"CAST({value} AS {duck_type(result)})"

    def fn_round(self, node: Any, args: list[Any], result: SparkType) -> str:
        return self._round(node, args, result, "round")

    def fn_bround(self, node: Any, args: list[Any], result: SparkType) -> str:
        return self._round(node, args, result, "bround")

    def fn_floor(self, node: Any, args: list[Any], result: SparkType) -> str:
        return self._integral(node, args, result, "floor")

    def fn_ceil(self, node: Any, args: list[Any], result: SparkType) -> str:
        return self._integral(node, args, result, "ceil")

    fn_ceiling = fn_ceil

    def _integral(self, node: Any, args: list[Any], result: SparkType, function: str) -> str:
        source = self.type(args[0])
        if source.kind == "double":
            value = self.sql(args[0])
            failure = fail_sql("ARITHMETIC_OVERFLOW", "overflow")
            return (f"CASE WHEN {value} IS NULL THEN NULL WHEN isnan({value}) OR isinf({value}) OR "
                    f"{function}({value}) NOT BETWEEN -9223372036854775808 AND 9223372036854775807 "
                    f"THEN {failure} ELSE CAST({function}({value}) AS BIGINT) END")
        if source.integral:
            return f"CAST({self.sql(args[0])} AS BIGINT)"
        return f"CAST({function}({self.sql(args[0])}) AS {duck_type(result)})"

    def fn_abs(self, node: Any, args: list[Any], result: SparkType) -> str:
        return f"CAST(abs({self.as_type(args[0], result)}) AS {duck_type(result)})"

    def fn_mod(self, node: Any, args: list[Any], result: SparkType) -> str:
        from sqlglot import exp

        return self.arithmetic(exp.Mod(this=args[0], expression=args[1]), "Mod", result)

    def fn_pmod(self, node: Any, args: list[Any], result: SparkType) -> str:
        remainder = self.fn_mod(node, args, result)
        divisor = self.as_type(args[1], result)
        return (f"CAST(CASE WHEN {remainder} < 0 AND {divisor} > 0 THEN {remainder} + {divisor} "
                f"ELSE {remainder} END AS {duck_type(result)})")

    def fn_try_divide(self, node: Any, args: list[Any], result: SparkType) -> str:
        from sqlglot import exp

        self.safe_division = True
        try:
            return self.arithmetic(exp.Div(this=args[0], expression=args[1]), "Div", result)
        finally:
            self.safe_division = False

    def fn_greatest(self, node: Any, args: list[Any], result: SparkType) -> str:
        return f"greatest({', '.join(self.as_type(a, result) for a in args)})"

    def fn_least(self, node: Any, args: list[Any], result: SparkType) -> str:
        return f"least({', '.join(self.as_type(a, result) for a in args)})"
