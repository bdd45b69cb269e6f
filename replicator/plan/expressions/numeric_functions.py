"""The types of the math functions: round and bround (HALF_UP, HALF_EVEN), floor and ceil,
abs, mod and pmod, try_divide, greatest and least, as Spark's analyzer gives them.
"""

from __future__ import annotations

from typing import Any

from replicator.plan.expressions.operators import OperatorChecker
from replicator.plan.expressions.spark_types import BIGINT, INT, Typed, bounded_decimal


class NumericFunctions(OperatorChecker):
    """Checks ``fn_<name>`` of the math functions (``OperatorChecker`` does the rest)."""

    def numeric(self, node: Any, arg: Typed) -> Typed:
        if not (arg.type.numeric or arg.type.kind in ("null", "any")):
            raise self.error(node, f"a number is expected, not {arg.type}",
                             hint="CAST(x AS DECIMAL(p,s)) or CAST(x AS DOUBLE)")
        return arg if arg.type.kind != "null" else Typed(INT)

    def fn_round(self, node: Any, args: list[Typed]) -> Typed:
        self.arity(node, args, 1, 2)
        t = self.numeric(node, args[0]).type
        places = self.constant_int(node, args[1], "the scale") if len(args) > 1 else 0
        if places < 0:
            raise self.error(node, "a negative scale is not supported")
        if t.kind in ("any", "double") or t.integral:
            return Typed(t)
        scale = min(t.scale, places)
        return Typed(bounded_decimal(t.precision - t.scale + 1 + scale, scale))

    fn_bround = fn_round

    def fn_floor(self, node: Any, args: list[Typed]) -> Typed:
        self.arity(node, args, 1)
        t = self.numeric(node, args[0]).type
        if t.integral or t.kind == "double":
            return Typed(BIGINT)
        return Typed(bounded_decimal(t.precision - t.scale + 1, 0))

    fn_ceil = fn_ceiling = fn_floor

    def fn_abs(self, node: Any, args: list[Typed]) -> Typed:
        self.arity(node, args, 1)
        return Typed(self.numeric(node, args[0]).type)

    def fn_mod(self, node: Any, args: list[Typed]) -> Typed:
        from sqlglot import exp

        self.arity(node, args, 2)
        return self.arithmetic(exp.Mod(this=node.expressions[0], expression=node.expressions[1]), "%")

    fn_pmod = fn_mod

    def fn_try_divide(self, node: Any, args: list[Typed]) -> Typed:
        from sqlglot import exp

        self.arity(node, args, 2)
        return self.arithmetic(exp.Div(this=node.expressions[0], expression=node.expressions[1]), "/")

    def fn_greatest(self, node: Any, args: list[Typed]) -> Typed:
        if len(args) < 2:
            raise self.error(node, "greatest()/least() need at least 2 arguments")
        return Typed(self.common(node, args, "greatest/least"))

    fn_least = fn_greatest


