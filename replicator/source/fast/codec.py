"""Row decoders generated once per Table_map: Python source specialised to one table.

python-mysql-replication decodes every cell through one generic method (a chain of type
tests, a ``struct.unpack`` and a packet read per cell). Here the column list of a Table_map
is turned once into straight-line code: consecutive fixed-width columns are unpacked together
by one precompiled ``struct``, strings are sliced and decoded with their column's charset,
and each row image becomes one dict literal. Rows without NULLs (the common case) take a path
without per-column null tests; a row with NULLs takes a per-column path.

Every value equals, with the same type, what ``read_changes`` yields (the library's value
passed through ``source.values.binlog_converter``); the differential tests prove it. A column
type this module does not know makes ``compile_codec`` return the reason instead, and the
reader hands that table's rows to the library (counted).
"""

from __future__ import annotations

import codecs
import struct
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import replicator.source.fast.cells as cells
from replicator.errors import SourceError
from replicator.model.changes import BinlogPosition
from replicator.source.arrow_types import time_text
from replicator.source.values import decode_time2, float32

# pymysql.constants.FIELD_TYPE numbers.
DECIMAL, TINY, SHORT, LONG, FLOAT, DOUBLE, NULL, TIMESTAMP, LONGLONG, INT24 = range(10)
DATE, TIME, DATETIME, YEAR, NEWDATE, VARCHAR, BIT, TIMESTAMP2, DATETIME2, TIME2 = range(10, 20)
JSON, NEWDECIMAL, ENUM, SET = 245, 246, 247, 248
TINY_BLOB, MEDIUM_BLOB, LONG_BLOB, BLOB, VAR_STRING, STRING, GEOMETRY = range(249, 256)

_INTEGERS = {TINY: "b", SHORT: "h", LONG: "i", LONGLONG: "q"}
_UINT_BY_SIZE = {1: "B", 2: "H", 4: "I", 8: "Q"}


def _encoding(charset_name: str | None) -> str | None:
    """The codec python-mysql-replication decodes a column with; None: it keeps the bytes."""
    from pymysqlreplication.row_event import RowsEvent

    if charset_name is None:
        return "utf-8"
    encoding = RowsEvent.charset_to_encoding(charset_name)
    try:
        codecs.lookup(encoding)
    except LookupError:  # "binary", ucs2 ...: the library keeps the raw bytes
        return None
    return encoding


# MySQL's latin1 is Windows-1252 plus the five bytes cp1252 leaves undefined (0x81, 0x8D,
# 0x8F, 0x90, 0x9D), which it maps to the C1 controls of the same number (strings/
# ctype-latin1.c; SELECT CONVERT(x'81' USING utf8mb4) is U+0081). Python's cp1252, which
# python-mysql-replication picks for latin1, refuses them: a legal value stopped the read.
MYSQL_LATIN1 = "".join(bytes([byte]).decode("cp1252", errors="ignore") or chr(byte)
                       for byte in range(256))


@dataclass
class _Cell:
    """How one column is read: a fixed struct format and an expression over its fields, or
    (variable width) a length prefix and an expression over the sliced bytes ``raw``."""

    fmt: str = ""  # struct format of the fixed part ("" when variable)
    size: int = 0
    expr: str = "{0}"  # over the struct fields {0}, {1} ... or over `raw`
    length_bytes: int = 0  # variable width: bytes of the little-endian length prefix
    # The compiled decoder's C reader of the same cell (``native_cells``): (wire kind, a, b,
    # param) as ``compiled.pyx`` reads them; None: it calls ``expr`` per value.
    native: tuple[str, int, int, Any] | None = None


class _Namespace:
    def __init__(self) -> None:
        self.values: dict[str, Any] = {}

    def add(self, stem: str, value: Any) -> str:
        name = f"{stem}{len(self.values)}"
        self.values[name] = value
        return name


