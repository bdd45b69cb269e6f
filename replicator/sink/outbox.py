"""Outbox rows -> route events (the ``sink.adapt`` step of an outbox route; pure Python).

For a TablePlan with ``outbox`` set, the events of the outbox table become events of the
route:

- only inserts (``c``) and snapshot reads (``r``) of outbox rows are events; updates and
  deletes of outbox rows are dropped (applications delete the row right after inserting it);
- rows whose type column holds another value are dropped (another route takes them); a
  value no route takes is "unrouted": ignored and counted, or an error (``unrouted: fail``);
- the payload is parsed as JSON with numbers kept exact (integers as int, the rest as
  Decimal), each column's JSON path is evaluated and the value converted to the column's
  type, exactly or not at all (``convert``);
- the route event keeps the outbox row's op (``c``, or ``r`` from a snapshot) and position,
  so the usual rules apply: in a merge route the last event of a key wins (binlog order; the
  snapshot applies rows in the outbox key order), a changelog route appends every one;
  a truthy value at ``delete_when`` makes it a ``d`` of the key (before-image = the route row).

Route images are keyed by route column names (the plan's ``source_column`` of each route
column), so ``sink.staging`` maps them like any table's.
"""

from __future__ import annotations

import base64
import dataclasses
import datetime as dt
import json
import re
from collections.abc import Callable
from decimal import Context, Decimal, InvalidOperation
from functools import lru_cache
from typing import TYPE_CHECKING, Any

from replicator.errors import SinkError
from replicator.model.jsonpath import MISSING, evaluate, parse_path
from replicator.plan.types import TargetType
from replicator.sink.values import value_converter

if TYPE_CHECKING:
    from replicator.model.changes import ChangeEvent
    from replicator.plan.model import OutboxPlan, TablePlan

Converter = Callable[[Any], Any]
UTC = dt.UTC

_INTEGER_TEXT = re.compile(r"-?(0|[1-9]\d*)")
_NUMBER_TEXT = re.compile(r"-?(0|[1-9]\d*)(\.\d+)?([eE][+-]?\d+)?")
_DATE_TEXT = re.compile(r"\d{4}-\d{2}-\d{2}")
_TRUE_TEXT = frozenset({"true", "1", "yes"})
INT64_MIN, INT64_MAX = -(2**63), 2**63 - 1
# Wide enough to quantize any NUMBER(38,s) value; a value needing more digits is too large.
_QUANTIZE = Context(prec=100)


class OutboxError(SinkError):
    """An outbox row that cannot become an event of its route (stops the pipeline)."""


class BadValue(ValueError):
    """A JSON value that does not convert to a column's type; the text says why."""


# -- JSON ----------------------------------------------------------------------------------


def _reject_constant(name: str) -> Any:
    raise ValueError(f"{name} is not JSON")


def parse_payload(value: Any) -> Any:
    """The payload column's value (JSON text, or its UTF-8 bytes) -> Python, numbers exact."""
    if isinstance(value, (bytes, bytearray, memoryview)):
        value = bytes(value).decode("utf-8")
    if not isinstance(value, str):
        raise ValueError(f"a {type(value).__name__}, not JSON text")
    return json.loads(value, parse_float=Decimal, parse_int=int,
                      parse_constant=_reject_constant)


class _HasDecimal(Exception):
    pass


def _refuse_decimal(value: Any) -> Any:
    raise _HasDecimal


# The C encoder, for documents without fractional numbers (most); it stops at a Decimal.
_FAST = json.JSONEncoder(ensure_ascii=False, separators=(",", ":"), default=_refuse_decimal)


def json_text(value: Any) -> str:
    """Parsed JSON -> compact JSON text; Decimals keep their digits, text stays unescaped."""
    try:
        return _FAST.encode(value)
    except _HasDecimal:
        return _json_text(value)


def _json_text(value: Any) -> str:
    if isinstance(value, dict):
        return "{" + ",".join(
            _FAST.encode(key) + ":" + _json_text(item) for key, item in value.items()
        ) + "}"
    if isinstance(value, list):
        return "[" + ",".join(_json_text(item) for item in value) + "]"
    if isinstance(value, Decimal):
        return str(value)  # from the JSON text: finite, a valid JSON number (1.50, 1E+5)
    return _FAST.encode(value)


def _valid_text(text: str) -> str:
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        raise BadValue("holds an unpaired surrogate (\\ud800-\\udfff), which is not "
                       "valid Unicode") from None
    return text


