"""Outbox routes, columnar: the outbox table's change batch -> the route's change batch.

An outbox route's events are the inserts and snapshot reads of outbox rows whose type column
names the route; each event's columns are JSON paths into its payload, converted exactly to
the column's type (``sink.outbox`` holds the rules, docs/modes.md#outbox). Here that is done
over the whole Arrow batch at once, never per row:

- the route's rows are picked with Arrow compute (op ``c``/``r``, the type column);
- their payloads become one newline-delimited buffer that Arrow's JSON reader parses with an
  explicit schema built from the route's paths and types (``route_schema``): integers as
  int64, DECIMAL(p,s) as decimal128(38,s) (numbers exact, from their text), FLOAT as float64,
  text as string, booleans as bool;
- the result is a change batch of the route (its columns, the outbox row's internal columns,
  ``d`` where ``delete_when`` is true) that ``transform.stage_batch`` stages like any table's.

Arrow's reader is stricter than the per-row rules (a JSON ``1.0`` is no int64, ``"42"`` no
number, a value with more decimals than the scale fails to parse), never looser where it
matters: whatever it cannot read exactly, and every batch that holds a value the per-row
rules refuse or read differently (a NULL key, a number out of the column's range, a string
too long, NaN/Infinity, a BOM, a payload over several lines, ...), makes ``route_batch``
return None, and the batch takes the per-row path (``sink.outbox.flatten_outbox``), which
gives the same values and, for a bad row, its precise error. A differential test
(tests/unit/test_outbox_columnar.py) holds the two paths equal.
"""

from __future__ import annotations

from functools import lru_cache
from typing import TYPE_CHECKING, Any

from replicator.model import change_batch as cb
from replicator.model.jsonpath import parse_path

if TYPE_CHECKING:
    import pyarrow as pa

    from replicator.plan.model import TablePlan

# Target kinds Arrow's JSON reader converts as the per-row rules do (when it succeeds); a DATE
# is read as text and cast (Arrow's reader has no date from a JSON string).
_KINDS = frozenset({"integer", "decimal", "float", "string", "boolean", "date", "timestamp",
                    "timestamp_tz"})
_DATE_TEXT = r"^\d{4}-\d{2}-\d{2}$"  # the per-row rule, without its strip (else: per row)
# A payload the reader would take and the per-row parser would not: NaN or an infinity as a
# value (rapidjson accepts them), a byte order mark, a line break (one payload per line).
_SUSPECT = r"[:,\[]\s*-?(NaN|Inf)|\x{feff}|[\r\n]"
_INT64 = (-(2**63), 2**63 - 1)


def _arrow_type(target: Any) -> pa.DataType | None:
    import pyarrow as pa

    kind = target.kind
    if kind == "integer":
        return pa.int64()
    if kind == "decimal":
        scale = target.scale or 0
        return pa.decimal128(38, scale) if scale <= 38 else None
    if kind == "timestamp":  # an offset is converted to UTC, as per row
        return pa.timestamp("us")
    if kind == "timestamp_tz":  # text without an offset is UTC, as per row
        return pa.timestamp("us", tz="UTC")
    return {"float": pa.float64(), "string": pa.string(), "boolean": pa.bool_(),
            "date": pa.string()}.get(kind)


@lru_cache(maxsize=64)
def route_schema(table: TablePlan) -> tuple[Any, tuple[tuple[str, tuple[str, ...]], ...]] | None:
    """The JSON reader's schema of a route (nested structs along each path) and each route
    column's path steps (``delete_when`` as ``""``), or None where the route has a column
    this path does not convert (array indexes, TIME, binary, JSON text, row columns other
    than integers into numbers and text into text, ...)."""
    import pyarrow as pa

    spec = table.outbox
    if spec is None:
        return None
    by_name = {c.source_column: c for c in table.data_columns}
    if any(by_name[name].target_type.kind not in ("integer", "decimal", "string")
           for name, _ in spec.row_columns):
        return None
    wanted: list[tuple[str, tuple[Any, ...], Any]] = []
    for name, path in spec.paths:
        target = by_name[name].target_type
        arrow = _arrow_type(target) if target.kind in _KINDS else None
        wanted.append((name, parse_path(path).steps, arrow))
    if spec.delete_when:
        wanted.append(("", parse_path(spec.delete_when).steps, pa.bool_()))
    tree: dict[str, Any] = {}
    for _, steps, arrow in wanted:
        if arrow is None or not steps or any(not isinstance(s, str) for s in steps):
            return None
        node = tree
        for step in steps[:-1]:
            node = node.setdefault(step, {})
            if not isinstance(node, dict):
                return None  # a path runs through another column's value
        if steps[-1] in node and node[steps[-1]] != arrow:
            return None  # one value read as two types, or a value that is also an object
        node[steps[-1]] = arrow

    def fields(node: dict[str, Any]) -> list[Any]:
        return [pa.field(k, pa.struct(fields(v)) if isinstance(v, dict) else v)
                for k, v in node.items()]

    return pa.schema(fields(tree)), tuple((name, tuple(steps)) for name, steps, _ in wanted)


