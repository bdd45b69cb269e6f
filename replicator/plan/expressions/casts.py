"""Casts as Spark 4 (ANSI) does them: one value of a Spark type as another, with Spark's errors
(or NULL, for try_cast), Java's text of a DOUBLE, and the date and timestamp text Spark reads.
"""

from __future__ import annotations

import datetime as dt
import math
import re
from collections.abc import Callable
from decimal import ROUND_HALF_UP, Decimal
from typing import Any

from replicator.plan.expressions.errors import EvaluationError, fail_evaluation
from replicator.plan.expressions.spark_types import (
    DECIMAL_CONTEXT,
    INT_MAX,
    INT_MIN,
    LONG_MAX,
    LONG_MIN,
    SparkType,
)


def java_double_text(value: float) -> str:
    """Java's Double.toString, as Spark casts a DOUBLE to STRING."""
    if math.isnan(value):
        return "NaN"
    if math.isinf(value):
        return "Infinity" if value > 0 else "-Infinity"
    if value == 0:
        return "-0.0" if math.copysign(1, value) < 0 else "0.0"
    magnitude = abs(value)
    digits = repr(magnitude)
    if 1e-3 <= magnitude < 1e7:
        text = format(Decimal(digits), "f")
        if "." not in text:
            text += ".0"
        return ("-" if value < 0 else "") + text
    mantissa, exponent = f"{Decimal(digits):E}".split("E")
    mantissa = mantissa.rstrip("0").rstrip(".") if "." in mantissa else mantissa
    if "." not in mantissa:
        mantissa += ".0"
    return ("-" if value < 0 else "") + f"{mantissa}E{int(exponent)}"


def _timestamp_text(value: dt.datetime) -> str:
    text = value.strftime("%Y-%m-%d %H:%M:%S")
    if value.microsecond:
        text += "." + f"{value.microsecond:06d}".rstrip("0")
    return text


def to_string(value: Any, type_: SparkType) -> str:
    kind = type_.kind
    if kind == "string":
        return value
    if kind == "boolean":
        return "true" if value else "false"
    if kind in ("int", "bigint"):
        return str(value)
    if kind == "decimal":
        return format(value, "f")
    if kind == "double":
        return java_double_text(value)
    if kind == "date":
        return value.isoformat()
    if kind == "timestamp":
        return _timestamp_text(value)
    if kind == "binary":
        return bytes(value).decode("utf-8", "replace")
    return str(value)


_INTEGER_TEXT = re.compile(r"^[+-]?\d+$", re.A)
_DECIMAL_TEXT = re.compile(r"^[+-]?(\d+\.?\d*|\.\d+)([eE][+-]?\d+)?$", re.A)
_DATE_TEXT = re.compile(r"^([+-]?\d{4,6})(?:-(\d{1,2})(?:-(\d{1,2})(?:[ T].*)?)?)?$", re.S | re.A)
_TIMESTAMP_TEXT = re.compile(
    r"^(\d{4})-(\d{1,2})-(\d{1,2})(?:[ T](\d{1,2}):(\d{1,2})(?::(\d{1,2})(?:\.(\d{1,9}))?)?)?$", re.A)
_TRUE = frozenset({"t", "true", "y", "yes", "1"})
_FALSE = frozenset({"f", "false", "n", "no", "0"})
# What Spark's UTF8String.trimAll() removes around an int, boolean or date being cast: it
# tests each BYTE for Java whitespace or ISO control, so only ASCII ones (0x00-0x20, DEL); a
# character beyond ASCII (U+0085, U+00A0, U+3000) is kept and the cast fails. Decimal and
# double casts trim with UTF8String.trim(): 0x00-0x20 only (measured on Spark 4).
_WS = "".join(chr(c) for c in (*range(0x21), 0x7F))
_WS_NUMBER = "".join(chr(c) for c in range(0x21))


def _invalid(value: Any, source: SparkType, target: str) -> Any:
    fail_evaluation("CAST_INVALID_INPUT", f"The value {value!r} of the type {str(source).upper()} cannot "
                    f"be cast to {target.upper()} because it is malformed")


def parse_date(text: str) -> dt.date | None:
    match = _DATE_TEXT.match(text.strip(_WS))
    if not match:
        return None
    try:
        return dt.date(int(match.group(1)), int(match.group(2) or 1), int(match.group(3) or 1))
    except ValueError:
        return None


def parse_timestamp(text: str) -> dt.datetime | None:
    match = _TIMESTAMP_TEXT.match(text.strip(_WS))
    if not match:
        return None
    y, mo, d, h, mi, s, fraction = match.groups()
    try:
        micros = int((fraction or "0")[:6].ljust(6, "0"))
        return dt.datetime(int(y), int(mo), int(d), int(h or 0), int(mi or 0), int(s or 0), micros)
    except ValueError:
        return None


def cast_function(source: SparkType, target: SparkType, *, safe: bool) -> Callable[[Any], Any]:
    """One value of ``source`` as ``target`` (None-safe); ``safe``: NULL instead of errors."""
    inner = _cast(source, target)
    if not safe:
        return lambda v: None if v is None else inner(v)

    def guarded(value: Any) -> Any:
        if value is None:
            return None
        try:
            return inner(value)
        except EvaluationError:
            return None

    return guarded