def _cell(column: Any, index: int, table: str, ns: _Namespace) -> _Cell | str:
    """The cell reader of one column, or the reason it is left to the library."""
    kind = column.type
    name = column.name
    reader: Callable[..., Any]
    native: tuple[str, int, int, Any] | None
    if kind in _INTEGERS:
        code = _INTEGERS[kind]
        code = code.upper() if column.unsigned else code
        return _Cell(code, struct.calcsize("<" + code), native=("int", code.islower(), 0, None))
    if kind == INT24:
        return _Cell("HB" if column.unsigned else "Hb", 3, "({0} | {1} << 16)",
                     native=("int", not column.unsigned, 0, None))
    if kind == FLOAT:
        return _Cell("f", 4, f"{ns.add('float32_', float32)}({{0}})")
    if kind == DOUBLE:
        return _Cell("d", 8, native=("double", 0, 0, None))
    if kind == YEAR:
        return _Cell("B", 1, "({0} + 1900 if {0} else 0)", native=("year", 0, 0, None))
    if kind == NEWDECIMAL:
        size = cells.decimal_size(column.precision, column.decimals)
        decimal = cells.decimal_reader(column.precision, column.decimals)
        # decimal128 holds 38 digits: wider columns (decimal256) keep the Decimal objects.
        native = (("decimal", column.precision, column.decimals, None)
                  if column.precision <= 38 else None)
        return _Cell(f"{size}s", size, f"{ns.add('decimal_', decimal)}({{0}})", native=native)
    if kind == DATE:
        reader = cells.date_reader(table, name)
        return _Cell("HB", 3, f"{ns.add('date_', reader)}({{0}} | {{1}} << 16, zero_dates)",
                     native=("date", 0, 0, None))
    if kind == DATETIME2:
        size = 5 + cells.FSP_BYTES[column.fsp]
        reader = cells.datetime2_reader(column.fsp, table, name)
        return _Cell(f"{size}s", size, f"{ns.add('datetime_', reader)}({{0}}, zero_dates)",
                     native=("datetime", column.fsp, 0, None))
    if kind == TIMESTAMP2:
        size = 4 + cells.FSP_BYTES[column.fsp]
        reader = cells.timestamp2_reader(column.fsp, table, name)
        return _Cell(f"{size}s", size, f"{ns.add('timestamp_', reader)}({{0}}, zero_dates)",
                     native=("timestamp", column.fsp, 0, None))
    if kind == TIME2:
        size = 3 + cells.FSP_BYTES[column.fsp]
        return _Cell(f"{size}s", size,
                     f"{ns.add('time2_', decode_time2)}({{0}}, {int(column.fsp)})")
    if kind == ENUM:
        if column.size not in (1, 2):
            return f"ENUM stored in {column.size} bytes"
        code = _UINT_BY_SIZE[column.size]
        members = tuple(column.enum_values or ())
        native = ("enum", 0, 0, tuple(member.encode() for member in members))
        if not members:
            return _Cell(code, column.size, "None", native=native)
        return _Cell(code, column.size, f"{ns.add('enum_', members)}[{{0}}]", native=native)
    if kind == SET:
        size = column.size
        if not column.set_values:
            expr = '""'
        else:
            expr = f"{ns.add('set_', cells.set_reader(tuple(column.set_values)))}({{0}})"
        if size in _UINT_BY_SIZE:
            return _Cell(_UINT_BY_SIZE[size], size, expr)
        return _Cell(f"{size}s", size, expr.replace("{0}", 'int.from_bytes({0}, "little")'))
    if kind == BIT:
        mask = (1 << column.bits) - 1
        return _Cell(f"{column.bytes}s", column.bytes, f'(int.from_bytes({{0}}, "big") & {mask})',
                     native=("bit", column.bits, 0, None))
    if kind in (VARCHAR, STRING):
        prefix = 2 if column.max_length > 255 else 1
        return _string_cell(column, prefix, ns)
    if kind in (BLOB, GEOMETRY):
        if column.length_size not in (1, 2, 3, 4):
            return f"BLOB length prefix of {column.length_size} bytes"
        if kind == GEOMETRY:
            return _Cell(length_bytes=column.length_size, expr="raw",
                         native=("bytes", 0, 0, None))
        return _string_cell(column, column.length_size, ns)
    if kind == JSON:
        return "MySQL binary JSON (decoded by the library)"
    return f"column type {kind}"


def _string_cell(column: Any, prefix: int, ns: _Namespace) -> _Cell:
    charset = column.character_set_name
    if (charset or "binary") == "binary":
        # binlog_converter: BINARY(n) is zero-padded back to n bytes (the binlog strips it).
        if column.type == STRING:
            return _Cell(length_bytes=prefix, expr=f"raw.ljust({int(column.max_length)}, b'\\x00')",
                         native=("bytes", int(column.max_length), 0, None))
        return _Cell(length_bytes=prefix, expr="raw", native=("bytes", 0, 0, None))
    encoding = _encoding(charset)
    if encoding is None:
        return _Cell(length_bytes=prefix, expr="raw")
    if codecs.lookup(encoding).name == "cp1252":  # MySQL's latin1 (it has no other cp1252)
        charmap = ns.add("charmap_decode_", codecs.charmap_decode)
        return _Cell(length_bytes=prefix,
                     expr=f"{charmap}(raw, 'strict', {ns.add('latin1_', MYSQL_LATIN1)})[0]")
    # UTF-8 is copied as it is, after a check as strict as Python's decoder.
    native = ("utf8", 0, 0, None) if codecs.lookup(encoding).name == "utf-8" else None
    return _Cell(length_bytes=prefix, expr=f"raw.decode({encoding!r})", native=native)