def truthy(value: Any) -> bool:
    """delete_when: true, a non-zero number, or the text true/1/yes (any case)."""
    if isinstance(value, bool):
        return value
    if isinstance(value, (int, Decimal)):
        return value != 0
    if isinstance(value, str):
        return value.strip().lower() in _TRUE_TEXT
    return False


# -- conversions ---------------------------------------------------------------------------


def _kind_name(value: Any) -> str:
    if isinstance(value, bool):
        return "a boolean"
    if isinstance(value, (int, Decimal)):
        return "a number"
    if isinstance(value, str):
        return "a string"
    if isinstance(value, list):
        return "an array"
    if isinstance(value, dict):
        return "an object"
    return type(value).__name__


def _number(value: Any, what: str) -> Decimal | int:
    if isinstance(value, bool) or not isinstance(value, (int, Decimal, str)):
        raise BadValue(f"is {_kind_name(value)}, not {what}")
    if isinstance(value, str):
        text = value.strip()
        if not _NUMBER_TEXT.fullmatch(text):
            raise BadValue(f"is not {what}")
        return int(text) if _INTEGER_TEXT.fullmatch(text) else Decimal(text)
    return value


def _integer(target: TargetType) -> Converter:
    def convert(value: Any) -> int:
        number = _number(value, "an integer")
        if isinstance(number, Decimal):
            if number != number.to_integral_value():
                raise BadValue("has a fraction; an integer column would lose it")
            number = int(number)
        if not INT64_MIN <= number <= INT64_MAX or (
            target.precision is not None and abs(number) >= 10**target.precision
        ):
            raise BadValue("is out of range")
        return number

    return convert


def _decimal(target: TargetType) -> Converter:
    precision, scale = target.precision or 38, target.scale or 0
    quantum = Decimal(1).scaleb(-scale)

    def convert(value: Any) -> Decimal:
        number = _number(value, "a number")
        exact = Decimal(number)
        try:
            fitted = exact.quantize(quantum, context=_QUANTIZE)
        except InvalidOperation:
            raise BadValue("is too large") from None
        if fitted != exact:
            raise BadValue("has a fraction (it would be rounded)" if scale == 0 else
                           f"has more than {scale} decimal places (it would be rounded)")
        if len(fitted.as_tuple().digits) > precision and fitted != 0:
            raise BadValue(f"has more than {precision} digits")
        return fitted

    return convert


def _float(value: Any) -> float:
    number = _number(value, "a number")
    result = float(number)
    if result in (float("inf"), float("-inf")):
        raise BadValue("is too large for a FLOAT")
    return result


def _string(target: TargetType) -> Converter:
    def convert(value: Any) -> str:
        if isinstance(value, str):
            text = _valid_text(value)
        elif isinstance(value, bool):
            text = "true" if value else "false"
        elif isinstance(value, Decimal):
            text = format(value, "f")  # every digit, never an exponent
        elif isinstance(value, int):
            text = str(value)
        else:  # an object or an array: its JSON text
            text = _valid_text(json_text(value))
        if target.length is not None and len(text) > target.length:
            raise BadValue(f"is {len(text)} characters long, more than {target.length}")
        return text

    return convert


def _boolean(value: Any) -> bool:
    if isinstance(value, bool):
        return value
    if isinstance(value, int) and value in (0, 1):
        return bool(value)
    if isinstance(value, str) and value.strip().lower() in ("true", "false"):
        return value.strip().lower() == "true"
    raise BadValue("is not a boolean (true, false, 0, 1, \"true\", \"false\")")


def _date(value: Any) -> dt.date:
    if not isinstance(value, str) or not _DATE_TEXT.fullmatch(value.strip()):
        raise BadValue("is not an ISO-8601 date (YYYY-MM-DD)")
    try:
        return dt.date.fromisoformat(value.strip())
    except ValueError as exc:
        raise BadValue(f"is not a valid date ({exc})") from None


def _timestamp_text(value: Any) -> dt.datetime:
    if not isinstance(value, str) or not _DATE_TEXT.match(value.strip()):
        raise BadValue("is not an ISO-8601 timestamp (YYYY-MM-DDTHH:MM:SS[.ffffff][+HH:MM|Z])")
    text = value.strip()
    try:
        return dt.datetime.fromisoformat(text)
    except ValueError as exc:
        raise BadValue(f"is not a valid ISO-8601 timestamp ({exc})") from None


