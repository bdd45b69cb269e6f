"""The date and time functions of the compiler: to_date, year .. second, datediff, date_add
and date_sub, date_trunc and date_format (Spark's datetime patterns: ``java_patterns``).
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Callable
from typing import Any

from replicator.plan.expressions.errors import fail_evaluation
from replicator.plan.expressions.java_patterns import date_formatter
from replicator.plan.expressions.operators import OperatorCompiler
from replicator.plan.expressions.spark_types import DATE, INT, STRING, TIMESTAMP, Compiled, Row


class DateFunctions(OperatorCompiler):
    """Compiles ``fn_<name>`` of the date and time functions (``OperatorCompiler`` does the rest)."""

    def temporal(self, node: Any, arg: Compiled, want: str) -> Compiled:
        """A DATE or TIMESTAMP argument as ``want``; strings as Spark casts them (errors too)."""
        if arg.type.kind in ("null", "any"):
            return arg
        if arg.type.kind not in ("date", "timestamp", "string"):
            raise self.error(node, f"a date or timestamp is expected, not {arg.type}")
        if arg.type.kind == "string" and want == "timestamp":
            raise self.error(node, "a string where a timestamp is expected",
                             hint="CAST(x AS TIMESTAMP) first")
        return self.coerce(arg, DATE if want == "date" else TIMESTAMP)

    def fn_to_date(self, node: Any, args: list[Compiled]) -> Compiled:
        self.arity(node, args, 1)
        return self.temporal(node, args[0], "date")

    def _field(self, node: Any, args: list[Compiled], want: str, get: Callable[[Any], int]) -> Compiled:
        self.arity(node, args, 1)
        inner = self.temporal(node, args[0], want)
        return Compiled(lambda row: None if (v := inner(row)) is None else get(v), INT)

    def fn_year(self, node: Any, args: list[Compiled]) -> Compiled:
        return self._field(node, args, "date", lambda v: v.year)

    def fn_month(self, node: Any, args: list[Compiled]) -> Compiled:
        return self._field(node, args, "date", lambda v: v.month)

    def fn_day(self, node: Any, args: list[Compiled]) -> Compiled:
        return self._field(node, args, "date", lambda v: v.day)

    fn_dayofmonth = fn_day

    def fn_quarter(self, node: Any, args: list[Compiled]) -> Compiled:
        return self._field(node, args, "date", lambda v: (v.month - 1) // 3 + 1)

    def fn_hour(self, node: Any, args: list[Compiled]) -> Compiled:
        return self._field(node, args, "timestamp", lambda v: v.hour)

    def fn_minute(self, node: Any, args: list[Compiled]) -> Compiled:
        return self._field(node, args, "timestamp", lambda v: v.minute)

    def fn_second(self, node: Any, args: list[Compiled]) -> Compiled:
        return self._field(node, args, "timestamp", lambda v: v.second)

    def fn_datediff(self, node: Any, args: list[Compiled]) -> Compiled:
        self.arity(node, args, 2)
        end, start = self.temporal(node, args[0], "date"), self.temporal(node, args[1], "date")

        def datediff(row: Row) -> Any:
            a, b = end(row), start(row)
            return None if a is None or b is None else (a - b).days

        return Compiled(datediff, INT)

    def _date_add(self, node: Any, args: list[Compiled], sign: int) -> Compiled:
        self.arity(node, args, 2)
        start = self.temporal(node, args[0], "date")
        days = self.integer(node, args[1], "the number of days")

        def date_add(row: Row) -> Any:
            d, n = start(row), days(row)
            if d is None or n is None:
                return None
            try:
                return d + dt.timedelta(days=sign * n)
            except OverflowError:
                return fail_evaluation("DATETIME_OVERFLOW", "the date is out of the supported range (years 1-9999)")

        return Compiled(date_add, DATE)

    def fn_date_add(self, node: Any, args: list[Compiled]) -> Compiled:
        return self._date_add(node, args, 1)

    def fn_date_sub(self, node: Any, args: list[Compiled]) -> Compiled:
        return self._date_add(node, args, -1)

    def fn_date_trunc(self, node: Any, args: list[Compiled]) -> Compiled:
        self.arity(node, args, 2)
        unit = args[0]
        if not unit.constant or unit.type.kind != "string":
            raise self.error(node, "date_trunc() needs the unit as a string literal: date_trunc('month', ts)")
        truncate = _TRUNCATIONS.get(str(unit.value).upper())
        if truncate is None:
            raise self.error(node.expressions[0], f"unknown date_trunc unit {unit.value!r}",
                             hint="use YEAR, QUARTER, MONTH, WEEK, DAY, HOUR, MINUTE, SECOND, "
                             "MILLISECOND or MICROSECOND")
        inner = self.temporal(node, args[1], "timestamp")
        return Compiled(lambda row: None if (v := inner(row)) is None else truncate(v), TIMESTAMP)

    def fn_date_format(self, node: Any, args: list[Compiled]) -> Compiled:
        self.arity(node, args, 2)
        pattern = args[1]
        if not pattern.constant or pattern.type.kind != "string":
            raise self.error(node, "date_format() needs the pattern as a string literal")
        try:
            formatter = date_formatter(pattern.value)
        except ValueError as exc:
            raise self.error(node.expressions[1], str(exc),
                             hint="use the pattern letters y M d H h m s S E a and quoted 'text'") from None
        inner = self.temporal(node, args[0], "timestamp")
        return Compiled(lambda row: None if (v := inner(row)) is None else formatter(v), STRING)


def _trunc_week(v: dt.datetime) -> dt.datetime:
    day = v - dt.timedelta(days=v.weekday())
    return day.replace(hour=0, minute=0, second=0, microsecond=0)


_TRUNCATIONS: dict[str, Callable[[dt.datetime], dt.datetime]] = {
    **dict.fromkeys(("YEAR", "YYYY", "YY"), lambda v: v.replace(month=1, day=1, hour=0, minute=0, second=0, microsecond=0)),
    "QUARTER": lambda v: v.replace(month=(v.month - 1) // 3 * 3 + 1, day=1, hour=0, minute=0, second=0, microsecond=0),
    **dict.fromkeys(("MONTH", "MM", "MON"), lambda v: v.replace(day=1, hour=0, minute=0, second=0, microsecond=0)),
    "WEEK": _trunc_week,
    **dict.fromkeys(("DAY", "DD"), lambda v: v.replace(hour=0, minute=0, second=0, microsecond=0)),
    "HOUR": lambda v: v.replace(minute=0, second=0, microsecond=0),
    "MINUTE": lambda v: v.replace(second=0, microsecond=0),
    "SECOND": lambda v: v.replace(microsecond=0),
    "MILLISECOND": lambda v: v.replace(microsecond=v.microsecond // 1000 * 1000),
    "MICROSECOND": lambda v: v,
}