def _length_code(length_bytes: int) -> str:
    if length_bytes == 1:
        return "n = buf[pos]"
    if length_bytes == 2:
        return "n = buf[pos] | buf[pos + 1] << 8"
    return f'n = int.from_bytes(buf[pos:pos + {length_bytes}], "little")'


def _variable_lines(cell: _Cell, target: str) -> list[str]:
    lb = cell.length_bytes
    value = cell.expr.replace("raw", "buf[pos:end_]") if cell.expr != "raw" else "buf[pos:end_]"
    return [
        _length_code(lb),
        f"pos += {lb}",
        "end_ = pos + n",
        f"{target} = {value}",
        "pos = end_",
    ]


def _fixed_lines(cells_: list[tuple[int, _Cell]], ns: _Namespace) -> list[str]:
    """One struct unpack for a run of fixed-width cells, then their expressions."""
    fmt = "<" + "".join(cell.fmt for _, cell in cells_)
    unpacker = struct.Struct(fmt)
    fields: list[str] = []
    finals: list[str] = []
    for index, cell in cells_:
        count = len(struct.Struct("<" + cell.fmt).unpack(bytes(cell.size)))
        if cell.expr == "{0}" and count == 1:
            fields.append(f"v{index}")
            continue
        names = [f"f{index}_{k}" for k in range(count)]
        fields.extend(names)
        finals.append(f"v{index} = " + cell.expr.format(*names))
    struct_name = ns.add("struct_", unpacker.unpack_from)
    lines = [f"{', '.join(fields)}, = {struct_name}(buf, pos)", f"pos += {unpacker.size}"]
    return lines + finals


def _image_lines(cells_: list[_Cell], names: Sequence[str], target: str | None,
                 ns: _Namespace) -> list[str]:
    """Code that reads one row image at ``pos`` into the locals ``v0``, ``v1`` ... and (unless
    ``target`` is None) the dict ``target``."""
    null_bytes = (len(cells_) + 7) // 8
    lines = [
        "nulls = buf[pos]" if null_bytes == 1
        else f'nulls = int.from_bytes(buf[pos:pos + {null_bytes}], "little")',
        f"pos += {null_bytes}",
        "if not nulls:",
    ]
    fast: list[str] = []
    run: list[tuple[int, _Cell]] = []
    for index, cell in enumerate(cells_):
        if cell.length_bytes:
            if run:
                fast += _fixed_lines(run, ns)
                run = []
            fast += _variable_lines(cell, f"v{index}")
        else:
            run.append((index, cell))
    if run:
        fast += _fixed_lines(run, ns)
    lines += ["    " + line for line in fast]
    lines.append("else:")
    for index, cell in enumerate(cells_):
        lines.append(f"    if nulls >> {index} & 1:")
        lines.append(f"        v{index} = None")
        lines.append("    else:")
        body = (_variable_lines(cell, f"v{index}") if cell.length_bytes
                else _fixed_lines([(index, cell)], ns))
        lines += ["        " + line for line in body]
    if target is not None:
        pairs = ", ".join(f"{name!r}: v{index}" for index, name in enumerate(names))
        lines.append(f"{target} = {{{pairs}}}")
    return lines


def _cells(columns: Sequence[Any], table: str, ns: _Namespace) -> list[_Cell] | str:
    cells_: list[_Cell] = []
    for index, column in enumerate(columns):
        if not column.name:
            return "no column names in the Table_map (binlog_row_metadata is not FULL)"
        cell = _cell(column, index, table, ns)
        if isinstance(cell, str):
            return cell
        cells_.append(cell)
    return cells_


@dataclass(frozen=True)
class RowCodec:
    """Decoders of one table map's rows events. Each appends (table, op, before, after)
    tuples for the rows between ``pos`` and ``end`` to ``out`` and returns the end."""

    table: str
    column_count: int
    inserts: Callable[..., int]
    updates: Callable[..., int]
    deletes: Callable[..., int]
    source: str  # the generated code, for debugging and the docs


