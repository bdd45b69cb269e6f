"""Property (issue 29): every rows event decodes with the Table_map that precedes it, whatever
DDL came between two of them, to exactly what the source held.

Hypothesis writes random sequences of DDL interleaved with row changes on the real MariaDB,
on one or two tables: VARCHAR/CHAR widened and narrowed across the 255-byte length-prefix
boundary (utf8mb4 4 bytes a character, latin1 1), charsets switched, TINYTEXT/TEXT/MEDIUMTEXT
and the BLOBs (a 1/2/3-byte prefix), BINARY/VARBINARY lengths (zero padding; a 2-byte prefix
past 255), INT widths and signedness, DECIMAL precision and scale,
ENUM/SET members added, dropped and reordered (past 255 ENUM members the index takes 2 bytes,
past 8 SET members the bitmask 2), DATETIME/TIME fsp, NULL <-> NOT NULL, ADD COLUMN
with/without DEFAULT (FIRST/AFTER), DROP COLUMN, MODIFY ... FIRST/AFTER (the key column too);
INSERTs of several rows, UPDATEs (some moving the key), DELETEs, and transactions over both
tables. Every statement runs in MariaDB's strict mode and is generated to fit the data it
meets (a narrowing only when the values fit), so the server stores what was written; still,
the expected value of each change is never what the test wrote but what the source held:
the changed rows are SELECTed back before and after every row change.

The range is then decoded four ways -- the columnar decoder (``read_change_batches``), the
fast ChangeEvent reader (``read_changes_fast``), python-mysql-replication
(``read_changes(fast=False)``) and the columnar decoder fed by the library
(``force_library=True``) -- and every value of every change must equal the source's, with its
type; the fast and library readers must also give identical events (positions included),
and the columnar rows the fast reader's values and internal columns. One known fault of the
library path is left out where it applies, and only there (``library_cannot_read``).

``REPLICATOR_DDL_PROPERTY_EXAMPLES`` sets the number of sequences; the default is sized for
CI (150 sequences: ~20 s on the 2-core box, about three times that while other suites load it).
"""

from __future__ import annotations

import datetime as dt
import itertools
import os
import traceback
from dataclasses import dataclass, field, replace
from decimal import Context, Decimal
from typing import Any

import pymysql
import pytest
from hypothesis import HealthCheck, Phase, event, given, note, settings
from hypothesis import strategies as st
from pymysql.constants import FIELD_TYPE
from pymysql.converters import convert_timedelta

from replicator.errors import SourceError
from replicator.model import change_batch as cb
from replicator.model.changes import ChangeEvent, SchemaChange
from replicator.source.binlog import read_changes
from replicator.source.fast.columnar import TableChunk, read_change_batches
from replicator.source.fast.reader import read_changes_fast
from replicator.source.positions import current_position
from tests.fixtures.decoders import DECODERS, using
from tests.integration.test_fastdecode_columnar import expected_rows, same
from tests.integration.test_fastdecode_differential import strict

pytestmark = pytest.mark.mysql

DEFAULT_EXAMPLES = 150
EXAMPLES = int(os.environ.get("REPLICATOR_DDL_PROPERTY_EXAMPLES", DEFAULT_EXAMPLES))
# Steps of a sequence: hypothesis favours the short end, so the floor keeps a few ALTERs in
# most sequences (each needs rows before and after it to matter).
MIN_STEPS, MAX_STEPS = 6, 24

_server_ids = itertools.count(8101)
_tables = itertools.count(1)

UTF8, LATIN1 = "utf8mb4", "latin1"
# MySQL's latin1 is cp1252 plus the five bytes cp1252 leaves undefined, which it maps to the
# C1 controls of the same number (strings/ctype-latin1.c). They are legal latin1 values.
C1_IN_LATIN1 = "\x81\x8d\x8f\x90\x9d"
ALPHABETS = {
    UTF8: "aZ09 '\\\"%_\u00e9\u00df\u20ac\u4e2d\U0001F600\u0301",
    LATIN1: "aZ09 '\\\"%_\u00e9\u00ff\u20ac\u0152",
}
TEXT_CLASSES = ("TINY", "", "MEDIUM")  # TINYTEXT/TEXT/MEDIUMTEXT: 1, 2, 3-byte length prefix
TEXT_BYTES = (255, 65535, 2**24 - 1)
INT_NAMES = {8: "TINYINT", 16: "SMALLINT", 24: "MEDIUMINT", 32: "INT", 64: "BIGINT"}
# MySQL error numbers of a statement the server refused for the data it met (a safety net:
# the generator avoids them; each refusal is counted as a hypothesis event).
REFUSED = {1067, 1074, 1118, 1138, 1264, 1265, 1292, 1366, 1406}
WIDE = Context(prec=200)  # DECIMAL(65, s) arithmetic without rounding to 28 digits


