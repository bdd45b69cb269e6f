"""Source values as text, the way MySQL prints them: one printer for every place that turns a
value into a string (the decoders' TIME columns, staging text columns, expressions, the
demo's comparison)."""

from __future__ import annotations

import datetime as dt
from decimal import Decimal
from typing import Any


def time_text(value: dt.timedelta, fsp: int) -> str:
    """A TIME value as MySQL prints it ('-838:59:59', '12:00:00.500000'): the text a TIME
    column of a change batch holds (the same as the staging text, ``transform.columns.text_form``)."""
    micros = (value.days * 86_400 + value.seconds) * 1_000_000 + value.microseconds
    sign = "-" if micros < 0 else ""
    micros = abs(micros)
    seconds, fraction = divmod(micros, 1_000_000)
    hours, rest = divmod(seconds, 3600)
    minutes, seconds = divmod(rest, 60)
    text = f"{sign}{hours:02d}:{minutes:02d}:{seconds:02d}"
    if fsp or fraction:
        text += "." + f"{fraction:06d}"[: max(fsp, 1) if fsp else 6]
    return text


def value_text(value: Any, fsp: int) -> str:
    """A source value as MySQL prints it (``fsp``: a TIME's fractional digits): the text a
    value takes in a text column (staging, ``CAST(... AS CHAR)`` in expressions)."""
    if isinstance(value, str):
        return value
    if isinstance(value, (bytes, bytearray, memoryview)):
        return bytes(value).hex()
    if isinstance(value, dt.timedelta):
        return time_text(value, fsp)
    if isinstance(value, dt.datetime):
        return value.isoformat(sep=" ")
    if isinstance(value, dt.date):
        return value.isoformat()
    if isinstance(value, Decimal):
        return format(value, "f")  # every digit, never an exponent
    if isinstance(value, bool):
        return str(int(value))
    if isinstance(value, float):
        return repr(value)
    return str(value)
