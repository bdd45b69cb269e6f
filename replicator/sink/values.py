"""Python values from the source -> values of the target type (staging's side of the mapping).

One converter per planned column, chosen once from its ``TargetType``; masks are applied
before conversion. The results are what ``pyarrow.array(values, type=arrow_type(...))``
accepts for the exact Arrow type of the staging column. Pure Python (no pyarrow here).
"""

from __future__ import annotations

import datetime as dt
import hashlib
import json
from collections.abc import Callable
from decimal import ROUND_HALF_EVEN, Context, Decimal, InvalidOperation
from typing import Any

from replicator.errors import SinkError
from replicator.model.pipeline import MaskKind
from replicator.model.text import value_text
from replicator.plan.model import PlannedColumn
from replicator.plan.types import TargetType

Converter = Callable[[Any], Any]
UTC = dt.UTC


def _micros(value: dt.timedelta) -> int:
    return (value.days * 86_400 + value.seconds) * 1_000_000 + value.microseconds


def _to_int(value: Any) -> int:
    if isinstance(value, dt.timedelta):
        return _micros(value)
    if isinstance(value, (bytes, bytearray)):
        return int.from_bytes(value, "big")
    if isinstance(value, str):
        return int(Decimal(value))
    return int(value)


def _decimal_converter(target_type: TargetType) -> Converter:
    quantum = Decimal(1).scaleb(-(target_type.scale or 0))
    # quantize() fails when the result needs more digits than the context's precision:
    # exactly "does not fit NUMBER(p,s)".
    context = Context(prec=target_type.precision or 38)

    def convert(value: Any) -> Decimal:
        if isinstance(value, dt.timedelta):
            value = _micros(value)
        number = value if isinstance(value, Decimal) else Decimal(
            repr(value) if isinstance(value, float) else str(int(value) if isinstance(value, bool) else value)
        )
        try:
            return number.quantize(quantum, rounding=ROUND_HALF_EVEN, context=context)
        except InvalidOperation:
            raise SinkError(
                f"value {number} does not fit {target_type.describe()}",
                hint="declare a wider target type for the column (type: NUMBER(38,s) or VARCHAR)",
            ) from None

    return convert


def _to_bool(value: Any) -> bool:
    if isinstance(value, (bytes, bytearray)):
        return any(value)
    if isinstance(value, str):
        return value.strip().lower() not in ("", "0", "false", "f", "n", "no")
    return bool(value)


def _to_date(value: Any) -> dt.date:
    if isinstance(value, dt.datetime):
        return value.date()
    if isinstance(value, str):
        return dt.date.fromisoformat(value[:10])
    return value


def _to_naive(value: Any) -> dt.datetime:
    if isinstance(value, str):
        value = dt.datetime.fromisoformat(value)
    elif not isinstance(value, dt.datetime):  # a date
        value = dt.datetime(value.year, value.month, value.day)
    if value.tzinfo is not None:
        value = value.astimezone(UTC).replace(tzinfo=None)
    return value


def _to_utc(value: Any) -> dt.datetime:
    if isinstance(value, str):
        value = dt.datetime.fromisoformat(value)
    elif not isinstance(value, dt.datetime):
        value = dt.datetime(value.year, value.month, value.day)
    # MySQL TIMESTAMPs arrive aware in UTC; a naive value is taken to be UTC already.
    return value.replace(tzinfo=UTC) if value.tzinfo is None else value.astimezone(UTC)


def _binary_converter(column: PlannedColumn) -> Converter:
    width = max(1, ((column.mysql_type.length or 1) + 7) // 8) if column.mysql_type else 8

    def convert(value: Any) -> bytes:
        if isinstance(value, bool):
            value = int(value)
        if isinstance(value, int):  # BIT(n): big-endian, as MySQL stores it
            return value.to_bytes(width, "big")
        if isinstance(value, str):
            return value.encode("utf-8")
        return bytes(value)

    return convert


def _json_text(value: Any) -> str:
    if isinstance(value, str):
        return value  # the JSON text as MySQL gave it
    if isinstance(value, (bytes, bytearray)):
        return bytes(value).decode("utf-8")
    return json.dumps(value)


def value_converter(column: PlannedColumn) -> Converter:
    """The function turning one source value into this column's staged value (None-safe)."""
    target_type = column.target_type
    fsp = (column.mysql_type.fsp if column.mysql_type else None) or 0
    kind = target_type.kind
    if kind == "integer":
        inner: Converter = _to_int
    elif kind == "decimal":
        inner = _decimal_converter(target_type)
    elif kind == "float":
        inner = float
    elif kind in ("string", "time_text"):
        inner = lambda v: value_text(v, fsp)  # noqa: E731
    elif kind == "boolean":
        inner = _to_bool
    elif kind == "date":
        inner = _to_date
    elif kind == "timestamp":
        inner = _to_naive
    elif kind == "timestamp_tz":
        inner = _to_utc
    elif kind == "binary":
        inner = _binary_converter(column)
    elif kind == "json":
        inner = _json_text
    else:  # pragma: no cover - TargetKind is closed
        raise SinkError(f"no staging conversion for target type {kind}")
    if column.mask == "truncate":
        length = column.mask_length or 0
        return lambda v: None if v is None else inner(v)[:length]
    if column.mask:
        masked = mask_function(column.mask, fsp, salt=column.mask_salt,
                               keep_last=column.mask_keep_last)
        return lambda v: None if v is None else masked(v)
    return lambda v: None if v is None else inner(v)


def mask_function(mask: MaskKind, fsp: int = 0, *, salt: str | None = None,
                  keep_last: int | None = None) -> Converter:
    """The masked value of a non-NULL value (NULL stays NULL under every mask: callers).

    sha256/md5: hex digest of the UTF-8 text (raw bytes for binary values); with a salt,
    sha256(salt UTF-8 bytes + those bytes), so the warehouse can compute the same hash with
    sha2(concat(salt, value), 256). redact: '***'; with keep_last N: one '*' per character
    but the last N ('************1234'; a value of N characters or fewer is all '*').
    null: NULL. Non-text values are masked over their text form as MySQL prints it (binary
    values as hex for redact). truncate is applied after the type conversion (value_converter).
    """
    if mask == "null":
        return lambda value: None
    if mask == "redact":
        if not keep_last:
            return lambda value: "***"
        keep = keep_last

        def redact(value: Any) -> str:
            text = value_text(value, fsp)
            if len(text) <= keep:
                return "*" * len(text)
            return "*" * (len(text) - keep) + text[-keep:]

        return redact
    algorithm = getattr(hashlib, mask)
    prefix = salt.encode("utf-8") if salt else b""

    def digest(value: Any) -> str:
        data = bytes(value) if isinstance(value, (bytes, bytearray, memoryview)) else value_text(
            value, fsp
        ).encode("utf-8")
        return str(algorithm(prefix + data).hexdigest())

    return digest
