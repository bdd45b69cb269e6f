"""MySQL -> warehouse type mapping, as data.

A MySQL column maps to a ``TargetType``: a small logical type (kind + precision/scale/fsp) that
each ``Dialect`` renders as its own type name (``dialects.py``) and that ``sink.staging`` turns
into the exact Arrow type. The whole table is documented in ``docs/type-mapping.md``.

Decisions worth knowing:

- Integers keep their range: NUMBER(digits, 0) in Snowflake, the smallest DuckDB integer
  that holds the range (unsigned types go one size up). BIGINT UNSIGNED is NUMBER(20,0) /
  DECIMAL(20,0): Snowflake's NUMBER(38,0) would do, but fakesnow (DuckDB underneath) maps
  NUMBER(38,0) to a 64-bit integer that cannot hold 18446744073709551615 (measured).
- DECIMAL(p,s) with p > 38 does not fit NUMBER: VARCHAR with every digit.
- TIME can be negative and up to 838:59:59, which neither warehouse's TIME holds: VARCHAR in
  MySQL's own text form (``-838:59:59.000000``, fsp digits as declared). It keeps every value
  exactly, reads the same as ``SELECT`` in MySQL, and ``verify`` compares it as text. Declare
  ``type: NUMBER(20,0)`` to get microseconds instead (for arithmetic).
- TIMESTAMP is an instant: TIMESTAMP_TZ in UTC. DATETIME is wall-clock time: TIMESTAMP_NTZ.
- BIT(1) is a flag (BOOLEAN); BIT(n>1) is a bit string (BINARY, big-endian, ceil(n/8) bytes).
- TINYINT(1) follows ``source.mysql.tinyint1``: ``boolean`` (MySQL's BOOL) or ``integer``.
- A column's declared ``type:`` in the YAML wins over all of this (``parse_target_type``).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any, Literal

from replicator.errors import PlanError
from replicator.model.catalog import BINARY_TYPES, STRING_TYPES, MySQLType
from replicator.model.pipeline import Tinyint1Policy

TargetKind = Literal[
    "integer",  # precision = decimal digits (Snowflake), bits = DuckDB/Arrow width
    "decimal",  # precision, scale
    "float",  # 8-byte IEEE
    "string",  # length optional
    "time_text",  # MySQL TIME as '[-]HHH:MM:SS[.ffffff]' text
    "boolean",
    "date",
    "timestamp",  # wall clock, no zone; fsp
    "timestamp_tz",  # an instant, stored in UTC; fsp
    "binary",
    "json",  # VARIANT in Snowflake, JSON in DuckDB; staged as JSON text
]

MAX_NUMBER_PRECISION = 38  # Snowflake NUMBER and DuckDB DECIMAL


@dataclass(frozen=True)
class TargetType:
    kind: TargetKind
    precision: int | None = None
    scale: int | None = None
    bits: int | None = None
    fsp: int | None = None
    length: int | None = None

    def describe(self) -> str:
        """A dialect-neutral label for plan --format json and error messages."""
        args = [a for a in (self.precision, self.scale) if a is not None]
        if self.fsp is not None:
            args = [self.fsp]
        return self.kind + (f"({','.join(map(str, args))})" if args else "")


def integer(precision: int, bits: int) -> TargetType:
    return TargetType("integer", precision=precision, scale=0, bits=bits)


STRING = TargetType("string")
FLOAT = TargetType("float")
BOOLEAN = TargetType("boolean")
DATE = TargetType("date")
BINARY = TargetType("binary")
JSON = TargetType("json")

# (MySQL integer type, unsigned) -> target: digits of its largest value, and the width of
# the smallest signed integer that holds every value.
INTEGER_MAPPING: dict[tuple[str, bool], TargetType] = {
    ("tinyint", False): integer(3, 8),
    ("tinyint", True): integer(3, 16),
    ("smallint", False): integer(5, 16),
    ("smallint", True): integer(5, 32),
    ("mediumint", False): integer(7, 32),
    ("mediumint", True): integer(8, 32),
    ("int", False): integer(10, 32),
    ("int", True): integer(10, 64),
    ("bigint", False): integer(19, 64),
    # 18446744073709551615 needs 20 digits and more than 64 bits.
    ("bigint", True): TargetType("decimal", precision=20, scale=0),
}

# MySQL types whose target does not depend on arguments.
SIMPLE_MAPPING: dict[str, TargetType] = {
    **{name: STRING for name in STRING_TYPES},  # char/varchar/text*/enum/set
    **{name: BINARY for name in BINARY_TYPES},  # binary/varbinary/blob*
    "float": FLOAT,  # MySQL FLOAT is 4 bytes; widening to 8 loses nothing
    "double": FLOAT,
    "date": DATE,
    "year": integer(4, 16),
    "json": JSON,
    # MariaDB's own types: text forms are what users expect to see.
    "uuid": STRING,
    "inet4": STRING,
    "inet6": STRING,
    # Spatial values arrive as MySQL's internal WKB bytes.
    **{
        name: BINARY
        for name in ("geometry", "point", "linestring", "polygon", "multipoint",
                     "multilinestring", "multipolygon", "geometrycollection")
    },
}


def map_mysql_type(mysql_type: MySQLType, *, tinyint1: Tinyint1Policy = "boolean") -> TargetType:
    """The target type of a MySQL column (raises PlanError for types we cannot carry)."""
    name = mysql_type.name
    if name == "tinyint" and mysql_type.length == 1 and tinyint1 == "boolean":
        return BOOLEAN
    if (name, mysql_type.unsigned) in INTEGER_MAPPING:
        return INTEGER_MAPPING[(name, mysql_type.unsigned)]
    if name == "decimal":
        precision = mysql_type.precision or 10
        if precision > MAX_NUMBER_PRECISION:
            return STRING  # every digit, as text
        return TargetType("decimal", precision=precision, scale=mysql_type.scale or 0)
    if name == "datetime":
        return TargetType("timestamp", fsp=mysql_type.fsp or 0)
    if name == "timestamp":
        return TargetType("timestamp_tz", fsp=mysql_type.fsp or 0)
    if name == "time":
        return TargetType("time_text", fsp=mysql_type.fsp or 0)
    if name == "bit":
        return BOOLEAN if (mysql_type.length or 1) == 1 else BINARY
    if name in SIMPLE_MAPPING:
        return SIMPLE_MAPPING[name]
    raise PlanError(
        f"MySQL type {mysql_type} has no target type",
        hint="declare one on the column (columns: {col: {type: VARCHAR}}) or exclude it "
        "(columns: {col: {exclude: true}})",
    )


# Declared target types (Snowflake spelling, DuckDB spellings accepted too).
_DECLARED = re.compile(r"^\s*([a-z_ ]+?)\s*(?:\(\s*(\d+)\s*(?:,\s*(\d+)\s*)?\))?\s*$", re.I)
_DECLARED_KINDS: dict[str, TargetKind] = {
    **dict.fromkeys(("number", "decimal", "numeric"), "decimal"),
    **dict.fromkeys(("int", "integer", "bigint", "smallint", "tinyint", "byteint"), "integer"),
    **dict.fromkeys(
        ("float", "float4", "float8", "double", "double precision", "real"), "float"
    ),
    **dict.fromkeys(("varchar", "string", "text", "char", "character", "nvarchar"), "string"),
    **dict.fromkeys(("boolean", "bool"), "boolean"),
    "date": "date",
    **dict.fromkeys(("timestamp_ntz", "datetime", "timestamp"), "timestamp"),
    **dict.fromkeys(("timestamp_tz", "timestamptz", "timestamp_ltz"), "timestamp_tz"),
    **dict.fromkeys(("variant", "json", "object", "array"), "json"),
    **dict.fromkeys(("binary", "varbinary", "blob", "bytea"), "binary"),
}


def parse_target_type(text: str) -> TargetType:
    """A type declared in the YAML (``NUMBER(10,2)``, ``VARCHAR``, ``TIMESTAMP_TZ(3)``)."""
    match = _DECLARED.match(text)
    kind = _DECLARED_KINDS.get(" ".join(match.group(1).lower().split())) if match else None
    if match is None or kind is None:
        raise PlanError(
            f"unknown target type {text!r}",
            hint="use one of NUMBER(p,s), INTEGER, FLOAT, VARCHAR, BOOLEAN, DATE, "
            "TIMESTAMP_NTZ(n), TIMESTAMP_TZ(n), VARIANT, BINARY",
        )
    first = int(match.group(2)) if match.group(2) else None
    second = int(match.group(3)) if match.group(3) else None
    if kind == "decimal":
        precision = first if first is not None else MAX_NUMBER_PRECISION
        scale = second or 0
        if not (1 <= precision <= MAX_NUMBER_PRECISION and 0 <= scale <= precision):
            raise PlanError(
                f"target type {text!r}: precision must be 1..38 and scale 0..precision",
                hint="use VARCHAR for numbers with more than 38 digits",
            )
        if scale == 0 and precision <= 18:
            return integer(precision, 64)
        return TargetType("decimal", precision=precision, scale=scale)
    if kind == "integer":
        # Snowflake's INTEGER is NUMBER(38,0); 64 bits covers every signed MySQL integer.
        return integer(MAX_NUMBER_PRECISION, 64)
    if kind in ("timestamp", "timestamp_tz"):
        return TargetType(kind, fsp=first if first is not None else 6)
    if kind == "string":
        return TargetType("string", length=first)
    return TargetType(kind)


_DESCRIBED_NUMBER = re.compile(r"^(?:NUMBER|DECIMAL|NUMERIC)\((\d+),\s*(\d+)\)$")


# Type names DuckDB describes columns with that differ from the names it was created with.
_DESCRIBED_ALIASES = {"TIMESTAMP WITH TIME ZONE": "TIMESTAMPTZ"}


def lags_plan(described: str | None, planned: TargetType, dialect: Any) -> bool:
    """Whether a target column of type ``described`` (as the driver describes it; None: it
    does not) cannot hold ``planned``'s values and is not widened to it in place
    (``widened_from``): another kind of type (its name, arguments left out, is not the
    planned type's, nor, for integers, another integer width; or, where the driver
    describes only some kinds, ``Dialect.described_kinds``, a column it leaves undescribed
    while the plan's is one of them), or other arguments: where the driver describes types
    exactly, any (a DECIMAL's scale); where it describes numbers only (Snowflake), a number's
    scale (a larger precision holds the values, a smaller one is widened in place). Found
    at start-up when a column's type changed in MySQL while no run followed it; a wrong
    answer costs the table a copy."""
    if described is None:
        return planned.kind in dialect.described_kinds

    def base(name: str) -> str:
        name = name.upper().split("(", 1)[0].strip()
        return _DESCRIBED_ALIASES.get(name, name)

    family = {base(dialect.type_name(planned))}
    if planned.kind == "integer" and dialect.integer_names:
        family |= {name.upper() for name in dialect.integer_names.values()}
    if base(described) not in family:
        return True
    if planned.kind in dialect.described_kinds:
        match = _DESCRIBED_NUMBER.match(described.upper().replace(" ", ""))
        return match is None or int(match.group(2)) != (planned.scale or 0)
    if not dialect.exact_described_types:
        return False
    return (not describes(described, planned, dialect)
            and not widened_from(described, planned, dialect))


def describes(described: str | None, planned: TargetType, dialect: Any) -> bool:
    """Whether a column the driver describes as ``described`` (None: it does not) is of
    exactly ``planned``'s type as far as the driver tells: where it describes every type
    exactly, the same name and arguments; where it describes some kinds only
    (``Dialect.described_kinds``), the same for those, and no description for the others.
    Else (nothing described) any column passes."""
    def exact(name: str) -> str:
        name = name.upper().strip()
        return _DESCRIBED_ALIASES.get(name, name).replace(" ", "")

    if dialect.exact_described_types or planned.kind in dialect.described_kinds:
        return described is not None and exact(described) == exact(dialect.type_name(planned))
    if dialect.described_kinds:
        return described is None
    return True


def widened_from(described: str, planned: TargetType, dialect: Any) -> bool:
    """Whether a target column of type ``described`` (as ``dialect.type_name`` writes types)
    is narrower than ``planned`` in a way both warehouses widen in place: an integer of fewer
    bits (DuckDB names them), or a fixed-point number of lower precision at the same scale."""
    described = described.upper().replace(" ", "")
    if described == dialect.type_name(planned).upper().replace(" ", ""):
        return False
    if planned.kind == "integer" and dialect.integer_names:
        widths = {name.upper(): bits for bits, name in dialect.integer_names.items()}
        return described in widths and widths[described] < (planned.bits or 64)
    match = _DESCRIBED_NUMBER.match(described)
    if match is None or planned.kind not in ("integer", "decimal"):
        return False
    precision, scale = int(match.group(1)), int(match.group(2))
    return scale == (planned.scale or 0) and precision < (planned.precision or 0)
