"""The math functions of the compiler: round and bround (HALF_UP, HALF_EVEN), floor and ceil,
abs, mod and pmod, try_divide, greatest and least, in Spark's result types.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from decimal import ROUND_FLOOR, ROUND_HALF_UP, Decimal
from typing import Any

from replicator.plan.expressions.errors import EvaluationError, fail_evaluation
from replicator.plan.expressions.operators import OperatorCompiler
from replicator.plan.expressions.parsing import node_offset
from replicator.plan.expressions.spark_types import (
    ANY,
    BIGINT,
    DECIMAL_CONTEXT,
    DOUBLE,
    INT,
    NULL,
    Compiled,
    Row,
    bounded_decimal,
    check_int,
    compiled_constant,
    double_order_key,
    fit_decimal,
    identity,
    wider_type,
)


class NumericFunctions(OperatorCompiler):
    """Compiles ``fn_<name>`` of the math functions (``OperatorCompiler`` does the rest)."""

    def numeric(self, node: Any, arg: Compiled) -> Compiled:
        if not (arg.type.numeric or arg.type.kind in ("null", "any")):
            raise self.error(node, f"a number is expected, not {arg.type}",
                             hint="CAST(x AS DECIMAL(p,s)) or CAST(x AS DOUBLE)")
        return arg if arg.type.kind != "null" else compiled_constant(None, INT)

    def _round(self, node: Any, args: list[Compiled], mode: str) -> Compiled:
        self.arity(node, args, 1, 2)
        inner = self.numeric(node, args[0])
        places = self.constant_int(node, args[1], "the scale") if len(args) > 1 else 0
        if places < 0:
            raise self.error(node, "a negative scale is not supported")
        t = inner.type
        if t.kind == "any":
            return Compiled(lambda row: None, ANY)
        if t.integral:
            return inner
        if t.kind == "double":
            def round_double(row: Row) -> Any:
                v = inner(row)
                if v is None or math.isnan(v) or math.isinf(v):
                    return v
                return float(Decimal(repr(v)).quantize(Decimal(1).scaleb(-places), rounding=mode, context=DECIMAL_CONTEXT))

            return Compiled(round_double, DOUBLE)
        scale = min(t.scale, places)
        result = bounded_decimal(t.precision - t.scale + 1 + scale, scale)

        def round_decimal(row: Row) -> Any:
            v = inner(row)
            if v is None:
                return None
            return fit_decimal(v.quantize(Decimal(1).scaleb(-scale), rounding=mode, context=DECIMAL_CONTEXT), result)

        return Compiled(round_decimal, result)

    def fn_round(self, node: Any, args: list[Compiled]) -> Compiled:
        return self._round(node, args, ROUND_HALF_UP)

    def fn_bround(self, node: Any, args: list[Compiled]) -> Compiled:
        from decimal import ROUND_HALF_EVEN

        return self._round(node, args, ROUND_HALF_EVEN)

    def _floor_ceil(self, node: Any, args: list[Compiled], ceiling: bool) -> Compiled:
        self.arity(node, args, 1)
        inner = self.numeric(node, args[0])
        t = inner.type
        if t.integral:
            fn = inner.fn
            return Compiled(lambda row: fn(row), BIGINT)
        if t.kind == "double":
            def integral(row: Row) -> Any:
                v = inner(row)
                if v is None:
                    return None
                if math.isnan(v) or math.isinf(v):
                    return fail_evaluation("ARITHMETIC_OVERFLOW", "overflow")
                result = math.ceil(v) if ceiling else math.floor(v)
                return check_int(result, BIGINT)

            return Compiled(integral, BIGINT)
        result = bounded_decimal(t.precision - t.scale + 1, 0)
        rounding = "ROUND_CEILING" if ceiling else ROUND_FLOOR

        def decimal_integral(row: Row) -> Any:
            v = inner(row)
            return None if v is None else v.quantize(Decimal(1), rounding=rounding, context=DECIMAL_CONTEXT)

        return Compiled(decimal_integral, result)

    def fn_floor(self, node: Any, args: list[Compiled]) -> Compiled:
        return self._floor_ceil(node, args, False)

    def fn_ceil(self, node: Any, args: list[Compiled]) -> Compiled:
        return self._floor_ceil(node, args, True)

    fn_ceiling = fn_ceil

    def fn_abs(self, node: Any, args: list[Compiled]) -> Compiled:
        self.arity(node, args, 1)
        inner = self.numeric(node, args[0])
        t = inner.type

        def absolute(row: Row) -> Any:
            v = inner(row)
            if v is None:
                return None
            result = abs(v)
            if t.integral:
                check_int(result, t)
            return result

        return Compiled(absolute, t)

    def fn_mod(self, node: Any, args: list[Compiled]) -> Compiled:
        from sqlglot import exp

        self.arity(node, args, 2)
        return self.arithmetic(exp.Mod(this=node.expressions[0], expression=node.expressions[1]), "%")

    def fn_pmod(self, node: Any, args: list[Compiled]) -> Compiled:
        remainder = self.fn_mod(node, args)
        divisor = self.coerce(args[1], remainder.type) if remainder.type.kind != "any" else args[1]
        t = remainder.type

        def positive(row: Row) -> Any:
            r = remainder(row)
            if r is None:
                return None
            if r < 0:
                d = divisor(row)
                r = r + d if d > 0 else r
                if t.kind == "decimal":
                    r = fit_decimal(r, t)
            return r

        return Compiled(positive, t)

    def fn_try_divide(self, node: Any, args: list[Compiled]) -> Compiled:
        from sqlglot import exp

        self.arity(node, args, 2)
        divided = self.arithmetic(exp.Div(this=node.expressions[0], expression=node.expressions[1]), "/")
        fn = divided.fn

        def try_divide(row: Row) -> Any:
            try:
                return fn(row)
            except EvaluationError:
                return None

        return Compiled(try_divide, divided.type)

    def _extreme(self, node: Any, args: list[Compiled], pick: Callable[..., Any]) -> Compiled:
        if len(args) < 2:
            raise self.error(node, "greatest()/least() need at least 2 arguments")
        result = NULL
        for arg in args:
            result = wider_type(result, arg.type, node_offset(node), "greatest/least")
        parts = [self.coerce(a, result) for a in args]

        def extreme(row: Row) -> Any:
            values = [v for p in parts if (v := p(row)) is not None]
            return pick(values, key=double_order_key if result.kind == "double" else identity) if values else None

        return Compiled(extreme, result)

    def fn_greatest(self, node: Any, args: list[Compiled]) -> Compiled:
        return self._extreme(node, args, max)

    def fn_least(self, node: Any, args: list[Compiled]) -> Compiled:
        return self._extreme(node, args, min)
