"""The math functions in DuckDB: round and bround, floor and ceil (``integral``), greatest
and least, in Spark's result types; abs, mod, pmod and try_divide are ``base``'s.
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

    def integral(self, node: Any, arg: Any, result: SparkType, function: str) -> str:
        source = self.type(arg)
        if source.kind == "double":
            value = self.sql(arg)
            failure = fail_sql("ARITHMETIC_OVERFLOW", "overflow")
            return (f"CASE WHEN {value} IS NULL THEN NULL WHEN isnan({value}) OR isinf({value}) OR "
                    f"{function}({value}) NOT BETWEEN -9223372036854775808 AND 9223372036854775807 "
                    f"THEN {failure} ELSE CAST({function}({value}) AS BIGINT) END")
        if source.integral:
            return f"CAST({self.sql(arg)} AS BIGINT)"
        return f"CAST({function}({self.sql(arg)}) AS {duck_type(result)})"

    def fn_greatest(self, node: Any, args: list[Any], result: SparkType) -> str:
        return f"greatest({', '.join(self.as_type(a, result) for a in args)})"

    def fn_least(self, node: Any, args: list[Any], result: SparkType) -> str:
        return f"least({', '.join(self.as_type(a, result) for a in args)})"