def _type_is(column: Any, names: Any) -> Any:
    """Whether each row's type column names one of ``names`` (NULL: no), compared in the
    column's own type: text as text, integers by their decimal text (``str(int)``), bytes by
    the names' UTF-8 bytes (bytes that are not UTF-8 name no route, as
    ``sink.outbox.type_value`` decodes them with replacement characters)."""
    import pyarrow as pa
    import pyarrow.compute as pc

    names = list(names)
    kind = column.type
    if pa.types.is_binary(kind) or pa.types.is_large_binary(kind) \
            or pa.types.is_fixed_size_binary(kind):
        column = column.cast(pa.binary())
        value_set = pa.array([name.encode("utf-8") for name in names], pa.binary())
    else:
        if not (pa.types.is_string(kind) or pa.types.is_large_string(kind)):
            column = column.cast(pa.string())  # integers: str(int)
        value_set = pa.array(names, pa.string())
    return pc.fill_null(pc.is_in(column, value_set=value_set), False)


def _selected(table: TablePlan, batch: pa.Table) -> Any:
    """The mask of the route's rows, or None where the per-row path must judge the batch."""
    import pyarrow as pa
    import pyarrow.compute as pc

    spec = table.outbox
    assert spec is not None
    if spec.type_column not in batch.column_names or spec.payload_column not in batch.column_names \
            or any(name not in batch.column_names for name in cb.INTERNAL_COLUMNS):
        return None
    kinds = batch.column(spec.type_column)
    events = pc.is_in(batch.column(cb.OP), value_set=pa.array(["c", "r"]))
    if spec.unrouted == "fail":
        routed = _type_is(kinds, spec.routed)
        if pc.any(pc.and_(events, pc.invert(routed))).as_py():
            return None  # the per-row path names the row no route takes
    return pc.and_(events, _type_is(kinds, [spec.route]))


def route_batch(table: TablePlan, batch: pa.Table) -> pa.Table | None:
    """The change batch of ``table``'s route among ``batch`` (the outbox table's), or None
    where the per-row path must take this batch (module doc)."""
    import pyarrow as pa
    import pyarrow.compute as pc

    shape = route_schema(table)
    mask = _selected(table, batch) if shape is not None else None
    if shape is None or mask is None:
        return None
    schema, columns = shape
    spec = table.outbox
    assert spec is not None
    rows = batch.filter(mask)
    payloads = _payload_text(rows.column(spec.payload_column).combine_chunks())
    parsed = _parse_payloads(payloads, schema) if payloads is not None else None
    if parsed is None:
        return None
    by_name = {c.source_column: c for c in table.data_columns}
    values: dict[str, Any] = {}
    for name, steps in columns:
        value = parsed.column(steps[0]).combine_chunks() if parsed.num_rows else \
            pa.array([], schema.field(steps[0]).type)
        for step in steps[1:]:
            value = pc.struct_field(value, step)
        values[name] = value
    deleted = values.pop("", None)
    for name, row_column in spec.row_columns:  # the outbox row's own typed value
        value = rows.column(row_column).combine_chunks() if row_column in rows.column_names else None
        target = by_name[name].target_type
        if value is None or (target.kind == "string") != pa.types.is_string(value.type) or (
                target.kind != "string" and not pa.types.is_integer(value.type)):
            return None  # text into text, integers into numbers; the rest per row
        try:
            if target.kind == "integer":
                value = value.cast(pa.int64())
            elif target.kind == "decimal":
                value = value.cast(pa.decimal128(38, target.scale or 0))
        except pa.ArrowInvalid:
            return None  # out of range: the per-row path says so
        values[name] = value
    typed = _target_values(values, by_name)
    if typed is None:
        return None
    out: dict[str, Any] = dict(typed)
    for name, value in values.items():
        out[cb.before_column(name)] = pa.nulls(len(value), out[name].type)
    op = rows.column(cb.OP)
    if deleted is not None:
        op = pc.if_else(pc.fill_null(deleted, False), pa.scalar("d"), op)
    out[cb.OP] = op
    for name in cb.INTERNAL_COLUMNS:
        if name != cb.OP:
            out[name] = rows.column(name)
    return pa.table(out)


def _fits(value: Any, target: Any) -> bool:
    """Whether every value of the column is one the per-row rules take as it is."""
    import pyarrow as pa
    import pyarrow.compute as pc

    if not len(value) or value.null_count == len(value):
        return True
    if target.kind == "integer":
        low, high = _INT64
        if target.precision is not None:
            high = min(high, 10**target.precision - 1)
            low = max(low, -high)
        smallest, largest = pc.min_max(value).values()
        return low <= smallest.as_py() and largest.as_py() <= high
    if target.kind == "decimal":
        precision, scale = target.precision or 38, target.scale or 0
        bound = 10 ** (precision - scale)
        smallest, largest = pc.min_max(value).values()
        return -bound < smallest.as_py() and largest.as_py() < bound
    if target.kind == "float":
        return not pc.any(pc.is_inf(value)).as_py() and not pc.any(pc.is_nan(value)).as_py()
    if target.kind == "string" and target.length is not None:
        return pc.max(pc.utf8_length(value)).as_py() <= target.length
    if target.kind in ("timestamp", "timestamp_tz") and (target.fsp if target.fsp is not None else 6) < 6:
        import numpy as np

        micros = np.asarray(value.cast(pa.int64()).fill_null(0))
        return not np.any(micros % 10 ** (6 - target.fsp))
    return True


