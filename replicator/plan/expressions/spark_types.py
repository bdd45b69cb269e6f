"""Spark types: the types of Spark's analyzer as the checker reasons about them, the Spark
type a MySQL column reads as, a checked node (its type; its value if it is a literal), and
Spark's rules for the result types of decimal arithmetic and of mixed branches.

Source columns have the Spark type their MySQL type reads as (``spark_type_of``): integers
up to INT as INT, INT UNSIGNED and BIGINT as BIGINT, BIGINT UNSIGNED as DECIMAL(20,0),
DECIMAL(p,s) as DECIMAL(p,s), FLOAT/DOUBLE as DOUBLE, text, ENUM, SET, JSON and TIME as
STRING, DATE as DATE, DATETIME and TIMESTAMP as TIMESTAMP (UTC), binary types as BINARY,
TINYINT(1) as BOOLEAN (under ``tinyint1: boolean``).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from replicator.plan.expressions.errors import ExpressionError

MAX_PRECISION = 38
INT_MIN, INT_MAX = -(2**31), 2**31 - 1
LONG_MAX = 2**63 - 1


@dataclass(frozen=True)
class SparkType:
    kind: str  # boolean int bigint decimal double string date timestamp binary null any
    precision: int = 0
    scale: int = 0

    def __str__(self) -> str:
        return f"decimal({self.precision},{self.scale})" if self.kind == "decimal" else self.kind

    @property
    def numeric(self) -> bool:
        return self.kind in ("int", "bigint", "decimal", "double")

    @property
    def integral(self) -> bool:
        return self.kind in ("int", "bigint")


def decimal(precision: int, scale: int) -> SparkType:
    return SparkType("decimal", precision, scale)


BOOLEAN, INT, BIGINT, DOUBLE = SparkType("boolean"), SparkType("int"), SparkType("bigint"), SparkType("double")
STRING, DATE, TIMESTAMP, BINARY = SparkType("string"), SparkType("date"), SparkType("timestamp"), SparkType("binary")
NULL, ANY = SparkType("null"), SparkType("any")


def spark_type_of(mysql_type: Any, *, tinyint1: str = "boolean") -> SparkType:
    """The Spark type a MySQL column reads as in an expression (see the module doc)."""
    name = mysql_type.name
    if name == "tinyint" and mysql_type.length == 1 and tinyint1 == "boolean":
        return BOOLEAN
    if name in ("tinyint", "smallint", "mediumint", "year") or (name == "int" and not mysql_type.unsigned):
        return INT
    if name in ("int", "integer", "bigint") and not (name == "bigint" and mysql_type.unsigned):
        return BIGINT
    if name == "bigint":
        return decimal(20, 0)
    if name == "decimal":
        precision = mysql_type.precision or 10
        if precision > MAX_PRECISION:
            return STRING
        return decimal(precision, mysql_type.scale or 0)
    if name in ("float", "double"):
        return DOUBLE
    if name == "date":
        return DATE
    if name in ("datetime", "timestamp"):
        return TIMESTAMP
    if name in ("binary", "varbinary", "tinyblob", "blob", "mediumblob", "longblob"):
        return BINARY
    if name == "bit":
        return BIGINT
    return STRING  # char, varchar, text, enum, set, json, time, geometry as text


# -- typed nodes ------------------------------------------------------------------------------

@dataclass(frozen=True)
class Typed:
    """A checked node: its Spark type, and its value where the user wrote it as a literal
    (a number, a string, TRUE/FALSE/NULL, a negated number, ``DATE '...'``/``TIMESTAMP
    '...'``). Nothing is evaluated here: an expression over literals (``1 + 1``) is no
    literal, the engine folds it when it runs (docs/decisions/no-evaluator-in-plan.md, issue 17)."""

    type: SparkType
    literal: bool = False
    value: Any = None


def literal(value: Any, type_: SparkType) -> Typed:
    return Typed(type_, True, value)


def bounded_decimal(precision: int, scale: int) -> SparkType:
    return decimal(min(precision, MAX_PRECISION), min(scale, MAX_PRECISION))


def adjusted_decimal(precision: int, scale: int) -> SparkType:
    """Spark's DecimalType.adjustPrecisionScale (allowPrecisionLoss=true)."""
    if precision <= MAX_PRECISION:
        return decimal(precision, scale)
    int_digits = precision - scale
    min_scale = min(scale, 6)
    return decimal(MAX_PRECISION, max(MAX_PRECISION - int_digits, min_scale))


def as_decimal_type(node: Typed) -> SparkType:
    t = node.type
    if t.kind == "decimal":
        return t
    if node.literal and t.integral and node.value is not None:
        digits = len(str(abs(node.value)))
        return decimal(digits, 0)  # Spark types an integer literal by its digits here
    return decimal(10, 0) if t.kind == "int" else decimal(20, 0)


def wider_type(left: SparkType, right: SparkType, offset: int, what: str) -> SparkType:
    """The common type of two branches/arguments (Spark's findWiderTypeForTwo, our subset)."""
    if left.kind in ("null", "any"):
        return right if left.kind == "null" else left
    if right.kind in ("null", "any"):
        return left if right.kind == "null" else right
    if left == right:
        return left
    if left.numeric and right.numeric:
        if "double" in (left.kind, right.kind):
            return DOUBLE
        if left.integral and right.integral:
            return BIGINT
        a = left if left.kind == "decimal" else (decimal(10, 0) if left.kind == "int" else decimal(20, 0))
        b = right if right.kind == "decimal" else (decimal(10, 0) if right.kind == "int" else decimal(20, 0))
        scale = max(a.scale, b.scale)
        int_digits = max(a.precision - a.scale, b.precision - b.scale)
        if int_digits + scale > MAX_PRECISION:
            return decimal(MAX_PRECISION, max(0, MAX_PRECISION - int_digits))
        return decimal(int_digits + scale, scale)
    if {left.kind, right.kind} == {"date", "timestamp"}:
        return TIMESTAMP
    raise ExpressionError(f"{what} mixes {left} and {right}", offset,
                          hint="CAST one side explicitly so both have one type")
