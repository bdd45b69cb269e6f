"""The types of the date and time functions: to_date, year .. second, datediff, date_add and
date_sub, date_trunc and date_format (Spark's datetime patterns: ``java_patterns``).
"""

from __future__ import annotations

from typing import Any

from replicator.plan.expressions.java_patterns import check_date_pattern
from replicator.plan.expressions.operators import OperatorChecker
from replicator.plan.expressions.spark_types import DATE, INT, STRING, TIMESTAMP, Typed

_TRUNC_UNITS = frozenset({"YEAR", "YYYY", "YY", "QUARTER", "MONTH", "MM", "MON", "WEEK", "DAY",
                          "DD", "HOUR", "MINUTE", "SECOND", "MILLISECOND", "MICROSECOND"})


class DateFunctions(OperatorChecker):
    """Checks ``fn_<name>`` of the date and time functions (``OperatorChecker`` does the rest)."""

    def temporal(self, node: Any, arg: Typed, want: str) -> Typed:
        """A DATE or TIMESTAMP argument as ``want``; strings as Spark casts them."""
        if arg.type.kind in ("null", "any"):
            return arg
        if arg.type.kind not in ("date", "timestamp", "string"):
            raise self.error(node, f"a date or timestamp is expected, not {arg.type}")
        if arg.type.kind == "string" and want == "timestamp":
            raise self.error(node, "a string where a timestamp is expected",
                             hint="CAST(x AS TIMESTAMP) first")
        return Typed(DATE if want == "date" else TIMESTAMP)

    def fn_to_date(self, node: Any, args: list[Typed]) -> Typed:
        self.arity(node, args, 1)
        return self.temporal(node, args[0], "date")

    def _date_field(self, node: Any, args: list[Typed]) -> Typed:
        self.arity(node, args, 1)
        self.temporal(node, args[0], "date")
        return Typed(INT)

    def _time_field(self, node: Any, args: list[Typed]) -> Typed:
        self.arity(node, args, 1)
        self.temporal(node, args[0], "timestamp")
        return Typed(INT)

    fn_year = fn_month = fn_day = fn_dayofmonth = fn_quarter = _date_field
    fn_hour = fn_minute = fn_second = _time_field

    def fn_datediff(self, node: Any, args: list[Typed]) -> Typed:
        self.arity(node, args, 2)
        self.temporal(node, args[0], "date")
        self.temporal(node, args[1], "date")
        return Typed(INT)

    def fn_date_add(self, node: Any, args: list[Typed]) -> Typed:
        self.arity(node, args, 2)
        self.temporal(node, args[0], "date")
        self.integer(node, args[1], "the number of days")
        return Typed(DATE)

    fn_date_sub = fn_date_add

    def fn_date_trunc(self, node: Any, args: list[Typed]) -> Typed:
        self.arity(node, args, 2)
        unit = args[0]
        if not unit.literal or unit.type.kind != "string":
            raise self.error(node, "date_trunc() needs the unit as a string literal: date_trunc('month', ts)")
        if str(unit.value).upper() not in _TRUNC_UNITS:
            raise self.error(node.expressions[0], f"unknown date_trunc unit {unit.value!r}",
                             hint="use YEAR, QUARTER, MONTH, WEEK, DAY, HOUR, MINUTE, SECOND, "
                             "MILLISECOND or MICROSECOND")
        self.temporal(node, args[1], "timestamp")
        return Typed(TIMESTAMP)

    def fn_date_format(self, node: Any, args: list[Typed]) -> Typed:
        self.arity(node, args, 2)
        pattern = args[1]
        if not pattern.literal or pattern.type.kind != "string":
            raise self.error(node, "date_format() needs the pattern as a string literal")
        try:
            check_date_pattern(pattern.value)
        except ValueError as exc:
            raise self.error(node.expressions[1], str(exc),
                             hint="use the pattern letters y M d H h m s S E a and quoted 'text'") from None
        self.temporal(node, args[0], "timestamp")
        return Typed(STRING)