def _check_fsp(stamp: dt.datetime, target: TargetType) -> dt.datetime:
    fsp = 6 if target.fsp is None else target.fsp
    if fsp < 6 and stamp.microsecond % 10 ** (6 - fsp):
        raise BadValue(f"has more than {fsp} fractional digits")
    return stamp


def _timestamp(target: TargetType) -> Converter:
    def convert(value: Any) -> dt.datetime:
        stamp = _timestamp_text(value)
        if stamp.tzinfo is not None:  # an instant: the wall clock in UTC
            stamp = stamp.astimezone(UTC).replace(tzinfo=None)
        return _check_fsp(stamp, target)

    return convert


def _timestamp_tz(target: TargetType) -> Converter:
    def convert(value: Any) -> dt.datetime:
        stamp = _timestamp_text(value)
        # Without an offset the text is taken to be UTC already (as MySQL TIMESTAMPs are).
        stamp = stamp.replace(tzinfo=UTC) if stamp.tzinfo is None else stamp.astimezone(UTC)
        return _check_fsp(stamp, target)

    return convert


def _binary(value: Any) -> bytes:
    if not isinstance(value, str):
        raise BadValue(f"is {_kind_name(value)}, not base64 text")
    try:
        return base64.b64decode(value, validate=True)
    except ValueError:
        raise BadValue("is not base64 text") from None


def _json(value: Any) -> str:
    return _valid_text(json_text(value))


def converter(target: TargetType) -> Converter:
    """JSON value (as ``parse_payload`` gives it, never None) -> the column's staged value.

    Raises ``BadValue`` when the value has no exact counterpart of the type.
    """
    kind = target.kind
    if kind == "integer":
        return _integer(target)
    if kind == "decimal":
        return _decimal(target)
    if kind == "float":
        return _float
    if kind in ("string", "time_text"):
        return _string(target)
    if kind == "boolean":
        return _boolean
    if kind == "date":
        return _date
    if kind == "timestamp":
        return _timestamp(target)
    if kind == "timestamp_tz":
        return _timestamp_tz(target)
    if kind == "binary":
        return _binary
    return _json


# -- the adapt step ------------------------------------------------------------------------


@dataclasses.dataclass(frozen=True)
class _Column:
    name: str
    path: str  # the JSON path, or "outbox column <name>" (for messages)
    steps: tuple[str | int, ...]
    convert: Converter
    row_column: str | None  # taken from the outbox row (typed MySQL value), not the payload
    type_label: str
    is_key: bool
    null_on_error: bool


@dataclasses.dataclass(frozen=True)
class _Route:
    spec: OutboxPlan
    label: str
    target: str
    columns: tuple[_Column, ...]
    delete_when: tuple[str | int, ...] | None


@lru_cache(maxsize=64)
def _route(table: TablePlan) -> _Route:
    spec = table.outbox
    assert spec is not None
    by_name = {c.source_column: c for c in table.data_columns}
    columns = []
    for name, path in spec.paths:
        planned = by_name[name]
        columns.append(_Column(
            name=name, path=path, steps=parse_path(path).steps,
            convert=converter(planned.target_type), row_column=None,
            type_label=planned.target_type.describe(), is_key=planned.is_key,
            null_on_error=name in spec.null_on_error,
        ))
    for name, row_column in spec.row_columns:
        planned = by_name[name]
        columns.append(_Column(
            name=name, path=f"outbox column {row_column}", steps=(),
            convert=_row_converter(planned), row_column=row_column,
            type_label=planned.target_type.describe(), is_key=planned.is_key,
            null_on_error=name in spec.null_on_error,
        ))
    return _Route(
        spec=spec, label=table.label, target=table.target_table, columns=tuple(columns),
        delete_when=parse_path(spec.delete_when).steps if spec.delete_when else None,
    )


def _row_converter(planned: Any) -> Converter:
    """A typed MySQL value of the outbox row -> the column's type, as a table column's
    declared ``type:`` converts it (``sink.values``); failures become BadValue."""
    convert = value_converter(planned)

    def checked(value: Any) -> Any:
        try:
            return convert(value)
        except SinkError as exc:
            raise BadValue(exc.message) from None
        except ArithmeticError:  # decimal.InvalidOperation: not a number at all
            raise BadValue("is not a number") from None
        except (ValueError, TypeError) as exc:
            raise BadValue(f"does not convert ({exc})") from None

    return checked