def compile_codec(columns: Sequence[Any], table: str) -> RowCodec | str:
    """The generated decoders for a table map's columns, or why the library must do it."""
    ns = _Namespace()
    cells_ = _cells(columns, table, ns)
    if isinstance(cells_, str):
        return cells_
    names = [column.name for column in columns]
    image = _image_lines(cells_, names, "image", ns)
    before = _image_lines(cells_, names, "before", ns)
    after = _image_lines(cells_, names, "after", ns)

    def loop(function: str, body: list[str], row: str) -> list[str]:
        return [
            f"def {function}(buf, pos, end, out, zero_dates):",
            "    append = out.append",
            "    while pos < end:",
            *("        " + line for line in body),
            f"        append({row})",
            "    return pos",
        ]

    table_literal = repr(table)
    source_lines = (
        loop("inserts", image, f"({table_literal}, 'c', None, image)")
        + loop("deletes", image, f"({table_literal}, 'd', image, None)")
        + loop("updates", before + after, f"({table_literal}, 'u', before, after)")
    )
    source = "\n".join(source_lines) + "\n"
    namespace = dict(ns.values)
    exec(compile(source, f"<row decoder {table}>", "exec"), namespace)
    return RowCodec(table=table, column_count=len(cells_), inserts=namespace["inserts"],
                    updates=namespace["updates"], deletes=namespace["deletes"], source=source)


@dataclass(frozen=True)
class ColumnarCodec:
    """Decoders of one table map's rows events into columns (``source.fast.columnar``).

    Each is ``f(buf, pos, end, appends, moved, zero_dates) -> (end, rows)``: for every row
    between ``pos`` and ``end`` it calls ``appends[i](value)`` once per column (the
    after-image; the before-image of a delete); an update that changed the key also calls
    ``moved(row, before)``: the row's index in this call and its whole before-image as a
    tuple (decoded a second time from the packet, only for such rows, so the common update
    pays one assignment). No dict or tuple per row otherwise. TIME comes out as MySQL's
    text (``source.arrow_types.time_text``)."""

    inserts: Callable[..., tuple[int, int]]
    updates: Callable[..., tuple[int, int]]
    deletes: Callable[..., tuple[int, int]]
    source: str
    # (buf, pos, zero_dates) -> one row image at pos as a tuple (the compiled decoder asks it
    # whether an update moved the key, and for the moved row's before-image).
    before_image: Callable[..., tuple[Any, ...]]


def compile_columnar(columns: Sequence[Any], table: str,
                     key_indexes: Sequence[int]) -> ColumnarCodec | str:
    """The columnar decoders of a table map's columns for these key columns (indexes into
    ``columns``), or why the library must decode its rows."""
    ns = _Namespace()
    cells_ = _cells(columns, table, ns)
    if isinstance(cells_, str):
        return cells_
    names = [column.name for column in columns]
    image = _image_lines(cells_, names, None, ns)
    text = ns.add("time_text_", time_text)
    # TIME2 values are timedeltas from decode_time2: the change batch holds their text.
    times = [line for index, column in enumerate(columns) if column.type == TIME2
             for line in (f"if v{index} is not None:",
                          f"    v{index} = {text}(v{index}, {int(column.fsp)})")]
    appends = [f"a{index}(v{index})" for index in range(len(columns))]
    before_key = [f"b{position} = v{index}" for position, index in enumerate(key_indexes)]
    old = "(" + "".join(f"b{p}, " for p in range(len(key_indexes))) + ")"
    new = "(" + "".join(f"v{index}, " for index in key_indexes) + ")"
    key_update = ([f"if {old} != {new}:",
                   "    moved(rows, before_image(buf, start, zero_dates))"] if key_indexes else [])

    def loop(function: str, body: list[str]) -> list[str]:
        return [
            f"def {function}(buf, pos, end, appends, moved, zero_dates):",
            *(f"    a{index} = appends[{index}]" for index in range(len(columns))),
            "    rows = 0",
            "    while pos < end:",
            *("        " + line for line in body),
            "        rows += 1",
            "    return pos, rows",
        ]

    whole = "(" + "".join(f"v{index}, " for index in range(len(columns))) + ")"
    before_image = ["def before_image(buf, pos, zero_dates):",
                    *("    " + line for line in image + times), f"    return {whole}"]
    source_lines = (
        before_image
        + loop("inserts", image + times + appends)
        + loop("deletes", image + times + appends)
        + loop("updates", ["start = pos", *image, *times, *before_key, *image, *times, *appends,
                           *key_update])
    )
    source = "\n".join(source_lines) + "\n"
    namespace = dict(ns.values)
    exec(compile(source, f"<columnar row decoder {table}>", "exec"), namespace)
    return ColumnarCodec(inserts=namespace["inserts"], updates=namespace["updates"],
                         deletes=namespace["deletes"], source=source,
                         before_image=namespace["before_image"])


