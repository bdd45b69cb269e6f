"""The date and time functions in DuckDB: datediff, date_add and date_sub, date_trunc, and
date_format (Spark's datetime pattern letters as strftime's); to_date and year .. second are
``base``'s.
"""

from __future__ import annotations

from typing import Any

from replicator.plan.expressions.spark_types import TIMESTAMP, SparkType
from replicator.plan.transpile.casts import string_literal
from replicator.plan.transpile.operators import OperatorTranslator


class DateFunctions(OperatorTranslator):
    """Translates ``fn_<name>`` of the date and time functions (``OperatorTranslator`` does the rest)."""

    def fn_datediff(self, node: Any, args: list[Any], result: SparkType) -> str:
        return f"CAST({self.as_date(args[0])} - {self.as_date(args[1])} AS INTEGER)"

    def fn_date_add(self, node: Any, args: list[Any], result: SparkType) -> str:
        return f"CAST({self.as_date(args[0])} + {self.count_arg(args[1])} AS DATE)"

    def fn_date_sub(self, node: Any, args: list[Any], result: SparkType) -> str:
        return f"CAST({self.as_date(args[0])} - {self.count_arg(args[1])} AS DATE)"

    def fn_date_trunc(self, node: Any, args: list[Any], result: SparkType) -> str:
        constant, unit = self.constant(args[0])
        units = {"year": "year", "yyyy": "year", "yy": "year", "quarter": "quarter", "month": "month",
                 "mon": "month", "mm": "month", "week": "week", "day": "day", "dd": "day",
                 "hour": "hour", "minute": "minute", "second": "second",
                 "millisecond": "millisecond", "microsecond": "microsecond"}
        if not constant or not isinstance(unit, str) or unit.lower() not in units:
            raise self.fail(node, "date_trunc() with this unit")
        return f"date_trunc('{units[unit.lower()]}', {self.as_type(args[1], TIMESTAMP)})"

    def fn_date_format(self, node: Any, args: list[Any], result: SparkType) -> str:
        constant, pattern = self.constant(args[1])
        if not constant or not isinstance(pattern, str):
            raise self.fail(node, "date_format() with a non-literal pattern")
        return f"strftime({self.as_type(args[0], TIMESTAMP)}, {string_literal(_strftime(pattern, node, self))})"


# Java DateTimeFormatter letters (as Spark's date_format reads them) -> strftime.
_DATE_FIELDS = {"yyyy": "%Y", "yy": "%y", "MMMM": "%B", "MMM": "%b", "MM": "%m", "dd": "%d",
                "HH": "%H", "hh": "%I", "mm": "%M", "ss": "%S", "SSS": "%g", "SSSSSS": "%f",
                "EEEE": "%A", "EEE": "%a", "E": "%a", "a": "%p", "D": "%-j", "d": "%-d",
                "M": "%-m", "H": "%-H", "h": "%-I", "m": "%-M", "s": "%-S"}


def _strftime(pattern: str, node: Any, translator: OperatorTranslator) -> str:
    out = []
    index = 0
    while index < len(pattern):
        char = pattern[index]
        if char == "'":
            end = pattern.find("'", index + 1)
            if end < 0:
                raise translator.fail(node, "an unclosed quote in a date_format() pattern")
            literal = pattern[index + 1:end] or "'"
            out.append(literal.replace("%", "%%"))
            index = end + 1
            continue
        if char.isalpha():
            run = len(pattern) - index - len(pattern[index:].lstrip(char))
            token = char * run
            if token not in _DATE_FIELDS:
                raise translator.fail(node, f"date_format() letter {token!r}")
            out.append(_DATE_FIELDS[token])
            index += run
            continue
        out.append("%%" if char == "%" else char)
        index += 1
    return "".join(out)