def type_value(value: Any) -> str | None:
    """The type column's value as the text routes are named by (None stays None)."""
    if value is None:
        return None
    if isinstance(value, (bytes, bytearray, memoryview)):
        return bytes(value).decode("utf-8", "replace")
    return str(value)


def _show(value: Any) -> str:
    try:
        text = json.dumps(value, ensure_ascii=False) if isinstance(value, str) else \
            json_text(value)
    except _HasDecimal:  # not a JSON value: a typed value of an outbox column
        text = repr(value)
    return text if len(text) <= 200 else text[:197] + "..."


def _row_name(event: ChangeEvent, spec: OutboxPlan) -> str:
    image = event.after or {}
    where = f"at {event.position} #{event.row_index}" if event.op != "r" else "(snapshot)"
    if spec.outbox_key:
        key = ", ".join(f"{name}={image.get(name)!r}" for name in spec.outbox_key)
        return f"{event.table} row {key} {where}"
    return f"{event.table} row {where}"


def _route_image(route: _Route, event: ChangeEvent, payload: Any) -> dict[str, Any]:
    image: dict[str, Any] = {}
    for column in route.columns:
        if column.row_column is not None:
            value = (event.after or {}).get(column.row_column)
        else:
            value = evaluate(column.steps, payload)
        if value is None or value is MISSING:
            if column.is_key:
                raise OutboxError(
                    f"{_row_name(event, route.spec)}, route {route.label} -> {route.target}: "
                    f"key column {column.name} ({column.path}) is "
                    f"{'missing' if value is MISSING else 'null'} in the "
                    f"{'outbox row' if column.row_column else 'payload'}",
                    hint="every event of a route needs its key; fix the producer, or point "
                    "the column's path at the key",
                )
            image[column.name] = None
            continue
        try:
            image[column.name] = column.convert(value)
        except BadValue as exc:
            if column.null_on_error:
                image[column.name] = None
                continue
            raise OutboxError(
                f"{_row_name(event, route.spec)}, route {route.label} -> {route.target}, "
                f"column {column.name} ({column.path}, {column.type_label}): value "
                f"{_show(value)} {exc}",
                hint="fix the producer, declare a type that holds the value"
                + ("" if column.is_key else ", or set `on_error: null` on the column to load "
                   "NULL instead"),
            ) from None
    return image


def flatten_outbox(table: TablePlan, events: list[ChangeEvent]) -> list[ChangeEvent]:
    """The events of ``table``'s route among the outbox table's ``events``."""
    if table.outbox is None:
        return events
    route = _route(table)
    spec = route.spec
    out = []
    for event in events:
        if event.op not in ("c", "r") or event.after is None:
            continue  # updates and deletes of outbox rows are not events
        kind = type_value(event.after.get(spec.type_column))
        if kind != spec.route:
            if spec.unrouted == "fail" and kind not in spec.routed:
                raise OutboxError(
                    f"{_row_name(event, spec)}: no route for {spec.type_column} = {kind!r}",
                    hint=f"add a route for it under outbox.routes (routes: "
                    f"{', '.join(spec.routed)}), or set `unrouted: ignore`",
                )
            continue
        raw = event.after.get(spec.payload_column)
        try:
            if raw is None:
                raise ValueError("it is NULL")
            payload = parse_payload(raw)
        except (ValueError, UnicodeDecodeError) as exc:
            raise OutboxError(
                f"{_row_name(event, spec)}, route {route.label}: the payload "
                f"({spec.payload_column}) is not JSON: {exc}",
                hint="the producer must write a JSON document into the payload column",
            ) from None
        if not isinstance(payload, (dict, list)):
            raise OutboxError(
                f"{_row_name(event, spec)}, route {route.label}: the payload is "
                f"{_kind_name(payload)}, not a JSON object",
                hint="the producer must write a JSON object ({...}) into the payload column",
            )
        image = _route_image(route, event, payload)
        deleted = route.delete_when is not None and truthy(evaluate(route.delete_when, payload))
        if deleted:
            out.append(dataclasses.replace(event, op="d", before=image, after=None))
        else:
            out.append(dataclasses.replace(event, before=None, after=image))
    return out


def count_unrouted(table: TablePlan, events: list[ChangeEvent]) -> int:
    """Outbox events (inserts, snapshot rows) whose type no route of the outbox takes."""
    spec = table.outbox
    if spec is None:
        return 0
    return sum(
        1 for event in events
        if event.op in ("c", "r") and event.after is not None
        and type_value(event.after.get(spec.type_column)) not in spec.routed
    )
