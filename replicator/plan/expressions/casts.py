"""Which CASTs between Spark types Spark 4 (ANSI) allows, and the date and timestamp text
Spark reads in a literal (``DATE '2024-01-01'``, or a string literal compared with a DATE or
TIMESTAMP column). Nothing is cast here: the engine casts (``plan.transpile.casts``).
"""

from __future__ import annotations

import datetime as dt
import re

from replicator.plan.expressions.spark_types import SparkType

_DATE_TEXT = re.compile(r"^([+-]?\d{4,6})(?:-(\d{1,2})(?:-(\d{1,2})(?:[ T].*)?)?)?$", re.S | re.A)
_TIMESTAMP_TEXT = re.compile(
    r"^(\d{4})-(\d{1,2})-(\d{1,2})(?:[ T](\d{1,2}):(\d{1,2})(?::(\d{1,2})(?:\.(\d{1,9}))?)?)?$", re.A)
# What Spark's UTF8String.trimAll() removes around a date being cast: it tests each BYTE for
# Java whitespace or ISO control, so only ASCII ones (0x00-0x20, DEL).
_WS = "".join(chr(c) for c in (*range(0x21), 0x7F))


def parse_date(text: str) -> dt.date | None:
    """The date Spark reads in a literal's text, or None (Spark: NULL, or a failed cast)."""
    match = _DATE_TEXT.match(text.strip(_WS))
    if not match:
        return None
    try:
        return dt.date(int(match.group(1)), int(match.group(2) or 1), int(match.group(3) or 1))
    except ValueError:
        return None


def parse_timestamp(text: str) -> dt.datetime | None:
    """The timestamp Spark reads in a literal's text (UTC), or None."""
    match = _TIMESTAMP_TEXT.match(text.strip(_WS))
    if not match:
        return None
    y, mo, d, h, mi, s, fraction = match.groups()
    try:
        micros = int((fraction or "0")[:6].ljust(6, "0"))
        return dt.datetime(int(y), int(mo), int(d), int(h or 0), int(mi or 0), int(s or 0), micros)
    except ValueError:
        return None


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
