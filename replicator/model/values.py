"""Exact encoding of row values for crossing process boundaries (Spark rows, checkpoints).

A row image is a dict of column name -> Python value. ``encode_image`` turns it into one
JSON text that ``decode_image`` turns back into *equal* values of the *same* types:

========================  =========================================
Python value              JSON
========================  =========================================
None                      null           (never the string 'None')
bool, int (any size)      true/false, integer (BIGINT UNSIGNED max fits)
float                     {"$f": repr}   (keeps inf/nan, and -0.0)
str                       string (quotes, backslashes, newlines, emoji untouched)
Decimal                   {"$dec": "12345.6789000000"}  (every digit, exponent kept)
bytes                     {"$b": base64}
datetime (naive)          {"$dt": "2024-01-02T03:04:05.123456"}
datetime (aware)          {"$dtz": "2024-01-02T03:04:05.123456+00:00"}
date                      {"$d": "2024-01-02"}
timedelta (MySQL TIME)    {"$td": microseconds}  (negative and > 24 h)
========================  =========================================

Values never go into SQL text; this encoding is for the data path only.
"""

from __future__ import annotations

import base64
import datetime as dt
import json
from decimal import Decimal
from typing import Any


def encode_value(value: Any) -> Any:
    """One Python value -> a JSON-able value (see the module table)."""
    if value is None or isinstance(value, (bool, int, str)):
        return value
    if isinstance(value, float):
        return {"$f": repr(value)}
    if isinstance(value, Decimal):
        return {"$dec": str(value)}
    if isinstance(value, (bytes, bytearray, memoryview)):
        return {"$b": base64.b64encode(bytes(value)).decode("ascii")}
    if isinstance(value, dt.datetime):  # before date: datetime is a date
        if value.tzinfo is not None:
            return {"$dtz": value.isoformat()}
        return {"$dt": value.isoformat()}
    if isinstance(value, dt.date):
        return {"$d": value.isoformat()}
    if isinstance(value, dt.timedelta):
        return {"$td": (value.days * 86_400 + value.seconds) * 1_000_000 + value.microseconds}
    raise TypeError(f"cannot encode a {type(value).__name__} row value: {value!r}")


_DECODERS = {
    "$f": float,
    "$dec": Decimal,
    "$b": lambda text: base64.b64decode(text),
    "$dt": dt.datetime.fromisoformat,
    "$dtz": dt.datetime.fromisoformat,
    "$d": dt.date.fromisoformat,
    "$td": lambda micros: dt.timedelta(microseconds=micros),
}


def decode_value(value: Any) -> Any:
    """The inverse of ``encode_value``."""
    if isinstance(value, dict):
        ((tag, payload),) = value.items()
        return _DECODERS[tag](payload)
    return value


def encode_image(image: dict[str, Any] | None) -> str | None:
    """A row image -> JSON text (None stays None: there is no image)."""
    if image is None:
        return None
    return json.dumps(
        {column: encode_value(value) for column, value in image.items()},
        ensure_ascii=False,
        separators=(",", ":"),
    )


def decode_image(text: str | None) -> dict[str, Any] | None:
    if text is None:
        return None
    return {column: decode_value(value) for column, value in json.loads(text).items()}