def latin1_encodable(text: str) -> bool:
    for char in text:
        if char in C1_IN_LATIN1:
            continue
        try:
            char.encode("cp1252")
        except UnicodeEncodeError:
            return False
    return True


@dataclass(frozen=True)
class ColumnType:
    """One MySQL column type of the generator's universe."""

    kind: str  # varchar char text blob binary varbinary int decimal enum set datetime time
    size: int = 0  # chars, bytes (binary); size class (text, blob); bits (int); precision
    scale: int = 0  # DECIMAL scale; fsp of DATETIME/TIME
    charset: str = ""
    unsigned: bool = False
    members: tuple[str, ...] = ()

    @property
    def family(self) -> str:  # what a MODIFY may turn the column into
        if self.kind in ("varchar", "char", "text"):
            return "string"
        return "bytes" if self.kind in ("blob", "binary", "varbinary") else self.kind

    def sql(self) -> str:
        listed = ", ".join(f"'{m}'" for m in self.members)
        return {
            "varchar": lambda: f"VARCHAR({self.size}) CHARACTER SET {self.charset}",
            "char": lambda: f"CHAR({self.size}) CHARACTER SET {self.charset}",
            "text": lambda: f"{TEXT_CLASSES[self.size]}TEXT CHARACTER SET {self.charset}",
            "blob": lambda: f"{TEXT_CLASSES[self.size]}BLOB",
            "binary": lambda: f"BINARY({self.size})",
            "varbinary": lambda: f"VARBINARY({self.size})",
            "int": lambda: INT_NAMES[self.size] + (" UNSIGNED" if self.unsigned else ""),
            "decimal": lambda: f"DECIMAL({self.size},{self.scale})",
            "enum": lambda: f"ENUM({listed})",
            "set": lambda: f"SET({listed})",
            "datetime": lambda: f"DATETIME({self.scale})",
            "time": lambda: f"TIME({self.scale})",
        }[self.kind]()

    def layout(self) -> int:
        """The bytes of the binlog layout a DDL may change under one change-batch type: a
        length prefix (strings, TEXT, BLOB), an ENUM index, a SET bitmask, a fraction."""
        if self.kind in ("varchar", "char"):
            return 2 if self.size * (4 if self.charset == UTF8 else 1) > 255 else 1
        if self.kind in ("binary", "varbinary"):
            return 2 if self.size > 255 else 1
        if self.kind in ("text", "blob"):
            return self.size + 1
        if self.kind == "enum":
            return 2 if len(self.members) > 255 else 1
        if self.kind == "set":
            return {1: 1, 2: 2, 3: 3, 4: 4}.get((len(self.members) + 7) // 8, 8)
        return (self.scale + 1) // 2 if self.kind in ("datetime", "time") else 0

    def int_range(self) -> tuple[int, int]:
        if self.unsigned:
            return 0, 2**self.size - 1
        return -(2 ** (self.size - 1)), 2 ** (self.size - 1) - 1

    def fits(self, value: Any) -> bool:
        """Whether a value SELECT returned can be stored in this type unchanged (strict
        mode refuses what cannot; a DDL is only generated when every value fits)."""
        if value is None:
            return True
        if self.kind in ("varchar", "char"):
            return len(value) <= self.size and (self.charset != LATIN1 or latin1_encodable(value))
        if self.kind == "text":
            if self.charset == LATIN1:
                return latin1_encodable(value) and len(value) <= TEXT_BYTES[self.size]
            return len(value.encode()) <= TEXT_BYTES[self.size]
        if self.kind == "blob":
            return len(value) <= TEXT_BYTES[self.size]
        if self.kind in ("binary", "varbinary"):  # SELECT gives BINARY(n) padded to n bytes
            return len(value) <= self.size
        if self.kind == "int":
            low, high = self.int_range()
            return low <= value <= high
        if self.kind == "decimal":
            exact = value.quantize(Decimal(1).scaleb(-self.scale), context=WIDE) == value
            return exact and abs(value) < Decimal(10) ** (self.size - self.scale)
        if self.kind == "enum":
            return value in self.members
        if self.kind == "set":
            return not value or set(value.split(",")) <= set(self.members)
        return True  # DATETIME / TIME: a smaller fsp truncates, which the SELECT then shows


@dataclass
class Column:
    name: str
    type: ColumnType
    nullable: bool = True
    default: Any = None  # a literal value, or None: no DEFAULT clause

    def sql(self, connection: Any) -> str:
        text = f"{self.name} {self.type.sql()} {'NULL' if self.nullable else 'NOT NULL'}"
        if self.default is not None:
            text += f" DEFAULT {connection.escape(self.default)}"
        return text


KEY, REV = "id", "rev"


@dataclass
class Table:
    name: str
    columns: list[Column]
    rows: dict[int, dict[str, Any]] = field(default_factory=dict)  # id -> as SELECT gives it
    next_id: int = 1
    next_column: int = 1

    @property
    def names(self) -> list[str]:
        return [column.name for column in self.columns]

    def column(self, name: str) -> Column:
        return next(c for c in self.columns if c.name == name)

    def values(self, name: str) -> list[Any]:
        return [row[name] for row in self.rows.values()]


@dataclass
class Change:
    """One row change as the source held it: the images SELECTed around the statement."""

    table: str  # db.table
    op: str
    before: dict[str, Any] | None
    after: dict[str, Any] | None
    types: dict[str, ColumnType]  # the columns' types at the change


# -- strategies --------------------------------------------------------------------------------


def _repeat(alphabet: str, chars: int, max_bytes: int, charset: str) -> st.SearchStrategy[str]:
    """Long values: one character repeated up to ``chars`` times (past 255 bytes), as long
    as they fit ``max_bytes`` in the column's charset."""
    def width(char: str) -> int:
        return len(char.encode()) if charset == UTF8 else 1

    return st.sampled_from(alphabet).flatmap(lambda char: st.integers(
        0, min(chars, max_bytes // width(char))).map(lambda count: char * count))


def text_values(charset: str, chars: int, max_bytes: int = 2**24) -> st.SearchStrategy:
    alphabet = ALPHABETS[charset]
    # Short values fit every column (12 characters are at most 48 bytes); long ones, one in
    # three, cross 255 bytes but keep a later narrowing from fitting.
    short = st.text(alphabet, max_size=min(chars, 12))
    values = st.one_of(short, short, _repeat(alphabet, min(chars, 300), max_bytes, charset))
    if charset == LATIN1:
        # Rarely: the five C1 controls MySQL's latin1 holds (see C1_IN_LATIN1).
        values = values | st.text(alphabet + C1_IN_LATIN1, min_size=1, max_size=min(chars, 6))
    return values


def values_of(kind: ColumnType) -> st.SearchStrategy:
    """Values to bind for a column of this type (each fits it)."""
    if kind.kind in ("varchar", "char"):
        return text_values(kind.charset, kind.size)
    if kind.kind == "text":
        return text_values(kind.charset, 300, TEXT_BYTES[kind.size])
    if kind.kind in ("blob", "binary", "varbinary"):
        limit = TEXT_BYTES[kind.size] if kind.kind == "blob" else kind.size
        return st.binary(max_size=min(limit, 12)) | st.builds(
            lambda byte, count: byte * count, st.binary(min_size=1, max_size=1),
            st.integers(0, min(300, limit)))
    if kind.kind == "int":
        return st.integers(*kind.int_range())
    if kind.kind == "decimal":
        limit = 10**kind.size - 1
        return st.integers(-limit, limit).map(
            lambda n, s=kind.scale: Decimal(n).scaleb(-s, context=WIDE))
    if kind.kind == "enum":
        return st.sampled_from(kind.members)
    if kind.kind == "set":
        return st.lists(st.sampled_from(kind.members), unique=True, max_size=4).map(",".join)
    if kind.kind == "datetime":
        return st.datetimes(dt.datetime(1000, 1, 1), dt.datetime(9999, 12, 31, 23, 59, 59)).map(
            lambda v: v.isoformat(" "))
    limit = 838 * 3600 + 59 * 60 + 59
    return st.tuples(st.integers(-limit, limit), st.integers(0, 999_999)).map(
        lambda t: f"{'-' if t[0] < 0 else ''}{abs(t[0]) // 3600}:{abs(t[0]) // 60 % 60:02d}:"
        f"{abs(t[0]) % 60:02d}.{0 if abs(t[0]) == limit else t[1]:06d}")


# Members are words like "b3": unique case-insensitively (the collation compares them so).
_WORDS = st.builds(lambda letter, number: f"{letter}{number}", st.sampled_from("abcdefghij"),
                   st.integers(0, 99))


def members_of(count: st.SearchStrategy[int]) -> st.SearchStrategy[tuple[str, ...]]:
    return count.flatmap(lambda n: st.lists(st.integers(0, 999), min_size=n, max_size=n,
                                            unique=True)).map(lambda xs: tuple(f"w{x}" for x in xs))


@st.composite
def column_types(draw: Any, family: str | None = None) -> ColumnType:
    family = family or draw(st.sampled_from(  # strings thrice: three kinds, two charsets
        ["string"] * 3 + ["bytes", "int", "decimal", "enum", "set", "datetime", "time"]))
    if family == "string":
        kind = draw(st.sampled_from(["varchar", "char", "text"]))
        charset = draw(st.sampled_from([UTF8, LATIN1]))
        if kind == "text":
            return ColumnType("text", draw(st.integers(0, 2)), charset=charset)
        # 63 utf8mb4 characters are 252 bytes (a 1-byte prefix), 64 are 256 (2 bytes); latin1
        # crosses at 255/256 characters.
        sizes = [1, 10, 63, 64, 100, 255] + ([256, 300] if kind == "varchar" else [])
        return ColumnType(kind, draw(st.sampled_from(sizes)), charset=charset)
    if family == "bytes":
        kind = draw(st.sampled_from(["blob", "binary", "varbinary"]))
        if kind == "blob":
            return ColumnType("blob", draw(st.integers(0, 2)))
        # VARBINARY(256) needs a 2-byte length prefix; BINARY(n) is padded with zero bytes.
        sizes = [1, 4, 16, 255] + ([256, 300] if kind == "varbinary" else [])
        return ColumnType(kind, draw(st.sampled_from(sizes)))
    if family == "int":
        return ColumnType("int", draw(st.sampled_from(sorted(INT_NAMES))),
                          unsigned=draw(st.booleans()))
    if family == "decimal":
        precision = draw(st.sampled_from([1, 2, 5, 9, 10, 18, 19, 30, 38, 39, 65]))
        return ColumnType("decimal", precision, draw(st.integers(0, min(precision, 30))))
    if family == "enum":
        if draw(st.integers(0, 5)) == 0:  # past 255 members the index takes two bytes
            return ColumnType("enum", members=tuple(
                f"m{i}" for i in range(draw(st.sampled_from([255, 256, 300])))))
        return ColumnType("enum", members=draw(members_of(st.integers(1, 6))))
    if family == "set":
        # 1-8 members: a 1-byte bitmask, 9-16: 2, 17-24: 3.
        return ColumnType("set", members=draw(members_of(st.integers(1, 20))))
    return ColumnType(family, scale=draw(st.integers(0, 6)))  # datetime / time fsp


@st.composite
def new_members(draw: Any, members: tuple[str, ...], used: set[str], limit: int) -> tuple:
    """An ENUM's or SET's members after a DDL: some added (first or last), unused ones
    dropped, the order shuffled; every member in use kept."""
    out = list(members)
    for _ in range(draw(st.integers(1, 3))):
        how = draw(st.sampled_from(["append", "prepend", "drop", "shuffle", "grow"]))
        fresh = [w for w in draw(st.lists(_WORDS, min_size=1, max_size=3)) if w not in out]
        if how == "append":
            out += fresh
        elif how == "prepend":
            out = fresh + out
        elif how == "drop":
            unused = [m for m in out if m not in used]
            if unused and len(out) > 1:
                out.remove(draw(st.sampled_from(unused)))
        elif how == "shuffle":
            out = draw(st.permutations(out))
        elif limit > 64:  # an ENUM past 255 members
            out += [f"m{i}" for i in range(260) if f"m{i}" not in out][:max(0, 257 - len(out))]
        else:  # a SET past 8 / 16 members
            out += [f"s{i}" for i in range(24) if f"s{i}" not in out][:max(0, 17 - len(out))]
    return tuple(dict.fromkeys(out))[:limit]


# -- the source side --------------------------------------------------------------------------


class Source:
    """The example's tables on the server, the model of them, and the changes recorded."""

    def __init__(self, connection: Any, database: str) -> None:
        self.connection = connection
        self.cursor = connection.cursor()
        self.database = database
        self.tables: list[Table] = []
        self.changes: list[Change] = []
        self.log: list[str] = []

    def pick(self, draw: Any) -> Table:
        """One of the tables (drawn by index: hypothesis would print a drawn table whole)."""
        return self.tables[draw(st.integers(0, len(self.tables) - 1), label="table")]

    def execute(self, sql: str, args: Any = None) -> bool:
        """Run a statement; False when the server refused it for its data (rolled back,
        nothing in the binlog)."""
        self.log.append(self.cursor.mogrify(sql, args) if args is not None else sql)
        note(self.log[-1])
        try:
            self.cursor.execute(sql, args)
        except pymysql.err.MySQLError as exc:
            if not exc.args or exc.args[0] not in REFUSED:
                raise
            event(f"refused by the server: {exc.args[0]}")
            note(f"  refused: {exc}")
            return False
        return True

    def select(self, table: Table, ids: list[int]) -> list[dict[str, Any]]:
        if not ids:
            return []
        names = table.names
        self.cursor.execute(
            f"SELECT {', '.join(names)} FROM {table.name} WHERE id IN "
            f"({', '.join(['%s'] * len(ids))}) ORDER BY id", ids)
        return [dict(zip(names, row, strict=True)) for row in self.cursor.fetchall()]

    def refresh(self, table: Table) -> None:
        """The model's rows after a DDL (it may convert or truncate values: the table holds
        what it holds), and a check that the model's column order is the server's."""
        self.cursor.execute(f"SELECT * FROM {table.name} ORDER BY id")
        assert [d[0] for d in self.cursor.description] == table.names, self.log
        table.rows = {row[table.names.index(KEY)]: dict(zip(table.names, row, strict=True))
                      for row in self.cursor.fetchall()}

    def record(self, table: Table, op: str, before: list[dict], after: list[dict]) -> None:
        types = {column.name: column.type for column in table.columns}
        name = f"{self.database}.{table.name}"
        if op == "c":
            self.changes += [Change(name, op, None, row, types) for row in after]
        elif op == "d":
            self.changes += [Change(name, op, row, None, types) for row in before]
        else:
            self.changes += [Change(name, op, b, a, types)
                             for b, a in zip(before, after, strict=True)]
        for row in before:
            table.rows.pop(row[KEY])
        for row in after:
            table.rows[row[KEY]] = row


def _nullable_value(draw: Any, column: Column) -> Any:
    if column.nullable and draw(st.integers(0, 4)) == 0:
        return None
    return draw(values_of(column.type))


def insert(draw: Any, source: Source, table: Table) -> None:
    """One INSERT of 1-4 rows (one rows event), some defaulted columns left out."""
    count = draw(st.integers(1, 4))
    ids = list(range(table.next_id, table.next_id + count))
    table.next_id += count
    names = [c.name for c in table.columns if c.name == KEY or not (
        (c.nullable or c.default is not None) and draw(st.booleans()))]
    rows = [[row_id if name == KEY else 0 if name == REV else
             _nullable_value(draw, table.column(name)) for name in names] for row_id in ids]
    placeholders = "(" + ", ".join(["%s"] * len(names)) + ")"
    if source.execute(f"INSERT INTO {table.name} ({', '.join(names)}) VALUES "
                      + ", ".join([placeholders] * count), [v for row in rows for v in row]):
        source.record(table, "c", [], source.select(table, ids))


def update(draw: Any, source: Source, table: Table) -> None:
    """One UPDATE of 1-3 rows (rev = rev + 1, so every row changes and is logged), some
    moving their key past every id used so far."""
    ids = sorted(draw(st.lists(st.sampled_from(sorted(table.rows)), min_size=1, max_size=3,
                               unique=True)))
    changed = [c for c in table.columns if c.name not in (KEY, REV) and draw(st.booleans())]
    values = [_nullable_value(draw, column) for column in changed]
    assignments = [f"{c.name} = %s" for c in changed] + [f"{REV} = {REV} + 1"]
    offset = 0
    key_type = table.column(KEY).type
    if draw(st.integers(0, 3)) == 0 and key_type.fits(table.next_id + max(ids)):
        offset = table.next_id  # new ids above every id ever used: no collision mid-statement
        table.next_id = offset + max(ids) + 1
        assignments.append(f"{KEY} = {KEY} + %s")
        values.append(offset)
    before = source.select(table, ids)
    # ORDER BY: the rows are changed (and logged) in key order, the order of the SELECTs.
    if source.execute(f"UPDATE {table.name} SET {', '.join(assignments)} WHERE id IN "
                      f"({', '.join(map(str, ids))}) ORDER BY id", values):
        source.record(table, "u", before, source.select(table, [i + offset for i in ids]))


def delete(draw: Any, source: Source, table: Table) -> None:
    ids = sorted(draw(st.lists(st.sampled_from(sorted(table.rows)), min_size=1, max_size=2,
                               unique=True)))
    before = source.select(table, ids)
    if source.execute(f"DELETE FROM {table.name} WHERE id IN ({', '.join(map(str, ids))}) "
                      "ORDER BY id"):
        source.record(table, "d", before, [])


def _position(draw: Any, table: Table, name: str) -> str:
    others = [n for n in table.names if n != name]
    return draw(st.sampled_from(["", " FIRST"] + [f" AFTER {n}" for n in others]))


def _moved(table: Table, column: Column, position: str) -> None:
    names = [c for c in table.columns if c.name != column.name]
    if position == " FIRST":
        names.insert(0, column)
    elif position.startswith(" AFTER "):
        names.insert(next(i for i, c in enumerate(names) if c.name == position[7:]) + 1, column)
    else:
        names.insert(next((i for i, c in enumerate(table.columns) if c.name == column.name),
                          len(names)), column)
    table.columns[:] = names


def _default(draw: Any, kind: ColumnType, nullable: bool) -> Any:
    """A DEFAULT literal (None: no clause). DATETIME NOT NULL always gets one: its implicit
    default is the zero date, which the decoders turn into NULL by the zero_dates policy.
    A TEXT/BLOB (and binary) default is plain ASCII: MariaDB keeps a TEXT/BLOB default as an
    expression in the table's charset and refuses (1918) one a latin1 table cannot spell."""
    if kind.kind in ("text", "blob", "binary", "varbinary"):
        if not draw(st.booleans()):
            return None
        limit = kind.size if kind.kind in ("binary", "varbinary") else 8
        plain = draw(st.text("abc xyz09", max_size=min(8, limit)))
        return plain if kind.kind == "text" else plain.encode()
    if draw(st.booleans()) or (kind.kind == "datetime" and not nullable):
        return draw(values_of(kind))
    return None


def ddl(draw: Any, source: Source, table: Table) -> None:
    """One ALTER TABLE action, valid for the data the table holds."""
    how = draw(st.sampled_from(["modify", "modify", "modify", "add", "drop", "move"]))
    if how == "add":
        kind = draw(column_types())
        nullable = draw(st.booleans())
        column = Column(f"c{table.next_column}", kind, nullable, _default(draw, kind, nullable))
        table.next_column += 1
        position = _position(draw, table, column.name)
        if source.execute(f"ALTER TABLE {table.name} ADD COLUMN "
                          f"{column.sql(source.connection)}{position}"):
            table.columns.append(column)
            _moved(table, column, position)
            event("ddl: add column" + (" with default" if column.default is not None else ""))
        return source.refresh(table)
    droppable = [c for c in table.columns if c.name not in (KEY, REV)]
    if how == "drop" and droppable:
        column = draw(st.sampled_from(droppable))
        if source.execute(f"ALTER TABLE {table.name} DROP COLUMN {column.name}"):
            table.columns.remove(column)
            event("ddl: drop column")
        return source.refresh(table)
    others = [c for c in table.columns if c.name not in (KEY, REV)]
    # The key now and then (its width and place), another column mostly.
    column = draw(st.sampled_from(others)) if others and draw(st.integers(0, 4)) else \
        table.column(KEY)
    values = table.values(column.name)
    new = replace(column)
    if how == "modify":
        for _ in range(3):  # a few tries at a type the values fit (narrowing often fails)
            kind = draw(column_types(column.type.family))
            if kind.kind in ("enum", "set"):
                used = {m for v in values if v
                        for m in (v.split(",") if kind.kind == "set" else [v])}
                kind = replace(kind, members=draw(new_members(
                    column.type.members or kind.members, used, 300 if kind.kind == "enum" else 64)))
            if all(kind.fits(v) for v in values):
                break
        if column.name == KEY:  # the key stays an integer NOT NULL without default
            new.type = kind
        else:
            nullable = draw(st.booleans()) or any(v is None for v in values)
            new = Column(column.name, kind, nullable, _default(draw, kind, nullable))
        if not all(new.type.fits(v) for v in values):
            event("ddl: modify skipped (values do not fit)")
            return None
        event(f"ddl: modify {column.type.kind} -> {new.type.kind}")
        if column.type.layout() != new.type.layout():
            event(f"ddl: {new.type.family} layout {column.type.layout()} -> "
                  f"{new.type.layout()} bytes")
        if column.type.charset and new.type.charset and column.type.charset != new.type.charset:
            event("ddl: charset changed")
    else:
        event("ddl: move column")
    position = _position(draw, table, column.name) if how == "move" or draw(st.booleans()) \
        else ""
    if source.execute(f"ALTER TABLE {table.name} MODIFY COLUMN "
                      f"{new.sql(source.connection)}{position}"):
        table.columns[table.columns.index(column)] = new
        _moved(table, new, position)
    return source.refresh(table)


def transaction(draw: Any, source: Source) -> None:
    """Two or three row statements, on either table, in one transaction."""
    source.connection.begin()
    for _ in range(draw(st.integers(2, 3))):
        row_change(draw, source, source.pick(draw))
    source.connection.commit()


def row_change(draw: Any, source: Source, table: Table) -> None:
    how = draw(st.sampled_from(["insert", "update", "update", "delete"]))
    if how == "insert" or not table.rows:
        insert(draw, source, table)
    elif how == "update":
        update(draw, source, table)
    else:
        delete(draw, source, table)


def create(draw: Any, source: Source, stem: str) -> Table:
    columns = [Column(KEY, ColumnType("int", 32), nullable=False),
               Column(REV, ColumnType("int", 64), nullable=False, default=0)]
    for _ in range(draw(st.integers(1, 4))):
        kind = draw(column_types())
        nullable = draw(st.booleans())
        columns.append(Column(f"c{len(columns) - 1}", kind, nullable,
                              _default(draw, kind, nullable)))
    table = Table(stem, columns, next_column=len(columns) - 1)
    definition = ", ".join(c.sql(source.connection) for c in columns)
    assert source.execute(f"CREATE TABLE {table.name} ({definition}, PRIMARY KEY (id)) "
                          f"DEFAULT CHARSET={draw(st.sampled_from([UTF8, LATIN1]))}")
    source.tables.append(table)
    return table


# -- the decoders' side -----------------------------------------------------------------------


def equal(actual: Any, expected: Any, kind: ColumnType, *, columnar: bool) -> bool:
    """A decoded value against the value SELECT returned for the same change.

    The SELECT runs with pymysql's converters, whose types are the ChangeEvent contract's
    for every type generated here (int, Decimal, str, bytes, naive datetime), so the value
    must have the same type and repr: Decimal('1.50') is not Decimal('1.5'), b'a' not 'a'.
    ENUM and SET come back from SELECT as text, members in definition order, which is the
    contract too. One exception, TIME: it is SELECTed as MySQL's text (pymysql's TIME
    converter is off in ``_connect``). The change batch carries exactly that text (no Arrow
    type holds -838:59:59; fsp digits as declared); a ChangeEvent carries a timedelta,
    compared with pymysql's reading of the text (not the project's parse_time, so no decoder
    is checked against code of its own)."""
    if expected is None or actual is None:
        return actual is expected
    if kind.kind == "time":
        if columnar:
            return actual == expected
        return type(actual) is dt.timedelta and actual == convert_timedelta(expected)
    return type(actual) is type(expected) and repr(actual) == repr(expected)


def check_image(image: dict | None, want: dict | None, change: Change, *, columnar: bool,
                where: Any) -> None:
    if want is None:
        assert image is None, where
        return
    assert image is not None, where
    assert list(image) == list(want), where  # every column, in the table's order then
    for name, value in want.items():
        assert equal(image[name], value, change.types[name], columnar=columnar), \
            (where, name, image[name], value)


def check_events(events: list, changes: list[Change], path: str) -> None:
    got = [e for e in events if isinstance(e, ChangeEvent)]
    assert len(got) == len(changes), (path, len(got), len(changes))
    for index, (found, change) in enumerate(zip(got, changes, strict=True)):
        where = (path, index, change.table, change.op)
        assert (found.table, found.op) == (change.table, change.op), where
        check_image(found.before, change.before, change, columnar=False, where=where)
        check_image(found.after, change.after, change, columnar=False, where=where)


def check_chunks(items: list, changes: list[Change], fast: list, path: str) -> None:
    """Columnar rows against the source's values, and against the fast reader's events
    (values and every internal column: op, positions, row_index, ts, gtid ...)."""
    assert [i for i in items if isinstance(i, SchemaChange)] == \
        [e for e in fast if isinstance(e, SchemaChange)], path
    rows: dict[str, list[dict]] = {}
    for chunk in (i for i in items if isinstance(i, TableChunk)):
        assert chunk.data.num_rows > 0, path
        rows.setdefault(chunk.table, []).extend(chunk.data.to_pylist())
    by_table = expected_rows(fast)
    assert sorted(rows) == sorted(by_table), path
    for table, expected in by_table.items():
        assert len(rows[table]) == len(expected), (path, table)
        for row, (want, _event) in zip(rows[table], expected, strict=True):
            for name, value in want.items():
                assert same(row[name], value), (path, table, name, row[name], value)
    for table, found in rows.items():
        mine = [c for c in changes if c.table == table]
        assert len(mine) == len(found), (path, table)
        for index, (row, change) in enumerate(zip(found, mine, strict=True)):
            where = (path, table, index, change.op)
            assert row[cb.OP] == change.op, where
            image = change.after if change.op != "d" else change.before
            check_image({n: v for n, v in row.items() if not cb.is_internal(n)}, image, change,
                        columnar=True, where=where)
            moved = change.op == "u" and change.before[KEY] != change.after[KEY]
            before = {n: row[cb.before_column(n)] for n in image}
            if moved:  # the whole old row rides along an update that moved the key
                check_image(before, change.before, change, columnar=True, where=where)
            else:
                assert all(v is None for v in before.values()), where


def library_cannot_read(changes: list[Change]) -> bool:
    """python-mysql-replication decodes MySQL's latin1 as Python's cp1252, which has no
    character for the bytes 0x81 0x8D 0x8F 0x90 0x9D that MySQL's latin1 maps to C1
    controls: a row holding one stops read_changes(fast=False) with UnicodeDecodeError, and
    the fast reader's library fallback with a SourceError naming table and position. Those
    paths are excluded for such a range -- and asserted to stop, never to give values."""
    return any(
        isinstance(value, str) and set(value) & set(C1_IN_LATIN1)
        and change.types[name].charset == LATIN1
        for change in changes for image in (change.before, change.after) if image
        for name, value in image.items())


def decode_and_check(mysql_source: Any, source: Source, start: Any, end: Any,
                     chunk_rows: int) -> None:
    tables = [f"{source.database}.{t.name}" for t in source.tables]
    changes = source.changes

    def stream(function: Any, **options: Any) -> list:
        return list(function(mysql_source, start=start, end=end, tables=tables,
                             server_id=next(_server_ids), **options))

    def read(function: Any, **options: Any) -> list:
        try:
            return stream(function, **options)
        except Exception as exc:
            stopped = "".join(traceback.format_exception(exc))
        # One place for hypothesis to see the failure at, whichever generated decoder (its
        # file name is the table's, new in every example) raised: the traceback goes into the
        # message, not into the exception context that hypothesis tells failures apart by.
        raise AssertionError(f"{function.__name__}({options}) stopped:\n{stopped}")

    fast = read(read_changes_fast)
    check_events(fast, changes, "read_changes_fast")
    for decoder in DECODERS:  # the Python reference and the compiled decoder
        with using(decoder):
            check_chunks(read(read_change_batches, chunk_rows=chunk_rows), changes, fast,
                         f"columnar ({decoder})")
    if library_cannot_read(changes):
        event("library path excluded: latin1 C1 bytes")
        with pytest.raises(UnicodeDecodeError):
            stream(read_changes, fast=False)
        with pytest.raises(SourceError, match="python-mysql-replication: UnicodeDecodeError"):
            stream(read_change_batches, force_library=True)
        return
    library = read(read_changes, fast=False)
    check_events(library, changes, "read_changes(fast=False)")
    assert strict(fast) == strict(library)
    check_chunks(read(read_change_batches, chunk_rows=chunk_rows, force_library=True), changes,
                 fast, "columnar, library-decoded")


def _connect(mariadb: Any, database: str) -> Any:
    connection = mariadb.root_connection(database)
    # TIME as the text MySQL prints (see ``equal``); every other type as pymysql reads it.
    connection.decoders = {k: v for k, v in connection.decoders.items() if k != FIELD_TYPE.TIME}
    with connection.cursor() as cursor:
        cursor.execute("SET SESSION sql_mode = 'STRICT_ALL_TABLES,NO_ENGINE_SUBSTITUTION'")
    return connection


# derandomize: the CI-sized run tries the same sequences on every run, so a red CI is
# reproducible from the commit alone; a run with REPLICATOR_DDL_PROPERTY_EXAMPLES set explores
# fresh random sequences (hypothesis prints how to reproduce a failure).
# No explain phase: it re-runs a failing sequence hundreds of times (minutes of DDL).
@settings(max_examples=EXAMPLES, deadline=None,
          phases=[Phase.explicit, Phase.reuse, Phase.generate, Phase.target, Phase.shrink],
          derandomize="REPLICATOR_DDL_PROPERTY_EXAMPLES" not in os.environ,
          suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow,
                                 HealthCheck.data_too_large, HealthCheck.filter_too_much])
@given(st.data())
def test_rows_between_random_ddl_decode_to_what_the_source_held(mariadb, mysql_source,
                                                                fresh_database, data):
    draw = data.draw
    stem = f"p{next(_tables)}"
    with _connect(mariadb, fresh_database) as connection:
        # fresh_database is per test, not per example: every example has its own tables.
        source = Source(connection, fresh_database)
        for suffix in "ab"[:draw(st.integers(1, 2))]:
            table = create(draw, source, f"{stem}{suffix}")
            for _ in range(draw(st.integers(0, 2))):
                insert(draw, source, table)
        source.changes.clear()  # rows before the range are the data, not changes under test
        start = current_position(mysql_source)
        for _ in range(draw(st.integers(MIN_STEPS, MAX_STEPS))):
            step = draw(st.sampled_from(["row", "row", "row", "ddl", "ddl", "ddl", "transaction"]))
            if step == "transaction" and len(source.tables) > 1:
                transaction(draw, source)
            elif step == "ddl":
                ddl(draw, source, source.pick(draw))
            else:
                row_change(draw, source, source.pick(draw))
        end = current_position(mysql_source)
    # chunk_rows 1-2: the columnar reader spills a chunk after (nearly) every rows event, and
    # a builder shared by two shapes is emptied and refilled.
    decode_and_check(mysql_source, source, start, end,
                     draw(st.sampled_from([1, 2, 100_000]), label="chunk_rows"))
