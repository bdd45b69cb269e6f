"""The checksum tests' data: the demo's ``awkward`` table plus ``types`` (the awkward values
the demo lacks, DOUBLE and FLOAT among them) and ``docs`` (JSON as written), in a pipeline
whose tables are checksummed next to one that falls back (``customers``: a masked column;
on Snowflake ``docs`` too: a VARIANT is re-serialised)."""

from __future__ import annotations

import datetime as dt
from decimal import Decimal
from pathlib import Path
from typing import Any

from tests.integration.verify_support import pipeline_file

TYPES_DDL = """CREATE TABLE types (
    id INT PRIMARY KEY,
    small_neg SMALLINT NULL,
    tiny_u TINYINT UNSIGNED NULL,
    bool_wide TINYINT(1) NULL,
    big_signed BIGINT NULL,
    huge DECIMAL(65,30) NULL,
    dec0 DECIMAL(10,0) NULL,
    ts3 TIMESTAMP(3) NULL DEFAULT NULL,
    dt0 DATETIME NULL,
    old_date DATE NULL,
    t0 TIME NULL,
    fixed BINARY(4) NULL,
    vb VARBINARY(10) NULL,
    bits BIT(12) NULL,
    latin VARCHAR(20) CHARACTER SET latin1 NULL,
    padded CHAR(5) NULL,
    yr YEAR NULL,
    pipe VARCHAR(50) NULL,
    pipe2 VARCHAR(50) NULL,
    dbl DOUBLE NULL,
    flt FLOAT NULL,
    zf INT(4) ZEROFILL NOT NULL DEFAULT 7,
    yr_nn YEAR NOT NULL DEFAULT 0
)"""

# JSON as MariaDB keeps it (the text as written): key order, spaces, number spellings,
# escapes, JSON null next to SQL NULL, an empty string.
DOCS_DDL = "CREATE TABLE docs (id INT PRIMARY KEY, doc JSON NULL)"
DOCS = [None, "null", '""', "[]", "{}", '{"b": 1, "a": [true, false, null]}', '{"a":2,"b":1}',
        '{"nested": {"deep": {"x": 1.5e300, "y": -0.0, "z": 1E2}}}', '{"n": 1.0, "m": 10}',
        '"just a string"', '{"s": "quote \\" and emoji \U0001F42C, \\u00e9 escaped, é not"}',
        '[1, "1", 1.5, -2.5e-300, 1.7976931348623157e308]', '{"k|": "|v", "": ""}']

TYPES_ROWS: list[dict[str, Any]] = [
    {"id": -5, "small_neg": -32768, "tiny_u": 255, "bool_wide": 2, "big_signed": -2**63,
     "huge": Decimal("-12345678901234567890123456789012345.123456789012345678901234567890"),
     "dec0": Decimal(-9999999999), "ts3": "1970-01-01 00:00:01.001", "dt0": "0000-00-00 00:00:00",
     "old_date": "0099-01-05", "t0": "-838:59:59", "fixed": b"\x00\x01", "vb": b"",
     "bits": 0, "latin": "caf\u00e9 na\u00efve", "padded": "ab", "yr": 1901,
     "pipe": "a|", "pipe2": "b",
     "dbl": 5e-324, "flt": 3.40282e38, "zf": 12345, "yr_nn": 2024},
    {"id": 0, "small_neg": 0, "tiny_u": 0, "bool_wide": 0, "big_signed": 2**63 - 1,
     # Not 1E-30: verify's fetch path stages that DECIMAL(65,30) as Python prints it
     # ('1E-30'), the sink's per-row path as MySQL does (every digit).
     "huge": Decimal("0.100000000000000000000000000001"), "dec0": 0,
     "ts3": "2038-01-19 03:14:07.999", "dt0": "9999-12-31 23:59:59", "old_date": "1000-01-01",
     "t0": "00:00:00", "fixed": b"abcd", "vb": b"\xff\x00|", "bits": 4095, "latin": "",
     "padded": "", "yr": 2155, "pipe": "a", "pipe2": "|b",
     "dbl": -1.7976931348623157e308, "flt": 1.4013e-45},
    {"id": 7, "small_neg": -1, "tiny_u": 1, "bool_wide": -1, "big_signed": None, "huge": None,
     "dec0": None, "ts3": None, "dt0": "1969-12-31 23:59:59", "old_date": "0000-00-00",
     "t0": "838:59:59", "fixed": None, "vb": None, "bits": 5, "latin": "None", "padded": "x y",
     "yr": None, "pipe": None, "pipe2": "",
     "dbl": 0.30000000000000004, "flt": None},
    {"id": 8, "small_neg": None, "tiny_u": None, "bool_wide": None, "big_signed": 42,
     "huge": Decimal(1), "dec0": 12, "ts3": "2021-03-28 01:30:00", "dt0": None,
     "old_date": "9999-12-31", "t0": None, "fixed": b"\xff\xff\xff\xff", "vb": b"N",
     "bits": None, "latin": None, "padded": None, "yr": 2000, "pipe": "", "pipe2": None,
     "dbl": 2.0 ** -1000, "flt": 1234565.0},
    {"id": 2_000_000_000, "small_neg": 12, "tiny_u": 9, "bool_wide": 1, "big_signed": 1,
     "huge": Decimal("99999999999999999999999999999999999.999999999999999999999999999999"),
     "dec0": Decimal(9999999999), "ts3": "2000-02-29 12:00:00.5", "dt0": "2000-02-29 12:00:00",
     "old_date": "1970-01-01", "t0": "-00:00:01", "fixed": b"N\x00\x00\x00", "vb": b"0",
     "bits": 256, "latin": "N", "padded": "N", "yr": 1970, "pipe": "None", "pipe2": "N",
     "dbl": -0.0, "flt": 0.1},
]


def create_types(connection: Any, database: str) -> None:
    with connection.cursor() as cursor:
        cursor.execute(f"USE `{database}`")
        cursor.execute("SET SESSION sql_mode = 'NO_ENGINE_SUBSTITUTION'")
        cursor.execute("SET SESSION time_zone = '+00:00'")
        cursor.execute(TYPES_DDL)
        for row in TYPES_ROWS:
            columns = ", ".join(f"`{name}`" for name in row)
            marks = ", ".join(["%s"] * len(row))
            cursor.execute(f"INSERT INTO types ({columns}) VALUES ({marks})", list(row.values()))
        cursor.execute(DOCS_DDL)
        cursor.executemany("INSERT INTO docs VALUES (%s, %s)", list(enumerate(DOCS)))


def checksum_pipeline(tmp_path: Path, database: str, *, target: str | None = None,
                      name: str = "checksums") -> Path:
    return pipeline_file(tmp_path, database, name=name, target=target, tables="""\
  - source: {database}.customers
    columns:
      email: {{mask: sha256}}
  - source: {database}.orders
  - source: {database}.awkward
    columns:
      payload: {{exclude: true}}
  - source: {database}.types
  - source: {database}.docs
""")


def recorded_at(value: dt.datetime) -> str:
    return value.isoformat(sep=" ")