NativeCell = tuple[str, int, int, int, Any]  # wire kind, bytes or prefix bytes, a, b, param


def native_cells(columns: Sequence[Any], table: str) -> list[NativeCell] | str:
    """The compiled decoder's plan of a Table_map (``source.fast.native``), or why the
    library must decode its rows: per column the C reader of ``_Cell.native``, or
    ("object_fixed" | "object_var", bytes, 0, 0, read): ``read(raw, zero_dates)``, the
    reference decoder's own expression over the cell's bytes (TIME as its text, as
    ``compile_columnar`` gives it)."""
    ns = _Namespace()
    cells_ = _cells(columns, table, ns)
    if isinstance(cells_, str):
        return cells_
    text = ns.add("time_text_", time_text)
    lines: list[str] = []
    plan: list[NativeCell] = []
    for index, (column, cell) in enumerate(zip(columns, cells_, strict=True)):
        if cell.native is not None:
            kind, a, b, param = cell.native
            plan.append((kind, cell.length_bytes or cell.size, int(a), int(b), param))
            continue
        if cell.length_bytes:
            body = [f"value = {cell.expr}"]
            plan.append(("object_var", cell.length_bytes, 0, 0, f"read{index}"))
        else:
            unpack = struct.Struct("<" + cell.fmt)
            fields = [f"f{k}" for k in range(len(unpack.unpack(bytes(cell.size))))]
            body = [f"{', '.join(fields)}, = {ns.add('unpack_', unpack.unpack)}(raw)",
                    f"value = {cell.expr.format(*fields)}"]
            plan.append(("object_fixed", cell.size, 0, 0, f"read{index}"))
        if column.type == TIME2:
            body += ["if value is not None:", f"    value = {text}(value, {int(column.fsp)})"]
        lines += [f"def read{index}(raw, zero_dates):", *("    " + line for line in body),
                  "    return value"]
    namespace = dict(ns.values)
    exec(compile("\n".join(lines) + "\n", f"<cell readers {table}>", "exec"), namespace)
    return [(kind, width, a, b, namespace[param] if kind.startswith("object") else param)
            for kind, width, a, b, param in plan]


# What a generated decoder raises when the bytes do not have the layout it was generated
# for: a short buffer, a length prefix past the end, a code point or a date that cannot be.
_MISREADS = (struct.error, IndexError, KeyError, UnicodeDecodeError, ValueError, OverflowError)


def decode_checked(decode: Callable[..., Any], table: str, position: BinlogPosition,
                   buf: bytes, begin: int, end: int, *args: Any) -> Any:
    """``decode(buf, begin, end, *args)`` -- a ``RowCodec`` or ``ColumnarCodec`` decoder --
    proved to have read the rows event exactly: it must end on the event's last byte. A
    decoder that misreads stops the read with the table, the transaction's position and the
    reason, never a guess (a layout misread whose bytes happen to fit would otherwise write
    wrong values without a word)."""
    try:
        result = decode(buf, begin, end, *args)
    except _MISREADS as exc:
        raise _undecodable(table, position, f"{type(exc).__name__}: {exc}") from exc
    stop = result[0] if isinstance(result, tuple) else result
    if stop != end:
        raise _undecodable(table, position, f"the row images end {stop - end:+d} bytes from "
                           f"the event's end ({end - begin} bytes of rows)")
    return result


def library_checked(decode: Callable[..., Any], table: str, position: BinlogPosition,
                    *args: Any) -> Any:
    """``decode(*args)`` -- python-mysql-replication decoding a rows event (``library.rows``) --
    stopped like a generated decoder when it cannot read the bytes, with the table and the
    transaction's position: it decodes MySQL's latin1 as Python's cp1252, which has no
    character for the C1 controls MySQL's latin1 holds (``MYSQL_LATIN1``), and raised a bare
    UnicodeDecodeError."""
    try:
        return decode(*args)
    except _MISREADS as exc:
        raise _undecodable(table, position, f"python-mysql-replication: {type(exc).__name__}: "
                           f"{exc}", library=True) from exc


def _undecodable(table: str, position: BinlogPosition, reason: str,
                 library: bool = False) -> SourceError:
    return SourceError(
        f"cannot decode a rows event of {table} in the transaction at {position} with its "
        f"Table_map: {reason}",
        hint="nothing of this batch was applied and the run stops here; report it to the "
        "replicator project with SHOW CREATE TABLE of the table and the binlog around that "
        f"position (mariadb-binlog --start-position={position.pos} -vv {position.file})"
        + ("" if library else
           "; REPLICATOR_FAST_DECODE=0 decodes with python-mysql-replication instead"),
    )