def castable(source: SparkType, target: SparkType) -> bool:
    if source.kind in ("null", "any") or source == target:
        return True
    s, t = source.kind, target.kind
    if t == "string":
        return True
    if t in ("int", "bigint", "decimal", "double"):
        return s in ("boolean", "int", "bigint", "decimal", "double", "string")
    if t == "boolean":
        return s in ("boolean", "int", "bigint", "decimal", "double", "string")
    if t == "date":
        return s in ("string", "timestamp", "date")
    if t == "timestamp":
        return s in ("string", "date", "timestamp")
    if t == "binary":
        return s in ("string", "binary")
    return False


def _cast(source: SparkType, target: SparkType) -> Callable[[Any], Any]:
    s, t = source.kind, target.kind
    if s == "null":
        return lambda v: None
    if source == target:
        return lambda v: v
    if t == "string":
        return lambda v: to_string(v, source)
    if t in ("int", "bigint"):
        return _to_integral(source, t)
    if t == "decimal":
        return _to_decimal(source, target)
    if t == "double":
        return _to_double(source)
    if t == "boolean":
        return _to_boolean(source)
    if t == "date":
        if s == "timestamp":
            return lambda v: v.date()

        def to_date(v: Any) -> dt.date:
            parsed = parse_date(v)
            return parsed if parsed is not None else _invalid(v, source, "date")

        return to_date
    if t == "timestamp":
        if s == "date":
            return lambda v: dt.datetime(v.year, v.month, v.day)

        def to_timestamp(v: Any) -> dt.datetime:
            parsed = parse_timestamp(v)
            return parsed if parsed is not None else _invalid(v, source, "timestamp")

        return to_timestamp
    if t == "binary":
        return lambda v: v.encode("utf-8")
    raise AssertionError(f"no cast from {source} to {target}")  # castable() is checked first


def _to_integral(source: SparkType, t: str) -> Callable[[Any], int]:
    """One value of ``source`` as INT or BIGINT (``t``): truncated toward zero; an overflow
    or malformed text fails."""
    s = source.kind

    def to_integral(v: Any) -> int:
        if s == "boolean":
            return int(v)
        if s == "string":
            text = v.strip(_WS)
            if not _INTEGER_TEXT.match(text):
                _invalid(v, source, t)
            number = int(text)
            low, high = (INT_MIN, INT_MAX) if t == "int" else (LONG_MIN, LONG_MAX)
            if not low <= number <= high:
                _invalid(v, source, t)
            return number
        if s == "double":
            if math.isnan(v) or math.isinf(v):
                fail_evaluation("CAST_OVERFLOW", f"The value {v} cannot be cast to {t.upper()}")
            number = int(v)
        else:
            number = int(v)  # int/decimal: truncates toward zero
        low, high = (INT_MIN, INT_MAX) if t == "int" else (LONG_MIN, LONG_MAX)
        if not low <= number <= high:
            fail_evaluation("CAST_OVERFLOW", f"The value {v} cannot be cast to {t.upper()} due to an overflow")
        return number

    return to_integral


def _to_decimal(source: SparkType, target: SparkType) -> Callable[[Any], Decimal | None]:
    """One value of ``source`` as ``target``'s DECIMAL: rounded HALF_UP; an overflow or
    malformed text fails."""
    s = source.kind

    def to_decimal(v: Any) -> Decimal | None:
        if s == "boolean":
            number = Decimal(int(v))
        elif s == "string":
            text = v.strip(_WS_NUMBER)
            if not _DECIMAL_TEXT.match(text):
                _invalid(v, source, str(target))
            number = Decimal(text)
        elif s == "double":
            if math.isnan(v) or math.isinf(v):
                _invalid(v, source, str(target))
            number = Decimal(repr(v))
        else:
            number = Decimal(v)
        quantum = Decimal(1).scaleb(-target.scale)
        rounded = number.quantize(quantum, rounding=ROUND_HALF_UP, context=DECIMAL_CONTEXT)
        if rounded != 0 and rounded.adjusted() >= target.precision - target.scale:
            fail_evaluation("NUMERIC_VALUE_OUT_OF_RANGE",
                            f"{v} cannot be represented as Decimal({target.precision}, {target.scale})")
        return rounded

    return to_decimal


def _to_double(source: SparkType) -> Callable[[Any], float]:
    """One value of ``source`` as DOUBLE; text may spell NaN and the infinities as Java does."""
    s = source.kind

    def to_double(v: Any) -> float:
        if s == "string":
            text = v.strip(_WS_NUMBER)
            lowered = text.lower()
            specials = {"nan": math.nan, "infinity": math.inf, "+infinity": math.inf,
                        "-infinity": -math.inf, "inf": math.inf, "+inf": math.inf,
                        "-inf": -math.inf}
            if lowered in specials:
                return specials[lowered]
            if not re.match(r"^[+-]?(\d+\.?\d*|\.\d+)([eE][+-]?\d+)?[dDfF]?$", text, re.A):
                _invalid(v, source, "double")
            return float(text.rstrip("dDfF"))
        return float(v)

    return to_double


def _to_boolean(source: SparkType) -> Callable[[Any], bool]:
    """One value of ``source`` as BOOLEAN: numbers by != 0, text by Spark's words."""
    s = source.kind

    def to_boolean(v: Any) -> bool:
        if s == "string":
            text = v.strip(_WS).lower()
            if text in _TRUE:
                return True
            if text in _FALSE:
                return False
            _invalid(v, source, "boolean")
        return v != 0

    return to_boolean