def count_unrouted(table: TablePlan, batch: pa.Table) -> int:
    """Outbox events (inserts, snapshot rows) of ``batch`` whose type no route takes (a NULL
    type, a batch without the type column: none takes them)."""
    import pyarrow as pa
    import pyarrow.compute as pc

    spec = table.outbox
    if spec is None or not batch.num_rows:
        return 0
    events = pc.is_in(batch.column(cb.OP), value_set=pa.array(["c", "r"]))
    if spec.type_column not in batch.column_names:
        return int(pc.sum(events).as_py() or 0)
    routed = _type_is(batch.column(spec.type_column), spec.routed)
    return int(pc.sum(pc.and_(events, pc.invert(routed))).as_py() or 0)


def describe_flattening(table: TablePlan) -> str:
    """``replicator plan``'s line on how run flattens a route's payloads."""
    shape = route_schema(table)
    if shape is None:
        return ("per event (sink.outbox): a column of this route has no columnar reading "
                "(an array index, TIME, binary, VARIANT/JSON text, or a row column other than "
                "integers into numbers or text into text)")
    return (f"columnar: Arrow's JSON reader with the schema {shape[0].to_string(show_schema_metadata=False)!r}"
            .replace("\\n", "; ") + ", per event (sink.outbox) for a batch it cannot read exactly")


def _payload_text(payloads: Any) -> Any:
    """The payloads as UTF-8 text, or None where the per-row path must judge them (not text,
    invalid UTF-8, a NULL, an empty or suspect payload: ``_SUSPECT``)."""
    import pyarrow as pa
    import pyarrow.compute as pc

    if pa.types.is_binary(payloads.type) or pa.types.is_large_binary(payloads.type):
        try:
            payloads = payloads.cast(pa.string())  # invalid UTF-8 fails here
        except pa.ArrowInvalid:
            return None
    elif not pa.types.is_string(payloads.type):
        return None
    if payloads.null_count or (len(payloads) and (
            pc.any(pc.match_substring_regex(payloads, _SUSPECT)).as_py()
            or pc.any(pc.equal(pc.utf8_trim_whitespace(payloads), "")).as_py())):
        return None
    return payloads


def _parse_payloads(payloads: Any, schema: Any) -> Any:
    """All payloads parsed at once by Arrow's JSON reader under the route's ``schema``, one
    row each; None where Arrow refuses them or reads another number of rows."""
    import numpy as np
    import pyarrow as pa
    import pyarrow.compute as pc
    import pyarrow.json as pj

    if not len(payloads):
        return schema.empty_table()
    # One payload per line: each with a line break appended, then the strings' data buffer as
    # it is (contiguous from the first offset to the last).
    lines = pc.binary_join_element_wise(payloads, "", "\n").cast(pa.large_string())
    offsets = np.frombuffer(lines.buffers()[1], dtype=np.int64)[lines.offset:lines.offset + len(lines) + 1]
    buffer = lines.buffers()[2].slice(int(offsets[0]), int(offsets[-1] - offsets[0]))
    try:
        parsed = pj.read_json(pa.BufferReader(buffer), read_options=pj.ReadOptions(use_threads=False),
                              parse_options=pj.ParseOptions(explicit_schema=schema,
                                                            unexpected_field_behavior="ignore"))
    except (pa.ArrowInvalid, pa.ArrowNotImplementedError):
        return None
    return parsed if parsed.num_rows == len(payloads) else None


def _target_values(values: dict[str, Any], by_name: dict[str, Any]) -> dict[str, Any] | None:
    """The route's columns in their target types (dates parsed, decimals at their scale), or
    None where a value does not fit or a key is NULL: the per-row path names the row."""
    import pyarrow as pa
    import pyarrow.compute as pc

    values = dict(values)
    for name, value in values.items():
        if by_name[name].target_type.kind == "date":
            if value.null_count < len(value) and not pc.all(
                    pc.match_substring_regex(value, _DATE_TEXT)).as_py():
                return None
            try:
                values[name] = value.cast(pa.date32())  # an impossible date fails here
            except pa.ArrowInvalid:
                return None
    for name, value in values.items():
        column = by_name[name]
        if column.is_key and value.null_count:
            return None  # the per-row path names the row without its key
        if not _fits(value, column.target_type):
            return None
    out: dict[str, Any] = {}
    for name, value in values.items():
        target = by_name[name].target_type
        if target.kind == "decimal":
            value = value.cast(pa.decimal128(target.precision or 38, target.scale or 0))
        out[name] = value
    return out
