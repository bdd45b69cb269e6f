"""What the source says about its tables: columns with their MySQL types, and primary keys.

Produced by ``source.catalog`` from information_schema (live), or from the ``source_type``
declared per column in the YAML (``plan --offline``); consumed by ``plan``. ``MySQLType``
parses a column type as information_schema.COLUMNS.COLUMN_TYPE writes it
(``decimal(38,10) unsigned``, ``enum('a','b')``, ``datetime(6)``, ``tinyint(1)``).
"""

from __future__ import annotations

import re
from dataclasses import dataclass

# MySQL type names that take (precision, scale), (length) or (fsp) arguments.
INTEGER_TYPES = frozenset({"tinyint", "smallint", "mediumint", "int", "integer", "bigint"})
DECIMAL_TYPES = frozenset({"decimal", "numeric", "dec", "fixed"})
FLOAT_TYPES = frozenset({"float", "double", "real", "double precision"})
TEMPORAL_FSP_TYPES = frozenset({"datetime", "timestamp", "time"})
STRING_TYPES = frozenset(
    {"char", "varchar", "tinytext", "text", "mediumtext", "longtext", "enum", "set"}
)
BINARY_TYPES = frozenset(
    {"binary", "varbinary", "tinyblob", "blob", "mediumblob", "longblob"}
)
OTHER_TYPES = frozenset(
    {"date", "year", "bit", "json", "bool", "boolean", "geometry", "point", "linestring",
     "polygon", "multipoint", "multilinestring", "multipolygon", "geometrycollection",
     "uuid", "inet4", "inet6", "vector"}
)
KNOWN_TYPES = (
    INTEGER_TYPES | DECIMAL_TYPES | FLOAT_TYPES | TEMPORAL_FSP_TYPES | STRING_TYPES
    | BINARY_TYPES | OTHER_TYPES
)

_TYPE = re.compile(
    r"^\s*(?P<name>double\s+precision|[a-z0-9_]+)\s*(?:\((?P<args>.*)\))?\s*(?P<rest>.*)$",
    re.IGNORECASE | re.DOTALL,
)
_QUOTED = re.compile(r"'((?:[^']|'')*)'")


class MySQLTypeError(ValueError):
    """A column type text that is not a MySQL type."""


@dataclass(frozen=True)
class MySQLType:
    name: str  # lower case base name: "decimal", "varchar", "datetime", ...
    length: int | None = None  # char/varchar/binary length, bit width, integer display width
    precision: int | None = None  # decimal precision
    scale: int | None = None  # decimal scale
    fsp: int | None = None  # fractional seconds of datetime/timestamp/time
    unsigned: bool = False
    values: tuple[str, ...] = ()  # enum/set members

    @classmethod
    def parse(cls, text: str) -> MySQLType:
        match = _TYPE.match(text)
        if not match:
            raise MySQLTypeError(f"not a MySQL column type: {text!r}")
        name = " ".join(match.group("name").lower().split())
        if name not in KNOWN_TYPES:
            raise MySQLTypeError(f"unknown MySQL column type {name!r} in {text!r}")
        args = match.group("args")
        rest = match.group("rest").lower().split()
        unknown = set(rest) - {"unsigned", "signed", "zerofill"}
        if unknown:
            raise MySQLTypeError(f"unexpected {' '.join(sorted(unknown))!r} in MySQL type {text!r}")
        unsigned = "unsigned" in rest or "zerofill" in rest
        if name in ("enum", "set"):
            values = tuple(v.replace("''", "'") for v in _QUOTED.findall(args or ""))
            return cls(name=name, values=values)
        numbers: list[int] = []
        if args:
            try:
                numbers = [int(part) for part in args.split(",")]
            except ValueError:
                raise MySQLTypeError(f"bad arguments in MySQL type {text!r}") from None
        if name in ("bool", "boolean"):
            return cls(name="tinyint", length=1)
        if name in DECIMAL_TYPES:
            precision = numbers[0] if numbers else 10
            scale = numbers[1] if len(numbers) > 1 else 0
            return cls(name="decimal", precision=precision, scale=scale, unsigned=unsigned)
        if name in TEMPORAL_FSP_TYPES:
            return cls(name=name, fsp=numbers[0] if numbers else 0)
        if name in FLOAT_TYPES:
            base = "double" if name in ("double", "real", "double precision") else "float"
            return cls(name=base, unsigned=unsigned)
        if name == "integer":
            name = "int"
        return cls(name=name, length=numbers[0] if numbers else None, unsigned=unsigned)

    def __str__(self) -> str:
        if self.name in ("enum", "set"):
            inner = ",".join("'" + v.replace("'", "''") + "'" for v in self.values)
            text = f"{self.name}({inner})"
        elif self.name == "decimal":
            text = f"decimal({self.precision},{self.scale})"
        elif self.fsp:
            text = f"{self.name}({self.fsp})"
        elif self.length is not None:
            text = f"{self.name}({self.length})"
        else:
            text = self.name
        return text + (" unsigned" if self.unsigned else "")


@dataclass(frozen=True)
class SourceColumn:
    name: str
    mysql_type: MySQLType
    nullable: bool = True
    ordinal: int = 0  # 1-based position in the table
    charset: str | None = None  # None for non-character columns
    default: str | None = None


@dataclass(frozen=True)
class SourceTable:
    database: str
    table: str
    columns: tuple[SourceColumn, ...]
    primary_key: tuple[str, ...] = ()  # empty: the table has no primary key

    @property
    def name(self) -> str:
        return f"{self.database}.{self.table}"

    def column(self, name: str) -> SourceColumn | None:
        wanted = name.lower()  # MySQL column names are case-insensitive
        for column in self.columns:
            if column.name.lower() == wanted:
                return column
        return None


@dataclass(frozen=True)
class Catalog:
    """The source tables a plan is built from; ``live`` says where they came from."""

    tables: tuple[SourceTable, ...]
    live: bool = True  # False: built from the YAML's declared columns (plan --offline)

    def table(self, database: str, table: str) -> SourceTable | None:
        for source_table in self.tables:
            if (source_table.database.lower(), source_table.table.lower()) == (
                database.lower(),
                table.lower(),
            ):
                return source_table
        return None
