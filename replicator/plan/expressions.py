"""Computed columns: a Spark SQL expression over a row's source columns, compiled to Python.

``total: {expression: "round(amount * 1.2, 2)", type: "NUMBER(14,2)"}`` in the YAML. The
expression is parsed once with sqlglot (Spark dialect, function names kept as written) and
compiled to closures over a row image, with Spark 4's semantics (ANSI mode, the default):
the types of Spark's analyzer (``1.2`` is DECIMAL(2,1), ``int / int`` is DOUBLE, decimal
arithmetic widens as Spark's does), errors where Spark raises (division by zero, integer and
decimal overflow, an invalid CAST) and NULL where Spark returns NULL. A differential test
(tests/integration/test_transforms_spark_differential.py) runs every supported function
against a real Spark session over generated inputs.

Source columns have the Spark type their MySQL type reads as (``spark_type_of``): integers
up to INT as INT, INT UNSIGNED and BIGINT as BIGINT, BIGINT UNSIGNED as DECIMAL(20,0),
DECIMAL(p,s) as DECIMAL(p,s), FLOAT/DOUBLE as DOUBLE, text, ENUM, SET, JSON and TIME as
STRING, DATE as DATE, DATETIME and TIMESTAMP as TIMESTAMP (UTC), binary types as BINARY,
TINYINT(1) as BOOLEAN (under ``tinyint1: boolean``).

What is outside the subset (``SUPPORTED``), and what Spark would only do by an implicit
conversion we do not reproduce (a string compared with a number, a CASE mixing strings and
numbers), is an ``ExpressionError`` with the offset of the offending part: ``validate``
reports it without Spark, and an explicit ``CAST`` is the fix.
"""

from __future__ import annotations

import datetime as dt
import hashlib
import math
import re
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from decimal import ROUND_DOWN, ROUND_FLOOR, ROUND_HALF_UP, Context, Decimal
from typing import Any

from replicator.errors import PlanError, ReplicatorError
from replicator.model.text import value_text

Row = dict[str, Any]
Fn = Callable[[Row], Any]

MAX_PRECISION = 38
INT_MIN, INT_MAX = -(2**31), 2**31 - 1
LONG_MIN, LONG_MAX = -(2**63), 2**63 - 1
_CTX = Context(prec=200)
MAX_PAD = 1 << 20  # characters: a padded column that large is a mistake, not data


class ExpressionError(PlanError):
    """The expression cannot be compiled; ``offset`` is where in its text (0-based)."""

    def __init__(self, message: str, offset: int = 0, hint: str | None = None) -> None:
        super().__init__(message, hint=hint or SUPPORTED_HINT)
        self.offset = offset


class EvaluationError(ReplicatorError):
    """Spark would fail the query on this row (ANSI mode): ``error_class`` is Spark's name."""

    def __init__(self, error_class: str, message: str) -> None:
        super().__init__(f"[{error_class}] {message}",
                         hint="guard the expression (try_cast, try_divide, NULLIF(x, 0), CASE) "
                         "or fix the source value")
        self.error_class = error_class


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

FUNCTIONS: dict[str, str] = {
    # name -> one-line description for the docs and the hint
    "coalesce": "first non-NULL argument", "nvl": "= coalesce(a, b)", "ifnull": "= coalesce(a, b)",
    "nullif": "NULL when a = b, else a", "nvl2": "b if a is not NULL else c", "if": "if(cond, a, b)",
    "concat": "NULL if any argument is NULL", "concat_ws": "skips NULL arguments",
    "upper": "", "ucase": "", "lower": "", "lcase": "", "trim": "spaces only (or TRIM(BOTH 'x' FROM s))",
    "ltrim": "", "rtrim": "", "substring": "1-based; negative counts from the end",
    "substr": "", "left": "", "right": "", "length": "characters (bytes for BINARY)",
    "char_length": "", "character_length": "", "replace": "", "regexp_replace": "Java-style $1 groups",
    "lpad": "", "rpad": "", "round": "HALF_UP (DECIMAL, integers)", "bround": "HALF_EVEN (DECIMAL, integers)",
    "floor": "", "ceil": "", "ceiling": "", "abs": "", "mod": "", "pmod": "", "try_divide": "",
    "to_date": "to_date(date|timestamp)", "date_format": "yyyy MM dd HH mm ss SSS E a ...",
    "year": "", "month": "", "day": "", "dayofmonth": "", "hour": "", "minute": "", "second": "",
    "quarter": "", "date_trunc": "date_trunc('month', ts)", "datediff": "datediff(end, start)",
    "date_add": "", "date_sub": "", "sha2": "sha2(x, 256)", "md5": "", "sha1": "",
    "sha": "", "greatest": "", "least": "",
}
SUPPORTED_HINT = (
    "computed columns support literals, columns, + - * / % div, comparisons, AND/OR/NOT, "
    "IS [NOT] NULL, IN, BETWEEN, LIKE, ||, CASE, CAST/TRY_CAST (between numbers, of numbers, "
    "booleans, dates and timestamps to STRING, of STRING to INT, BIGINT, BOOLEAN and BINARY, "
    "DATE <-> TIMESTAMP) and the functions "
    + ", ".join(sorted(FUNCTIONS)) + " (docs/configuration.md#computed-columns)"
)


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


def spark_value(value: Any, spark_type: SparkType) -> Any:
    """A source value (as the readers decode it) in the Python form of its Spark type."""
    if value is None:
        return None
    kind = spark_type.kind
    if kind == "boolean":
        return bool(value)
    if kind in ("int", "bigint"):
        if isinstance(value, (bytes, bytearray)):
            return int.from_bytes(value, "big")
        return int(value)
    if kind == "decimal":
        return value if isinstance(value, Decimal) else Decimal(int(value))
    if kind == "double":
        return float(value)
    if kind == "timestamp":
        if isinstance(value, dt.datetime) and value.tzinfo is not None:
            return value.astimezone(dt.UTC).replace(tzinfo=None)
        return value
    if kind == "binary":
        return bytes(value)
    if kind == "string" and not isinstance(value, str):
        if isinstance(value, (dict, list)):
            import json

            return json.dumps(value)
        return value_text(value, 0)  # TIME: hh:mm:ss, the fraction only when there is one
    return value


# -- parsing ------------------------------------------------------------------------------------

def _dialect() -> Any:
    """Spark's grammar with no function table: every call keeps the name it was written with
    (sqlglot's own normalisation rewrites to_date's format, IFNULL, ... lossily)."""
    global _RAW
    if _RAW is None:
        from sqlglot.dialects.spark import Spark

        class RawSpark(Spark):
            class Parser(Spark.Parser):
                FUNCTIONS: dict = {}  # noqa: RUF012 - sqlglot's own class attribute

        _RAW = RawSpark
    return _RAW


_RAW: Any = None


def parse(text: str) -> Any:
    """The sqlglot tree of an expression, or ExpressionError with the offset of the problem."""
    import sqlglot
    from sqlglot.errors import ParseError, TokenError

    try:
        trees = sqlglot.parse(text, read=_dialect())
    except ParseError as exc:
        error = exc.errors[0] if exc.errors else {}
        offset = _offset(text, error.get("line"), error.get("col"))
        description = parse_message(error.get("description") or str(exc))
        raise ExpressionError(f"syntax error: {description}", offset,
                              hint="write one Spark SQL expression, e.g. round(amount * 1.2, 2)") from None
    except TokenError as exc:
        raise ExpressionError(f"syntax error: {exc}", 0,
                              hint="check the quotes: strings are 'single-quoted'") from None
    trees = [t for t in trees if t is not None]
    if len(trees) != 1:
        raise ExpressionError("expected exactly one expression", 0,
                              hint="write one Spark SQL expression, e.g. round(amount * 1.2, 2)")
    from sqlglot import exp

    tree = trees[0]
    if isinstance(tree, (exp.Select, exp.Query, exp.Command)) or tree.find(exp.Select):
        raise ExpressionError("a computed column is an expression, not a query", node_offset(tree))
    return tree


_OPERATORS = {"Add": "+", "Sub": "-", "Mul": "*", "Div": "/", "Mod": "%", "EQ": "=", "NEQ": "<>",
              "GT": ">", "GTE": ">=", "LT": "<", "LTE": "<=", "And": "AND", "Or": "OR"}


def parse_message(description: str) -> str:
    """sqlglot's parse error in words a user of SQL reads."""
    match = re.search(r"Required keyword: '(\w+)' missing for <class '[\w.]*?(\w+)'>", description)
    if match:
        what = _OPERATORS.get(match.group(2), match.group(2).upper())
        return f"{what} is missing an operand" if match.group(2) in _OPERATORS else \
            f"{what} is incomplete ({match.group(1)} missing)"
    return description.split(". Line ")[0]


def _offset(text: str, line: int | None, col: int | None) -> int:
    if not line or not col:
        return 0
    lines = text.split("\n")
    before = sum(len(part) + 1 for part in lines[: line - 1])
    return max(0, min(len(text), before + col - 1))


def node_offset(node: Any) -> int:
    """Where a node starts in the text (sqlglot keeps positions on identifiers, literals and
    function names; an operator starts where its left-most such descendant does)."""
    best: int | None = None
    for child in node.walk():
        meta = child.meta if hasattr(child, "meta") else {}
        start = meta.get("start")
        if start is not None:
            name = getattr(child, "name", "")
            # a function's meta points at its name's end (start..end of the name token)
            best = start if best is None else min(best, start)
            del name
    return best or 0


# -- compiled nodes ---------------------------------------------------------------------------

@dataclass(frozen=True)
class Compiled:
    fn: Fn
    type: SparkType
    constant: bool = False
    value: Any = None  # the value of a constant

    def __call__(self, row: Row) -> Any:
        return self.fn(row)


def _const(value: Any, type_: SparkType) -> Compiled:
    return Compiled(lambda row: value, type_, True, value)


def _fail(error_class: str, message: str) -> Any:
    raise EvaluationError(error_class, message)


def _check_int(value: int, type_: SparkType, what: str = "overflow") -> int:
    low, high = (INT_MIN, INT_MAX) if type_.kind == "int" else (LONG_MIN, LONG_MAX)
    if not low <= value <= high:
        _fail("ARITHMETIC_OVERFLOW", what)
    return value


def _bounded(precision: int, scale: int) -> SparkType:
    return decimal(min(precision, MAX_PRECISION), min(scale, MAX_PRECISION))


def _adjust(precision: int, scale: int) -> SparkType:
    """Spark's DecimalType.adjustPrecisionScale (allowPrecisionLoss=true)."""
    if precision <= MAX_PRECISION:
        return decimal(precision, scale)
    int_digits = precision - scale
    min_scale = min(scale, 6)
    return decimal(MAX_PRECISION, max(MAX_PRECISION - int_digits, min_scale))


def as_decimal_type(node: Compiled) -> SparkType:
    t = node.type
    if t.kind == "decimal":
        return t
    if node.constant and t.integral and node.value is not None:
        digits = len(str(abs(node.value)))
        return decimal(digits, 0)  # Spark types an integer literal by its digits here
    return decimal(10, 0) if t.kind == "int" else decimal(20, 0)


def _fit_decimal(value: Decimal, type_: SparkType, *, error: bool = True) -> Decimal | None:
    """``value`` rounded HALF_UP to the type's scale; overflow is Spark's error (or NULL)."""
    quantum = Decimal(1).scaleb(-type_.scale)
    rounded = value.quantize(quantum, rounding=ROUND_HALF_UP, context=_CTX)
    if rounded.adjusted() >= type_.precision - type_.scale and rounded != 0:
        if not error:
            return None
        _fail("NUMERIC_VALUE_OUT_OF_RANGE",
              f"{value} cannot be represented as Decimal({type_.precision}, {type_.scale})")
    return rounded


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


# -- casts ---------------------------------------------------------------------------------------

def java_double_text(value: float) -> str:
    """Java's Double.toString, as Spark casts a DOUBLE to STRING."""
    if math.isnan(value):
        return "NaN"
    if math.isinf(value):
        return "Infinity" if value > 0 else "-Infinity"
    if value == 0:
        return "-0.0" if math.copysign(1, value) < 0 else "0.0"
    magnitude = abs(value)
    digits = repr(magnitude)
    if 1e-3 <= magnitude < 1e7:
        text = format(Decimal(digits), "f")
        if "." not in text:
            text += ".0"
        return ("-" if value < 0 else "") + text
    mantissa, exponent = f"{Decimal(digits):E}".split("E")
    mantissa = mantissa.rstrip("0").rstrip(".") if "." in mantissa else mantissa
    if "." not in mantissa:
        mantissa += ".0"
    return ("-" if value < 0 else "") + f"{mantissa}E{int(exponent)}"


def _timestamp_text(value: dt.datetime) -> str:
    text = value.strftime("%Y-%m-%d %H:%M:%S")
    if value.microsecond:
        text += "." + f"{value.microsecond:06d}".rstrip("0")
    return text


def to_string(value: Any, type_: SparkType) -> str:
    kind = type_.kind
    if kind == "string":
        return value
    if kind == "boolean":
        return "true" if value else "false"
    if kind in ("int", "bigint"):
        return str(value)
    if kind == "decimal":
        return format(value, "f")
    if kind == "double":
        return java_double_text(value)
    if kind == "date":
        return value.isoformat()
    if kind == "timestamp":
        return _timestamp_text(value)
    if kind == "binary":
        return bytes(value).decode("utf-8", "replace")
    return str(value)


_INTEGER_TEXT = re.compile(r"^[+-]?\d+$", re.A)
_DECIMAL_TEXT = re.compile(r"^[+-]?(\d+\.?\d*|\.\d+)([eE][+-]?\d+)?$", re.A)
_DATE_TEXT = re.compile(r"^([+-]?\d{4,6})(?:-(\d{1,2})(?:-(\d{1,2})(?:[ T].*)?)?)?$", re.S | re.A)
_TIMESTAMP_TEXT = re.compile(
    r"^(\d{4})-(\d{1,2})-(\d{1,2})(?:[ T](\d{1,2}):(\d{1,2})(?::(\d{1,2})(?:\.(\d{1,9}))?)?)?$", re.A)
_TRUE = frozenset({"t", "true", "y", "yes", "1"})
_FALSE = frozenset({"f", "false", "n", "no", "0"})
# What Spark's UTF8String.trimAll() removes around an int, boolean or date being cast: it
# tests each BYTE for Java whitespace or ISO control, so only ASCII ones (0x00-0x20, DEL); a
# character beyond ASCII (U+0085, U+00A0, U+3000) is kept and the cast fails. Decimal and
# double casts trim with UTF8String.trim(): 0x00-0x20 only (measured on Spark 4).
_WS = "".join(chr(c) for c in (*range(0x21), 0x7F))
_WS_NUMBER = "".join(chr(c) for c in range(0x21))


def _invalid(value: Any, source: SparkType, target: str) -> Any:
    _fail("CAST_INVALID_INPUT", f"The value {value!r} of the type {str(source).upper()} cannot "
          f"be cast to {target.upper()} because it is malformed")


def parse_date(text: str) -> dt.date | None:
    match = _DATE_TEXT.match(text.strip(_WS))
    if not match:
        return None
    try:
        return dt.date(int(match.group(1)), int(match.group(2) or 1), int(match.group(3) or 1))
    except ValueError:
        return None


def parse_timestamp(text: str) -> dt.datetime | None:
    match = _TIMESTAMP_TEXT.match(text.strip(_WS))
    if not match:
        return None
    y, mo, d, h, mi, s, fraction = match.groups()
    try:
        micros = int((fraction or "0")[:6].ljust(6, "0"))
        return dt.datetime(int(y), int(mo), int(d), int(h or 0), int(mi or 0), int(s or 0), micros)
    except ValueError:
        return None


def cast_function(source: SparkType, target: SparkType, *, safe: bool) -> Callable[[Any], Any]:
    """One value of ``source`` as ``target`` (None-safe); ``safe``: NULL instead of errors."""
    inner = _cast(source, target)
    if not safe:
        return lambda v: None if v is None else inner(v)

    def guarded(value: Any) -> Any:
        if value is None:
            return None
        try:
            return inner(value)
        except EvaluationError:
            return None

    return guarded


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


def _cast(source: SparkType, target: SparkType) -> Callable[[Any], Any]:
    s, t = source.kind, target.kind
    if s == "null":
        return lambda v: None
    if source == target:
        return lambda v: v
    if t == "string":
        return lambda v: to_string(v, source)
    if t in ("int", "bigint"):
        def to_integral(v: Any) -> int:
            if s == "boolean":
                return int(v)
            if s == "string":
                text = v.strip(_WS)
                if not _INTEGER_TEXT.match(text):
                    _invalid(v, source, t)
                number = int(text)
                low, high = (INT_MIN, INT_MAX) if t == "int" else (LONG_MIN, LONG_MAX)
                if not low <= number <= high:
                    _invalid(v, source, t)
                return number
            if s == "double":
                if math.isnan(v) or math.isinf(v):
                    _fail("CAST_OVERFLOW", f"The value {v} cannot be cast to {t.upper()}")
                number = int(v)
            else:
                number = int(v)  # int/decimal: truncates toward zero
            low, high = (INT_MIN, INT_MAX) if t == "int" else (LONG_MIN, LONG_MAX)
            if not low <= number <= high:
                _fail("CAST_OVERFLOW", f"The value {v} cannot be cast to {t.upper()} due to an overflow")
            return number

        return to_integral
    if t == "decimal":
        def to_decimal(v: Any) -> Decimal | None:
            if s == "boolean":
                number = Decimal(int(v))
            elif s == "string":
                text = v.strip(_WS_NUMBER)
                if not _DECIMAL_TEXT.match(text):
                    _invalid(v, source, str(target))
                number = Decimal(text)
            elif s == "double":
                if math.isnan(v) or math.isinf(v):
                    _invalid(v, source, str(target))
                number = Decimal(repr(v))
            else:
                number = Decimal(v)
            quantum = Decimal(1).scaleb(-target.scale)
            rounded = number.quantize(quantum, rounding=ROUND_HALF_UP, context=_CTX)
            if rounded != 0 and rounded.adjusted() >= target.precision - target.scale:
                _fail("NUMERIC_VALUE_OUT_OF_RANGE",
                      f"{v} cannot be represented as Decimal({target.precision}, {target.scale})")
            return rounded

        return to_decimal
    if t == "double":
        def to_double(v: Any) -> float:
            if s == "string":
                text = v.strip(_WS_NUMBER)
                lowered = text.lower()
                specials = {"nan": math.nan, "infinity": math.inf, "+infinity": math.inf,
                            "-infinity": -math.inf, "inf": math.inf, "+inf": math.inf,
                            "-inf": -math.inf}
                if lowered in specials:
                    return specials[lowered]
                if not re.match(r"^[+-]?(\d+\.?\d*|\.\d+)([eE][+-]?\d+)?[dDfF]?$", text, re.A):
                    _invalid(v, source, "double")
                return float(text.rstrip("dDfF"))
            return float(v)

        return to_double
    if t == "boolean":
        def to_boolean(v: Any) -> bool:
            if s == "string":
                text = v.strip(_WS).lower()
                if text in _TRUE:
                    return True
                if text in _FALSE:
                    return False
                _invalid(v, source, "boolean")
            return v != 0

        return to_boolean
    if t == "date":
        if s == "timestamp":
            return lambda v: v.date()

        def to_date(v: Any) -> dt.date:
            parsed = parse_date(v)
            return parsed if parsed is not None else _invalid(v, source, "date")

        return to_date
    if t == "timestamp":
        if s == "date":
            return lambda v: dt.datetime(v.year, v.month, v.day)

        def to_timestamp(v: Any) -> dt.datetime:
            parsed = parse_timestamp(v)
            return parsed if parsed is not None else _invalid(v, source, "timestamp")

        return to_timestamp
    if t == "binary":
        return lambda v: v.encode("utf-8")
    raise AssertionError(f"no cast from {source} to {target}")  # castable() is checked first


# -- the compiler --------------------------------------------------------------------------------

_ARITH_NAMES = {"Add": "+", "Sub": "-", "Mul": "*", "Div": "/", "Mod": "%", "IntDiv": "div"}


def compile_expression(text: str, columns: Mapping[str, SparkType]) -> Compiled:
    """``text`` over source columns of the given Spark types -> a compiled expression.

    A column of type ``ANY`` (validate, when the YAML does not say the column's type) disables
    type checks that depend on it; run-time compilation always has every column's type.
    """
    tree = parse(text)
    return Compiler({name.lower(): (name, t) for name, t in columns.items()}).compile(tree)


def check_expression(text: str, columns: Mapping[str, SparkType] | None) -> None:
    """validate's check: syntax, functions, columns (when known) and types (when known)."""
    tree = parse(text)
    Compiler(None if columns is None else {n.lower(): (n, t) for n, t in columns.items()}).compile(tree)


FILTER_HINT = ("a filter is a Spark SQL condition over source columns, like computed columns: "
               "filter: \"status <> 'test' AND amount >= 10\" (docs/configuration.md#row-filters)")


def compile_filter(text: str, columns: Mapping[str, SparkType] | None) -> Compiled:
    """A row filter: a Spark SQL condition (BOOLEAN) over source columns; only TRUE passes.

    Filters were MySQL predicates before this release; one that no longer parses or checks as
    Spark SQL gets a hint saying so (MySQL's XOR, LIKE's case-insensitivity and `||` as OR are
    gone: Spark compares strings by code point, case-sensitively)."""
    try:
        tree = parse(text)
        compiler = Compiler(None if columns is None else {n.lower(): (n, t) for n, t in columns.items()})
        compiled = compiler.compile(tree)
        if compiled.type.kind not in ("boolean", "null", "any"):
            raise ExpressionError(f"the filter is {compiled.type}, not a condition", 0,
                                  hint="compare it: x = 1, x IS NOT NULL")
    except ExpressionError as exc:
        if _mysql_only(text):
            raise ExpressionError(
                f"{exc.message} (filters are Spark SQL now, not MySQL)", exc.offset,
                hint="rewrite the filter in Spark SQL: XOR -> (a AND NOT b) OR (NOT a AND b), "
                "`col` quoting stays, || means concatenation, string comparisons are "
                "case-sensitive (lower(x) = 'abc'); " + FILTER_HINT) from None
        raise
    return compiled


def _mysql_only(text: str) -> bool:
    """Whether ``text`` reads as MySQL (the filter dialect before this release)."""
    import sqlglot
    from sqlglot.errors import ParseError, TokenError

    try:
        sqlglot.parse_one(text, read="mysql")
    except (ParseError, TokenError):
        return False
    return True


def referenced_columns(text: str) -> list[str]:
    from sqlglot import exp

    return [c.name for c in parse(text).find_all(exp.Column)]


class Compiler:
    def __init__(self, columns: dict[str, tuple[str, SparkType]] | None) -> None:
        self.columns = columns  # None: any column name goes, of type ANY

    def error(self, node: Any, message: str, hint: str | None = None) -> ExpressionError:
        return ExpressionError(message, node_offset(node), hint)

    # dispatch ---------------------------------------------------------------------------
    def compile(self, node: Any) -> Compiled:
        from sqlglot import exp

        if isinstance(node, exp.Paren):
            return self.compile(node.this)
        if isinstance(node, exp.Column):
            return self.column(node)
        if isinstance(node, exp.Literal):
            return self.literal(node)
        if isinstance(node, exp.Boolean):
            return _const(bool(node.this), BOOLEAN)
        if isinstance(node, exp.Null):
            return _const(None, NULL)
        if isinstance(node, exp.Neg):
            return self.negate(node)
        if isinstance(node, exp.Not):
            inner = self.boolean(node.this)
            return Compiled(lambda row: None if (v := inner(row)) is None else not v, BOOLEAN)
        if isinstance(node, (exp.And, exp.Or)):
            return self.logic(node)
        if type(node).__name__ in ("EQ", "NEQ", "GT", "GTE", "LT", "LTE", "NullSafeEQ"):
            return self.comparison(node)
        if type(node).__name__ in _ARITH_NAMES:
            return self.arithmetic(node, _ARITH_NAMES[type(node).__name__])
        if isinstance(node, exp.Concat):  # adjacent string literals: 'a' 'b'
            return self.function_concat(node, [self.compile(e) for e in node.expressions])
        if isinstance(node, exp.DPipe):
            return self.function_concat(node, [self.compile(node.this), self.compile(node.expression)])
        if isinstance(node, exp.Is):
            return self.is_(node)
        if isinstance(node, exp.In):
            return self.in_(node)
        if isinstance(node, exp.Between):
            low = exp.GTE(this=node.this, expression=node.args["low"])
            high = exp.LTE(this=node.this, expression=node.args["high"])
            return self.logic(exp.And(this=low, expression=high))
        if isinstance(node, exp.Like) and not node.args.get("escape"):
            return self.like(node)
        if isinstance(node, exp.Case):
            return self.case(node)
        if isinstance(node, exp.If):
            return self.conditional(node, [(node.this, node.args.get("true"))], node.args.get("false"))
        if isinstance(node, (exp.Cast, exp.TryCast)):
            return self.cast(node)
        if isinstance(node, exp.Trim):
            return self.trim(node)
        if isinstance(node, exp.Substring):
            args = [self.compile(a) for a in (node.this, node.args.get("start"), node.args.get("length")) if a is not None]
            return self.fn_substring(node, args)
        if isinstance(node, (exp.Initcap, exp.Floor, exp.Ceil)):
            extra = node.args.get("decimals") or node.args.get("to")
            delimiters = node.args.get("expression") if isinstance(node, exp.Initcap) else None
            if extra is not None or (delimiters is not None and delimiters.sql() != "' '"):
                raise self.error(node, f"{node.sql_name().lower()}() takes 1 argument here")
            handler = {exp.Initcap: self.fn_initcap, exp.Floor: self.fn_floor, exp.Ceil: self.fn_ceil}[type(node)]
            return handler(node, [self.compile(node.this)])
        if isinstance(node, exp.Anonymous):
            name = str(node.this).lower()
            handler = getattr(self, f"fn_{name}", None)
            if name not in FUNCTIONS or handler is None:
                raise self.error(node, f"function {name}() is not supported in a computed column")
            return handler(node, [self.compile(a) for a in node.expressions])
        if isinstance(node, (exp.CurrentDate, exp.CurrentTimestamp)):
            raise self.error(node, f"{node.sql()} is not supported: a computed column must give "
                             "the same value each time a row is replayed",
                             hint="use a source column, or the ts metadata column (metadata: [ts])")
        raise self.error(node, f"{node.sql(dialect='spark')!r} is not supported in a computed column")

    # leaves -------------------------------------------------------------------------------
    def column(self, node: Any) -> Compiled:
        wanted = node.name.lower()
        if node.table:
            raise self.error(node, f"column {node.sql()!r}: write the column name alone",
                             hint="a computed column reads the row's own source columns")
        if self.columns is None:
            name = node.name
            return Compiled(lambda row: row.get(name), ANY)
        if wanted not in self.columns:
            import difflib

            names = [n for n, _ in self.columns.values()]
            close = difflib.get_close_matches(node.name, names, n=1, cutoff=0.6)
            hint = (f"did you mean '{close[0]}'?" if close else
                    f"the table's source columns are: {', '.join(names)}")
            raise self.error(node, f"unknown column {node.name!r}", hint=hint)
        name, type_ = self.columns[wanted]
        return Compiled(lambda row: row.get(name), type_)

    def literal(self, node: Any) -> Compiled:
        if node.is_string:
            return _const(node.this, STRING)
        text = str(node.this)
        if re.fullmatch(r"\d+", text):
            number = int(text)
            if number <= INT_MAX:
                return _const(number, INT)
            if number <= LONG_MAX:
                return _const(number, BIGINT)
            value = Decimal(text)
            return _const(value, decimal(len(text), 0))
        if re.fullmatch(r"\d+[lL]", text):
            return _const(int(text[:-1]), BIGINT)
        if re.fullmatch(r"(\d+\.?\d*|\.\d+)[eE][+-]?\d+|[\d.]+[dD]", text):
            return _const(float(text.rstrip("dD")), DOUBLE)
        if re.fullmatch(r"\d+\.?\d*|\.\d+", text):
            value = Decimal(text)
            digits = value.as_tuple()
            scale = max(0, -int(digits.exponent))
            precision = max(len(digits.digits), scale)
            if precision > MAX_PRECISION:
                return _const(float(text), DOUBLE)
            return _const(value, decimal(max(precision, 1), scale))
        if re.fullmatch(r"[\d.]+[bB][dD]", text):
            value = Decimal(text[:-2])
            scale = max(0, -int(value.as_tuple().exponent))
            return _const(value, decimal(max(len(value.as_tuple().digits), scale), scale))
        raise self.error(node, f"literal {text!r} is not supported")

    # operators -----------------------------------------------------------------------------
    def boolean(self, node: Any) -> Compiled:
        inner = self.compile(node)
        if inner.type.kind not in ("boolean", "null", "any"):
            raise self.error(node, f"{node.sql(dialect='spark')} is {inner.type}, not a condition",
                             hint="compare it: x = 1, x IS NOT NULL")
        return inner

    def negate(self, node: Any) -> Compiled:
        inner = self.compile(node.this)
        t = inner.type
        if inner.constant and t.kind in ("int", "bigint", "decimal", "double"):
            value = -inner.value if inner.value is not None else None
            if t.kind == "decimal" and node.this.is_number:
                return _const(value, t)
            if t.integral and value is not None and value < INT_MIN and t.kind == "int":
                return _const(value, BIGINT)
            return _const(value, t)
        if not (t.numeric or t.kind in ("null", "any")):
            raise self.error(node, f"cannot negate {t}")

        def negated(row: Row) -> Any:
            v = inner(row)
            if v is None:
                return None
            result = -v
            if t.integral:
                _check_int(result, t)
            return result

        return Compiled(negated, t)

    def logic(self, node: Any) -> Compiled:
        from sqlglot import exp

        left, right = self.boolean(node.this), self.boolean(node.expression)
        if isinstance(node, exp.And):
            def both(row: Row) -> Any:
                a = left(row)
                if a is False:
                    return False
                b = right(row)
                if b is False:
                    return False
                return None if a is None or b is None else True

            return Compiled(both, BOOLEAN)

        def either(row: Row) -> Any:
            a = left(row)
            if a is True:
                return True
            b = right(row)
            if b is True:
                return True
            return None if a is None or b is None else False

        return Compiled(either, BOOLEAN)

    def comparable(self, node: Any, left: Compiled, right: Compiled) -> tuple[Compiled, Compiled]:
        """Both sides in one type (Spark's implicit casts for comparisons, our subset)."""
        lt, rt = left.type, right.type
        if "any" in (lt.kind, rt.kind) or "null" in (lt.kind, rt.kind) or lt == rt:
            return left, right
        if lt.numeric and rt.numeric:
            common = wider_type(lt, rt, node_offset(node), "the comparison")
            return self.coerce(left, common), self.coerce(right, common)
        for a, b in ((left, right), (right, left)):
            if a.type.kind == "string" and a.constant and b.type.kind in ("date", "timestamp"):
                target = b.type
                parse_ = parse_date if target.kind == "date" else parse_timestamp
                parsed = parse_(a.value) if a.value is not None else None
                if a.value is not None and parsed is None:
                    raise self.error(node, f"{a.value!r} is not a {target.kind}",
                                     hint="write dates as 'yyyy-MM-dd' and timestamps as 'yyyy-MM-dd HH:mm:ss'")
                converted = _const(parsed, target)
                return (converted, b) if a is left else (b, converted)
        if {lt.kind, rt.kind} == {"date", "timestamp"}:
            return self.coerce(left, TIMESTAMP), self.coerce(right, TIMESTAMP)
        raise self.error(node, f"comparison of {lt} with {rt}",
                         hint="CAST one side so both have one type, e.g. CAST(x AS STRING)")

    def coerce(self, node: Compiled, target: SparkType) -> Compiled:
        if node.type == target or "any" in (node.type.kind, target.kind) or node.type.kind == "null":
            # "any": a column whose type validate does not know (no source_type, no catalog);
            # the plan, built from the catalog, checks the expression again with it.
            return node
        convert = cast_function(node.type, target, safe=False)
        if node.constant:
            return _const(convert(node.value), target)
        fn = node.fn
        return Compiled(lambda row: convert(fn(row)), target)

    def comparison(self, node: Any) -> Compiled:
        left, right = self.comparable(node, self.compile(node.this), self.compile(node.expression))
        if left.type.kind == "double" or right.type.kind == "double":
            key: Callable[[Any], Any] = _double_key
        else:
            key = _identity
        name = type(node).__name__
        ops: dict[str, Callable[[Any, Any], bool]] = {
            "EQ": lambda a, b: a == b, "NEQ": lambda a, b: a != b, "GT": lambda a, b: a > b,
            "GTE": lambda a, b: a >= b, "LT": lambda a, b: a < b, "LTE": lambda a, b: a <= b,
        }
        if name == "NullSafeEQ":
            def null_safe(row: Row) -> bool:
                a, b = left(row), right(row)
                if a is None or b is None:
                    return a is None and b is None
                return key(a) == key(b)

            return Compiled(null_safe, BOOLEAN)
        op = ops[name]

        def compare(row: Row) -> Any:
            a, b = left(row), right(row)
            if a is None or b is None:
                return None
            return op(key(a), key(b))

        return Compiled(compare, BOOLEAN)

    def arithmetic(self, node: Any, op: str) -> Compiled:
        left, right = self.compile(node.this), self.compile(node.expression)
        lt, rt = left.type, right.type
        offset = node_offset(node)
        for side in (lt, rt):
            if not (side.numeric or side.kind in ("null", "any")):
                raise ExpressionError(f"arithmetic ({op}) on {side}", offset,
                                      hint="CAST the operand to a number, or use concat() for strings")
        if "any" in (lt.kind, rt.kind):
            return Compiled(lambda row: None, ANY)
        if lt.kind == "null" and rt.kind == "null":
            lt = rt = INT
        lt = rt if lt.kind == "null" else lt
        rt = lt if rt.kind == "null" else rt
        if op == "div":
            if not (lt.integral and rt.integral):
                raise ExpressionError("div needs integer operands", offset,
                                      hint="CAST the operands to BIGINT, or use / and floor()")

            def int_div(row: Row) -> Any:
                a, b = left(row), right(row)
                if a is None or b is None:
                    return None
                if b == 0:
                    _fail("DIVIDE_BY_ZERO", "Division by zero")
                quotient = abs(a) // abs(b) * (1 if (a >= 0) == (b >= 0) else -1)
                return _check_int(quotient, BIGINT)

            return Compiled(int_div, BIGINT)
        if op == "/" and lt.integral and rt.integral:
            lt = rt = DOUBLE
            left, right = self.coerce(left, DOUBLE), self.coerce(right, DOUBLE)
        if "double" in (lt.kind, rt.kind):
            left, right = self.coerce(left, DOUBLE), self.coerce(right, DOUBLE)
            return Compiled(_double_op(op, left, right), DOUBLE)
        if lt.integral and rt.integral:
            result = BIGINT if "bigint" in (lt.kind, rt.kind) else INT
            return Compiled(_integral_op(op, left, right, result), result)
        a, b = as_decimal_type(left), as_decimal_type(right)
        p1, s1, p2, s2 = a.precision, a.scale, b.precision, b.scale
        if op in ("+", "-"):
            scale = max(s1, s2)
            result = _adjust(max(p1 - s1, p2 - s2) + scale + 1, scale)
        elif op == "*":
            result = _adjust(p1 + p2 + 1, s1 + s2)
        elif op == "/":
            scale = max(6, s1 + p2 + 1)
            result = _adjust(p1 - s1 + s2 + scale, scale)
        else:  # %
            scale = max(s1, s2)
            result = _adjust(min(p1 - s1, p2 - s2) + scale, scale)
        return Compiled(_decimal_op(op, left, right, result), result)

    def is_(self, node: Any) -> Compiled:
        from sqlglot import exp

        inner = self.compile(node.this)
        target = node.expression
        if isinstance(target, exp.Null):
            return Compiled(lambda row: inner(row) is None, BOOLEAN)
        if isinstance(target, exp.Boolean):
            flag = bool(target.this)
            self.boolean(node.this)
            return Compiled(lambda row: inner(row) is flag, BOOLEAN)
        raise self.error(node, f"IS {target.sql()} is not supported")

    def in_(self, node: Any) -> Compiled:
        if node.args.get("query") or node.args.get("unnest") or node.args.get("field"):
            raise self.error(node, "IN (SELECT ...) is not supported in a computed column")
        from sqlglot import exp

        checks = [self.comparison(exp.EQ(this=node.this, expression=option)) for option in node.expressions]

        def member(row: Row) -> Any:
            results = [check(row) for check in checks]
            if True in results:
                return True
            return None if None in results else False

        return Compiled(member, BOOLEAN)

    def like(self, node: Any) -> Compiled:
        inner = self.compile(node.this)
        pattern = self.compile(node.expression)
        if not pattern.constant or pattern.type.kind != "string":
            raise self.error(node.expression, "LIKE needs a string literal pattern")
        if inner.type.kind not in ("string", "null", "any"):
            raise self.error(node, f"LIKE on {inner.type}", hint="CAST(x AS STRING) LIKE '...'")
        regex = _like_regex(pattern.value, self.error(node.expression, "bad LIKE escape"))
        return Compiled(lambda row: None if (v := inner(row)) is None else bool(regex.match(v)), BOOLEAN)

    def conditional(self, node: Any, branches: list[tuple[Any, Any]], default: Any) -> Compiled:
        conditions = [self.boolean(cond) for cond, _ in branches]
        values = [self.compile(value) for _, value in branches]
        otherwise = self.compile(default) if default is not None else _const(None, NULL)
        result = NULL
        for value in [*values, otherwise]:
            result = wider_type(result, value.type, node_offset(node), "CASE/IF")
        values = [self.coerce(v, result) for v in values]
        otherwise = self.coerce(otherwise, result)
        pairs = list(zip(conditions, values, strict=True))

        def choose(row: Row) -> Any:
            for condition, value in pairs:
                if condition(row) is True:
                    return value(row)
            return otherwise(row)

        return Compiled(choose, result)

    def case(self, node: Any) -> Compiled:
        from sqlglot import exp

        subject = node.this
        branches = []
        for when in node.args.get("ifs") or []:
            condition = when.this if subject is None else exp.EQ(this=subject, expression=when.this)
            branches.append((condition, when.args.get("true")))
        return self.conditional(node, branches, node.args.get("default"))

    def cast(self, node: Any) -> Compiled:
        from sqlglot import exp

        inner = self.compile(node.this)
        target = self.spark_type(node.args["to"])
        safe = isinstance(node, exp.TryCast) and bool(node.args.get("safe"))
        if not castable(inner.type, target):
            raise self.error(node, f"cannot CAST {inner.type} to {target}")
        convert = cast_function(inner.type, target, safe=safe)
        if inner.constant:
            try:
                return _const(convert(inner.value), target)
            except EvaluationError as exc:
                raise self.error(node, exc.message) from None
        fn = inner.fn
        return Compiled(lambda row: convert(fn(row)), target)

    def spark_type(self, node: Any) -> SparkType:
        text = node.sql(dialect="spark").lower().replace(" ", "")
        simple = {"int": INT, "integer": INT, "bigint": BIGINT, "long": BIGINT, "double": DOUBLE,
                  "string": STRING, "date": DATE, "timestamp": TIMESTAMP, "boolean": BOOLEAN,
                  "binary": BINARY, "decimal": decimal(10, 0)}
        if text in simple:
            return simple[text]
        match = re.fullmatch(r"(?:decimal|numeric|dec)\((\d+)(?:,(\d+))?\)", text)
        if match:
            precision, scale = int(match.group(1)), int(match.group(2) or 0)
            if not 1 <= precision <= MAX_PRECISION or scale > precision:
                raise self.error(node, f"DECIMAL({precision},{scale}) is not a Spark type",
                                 hint="precision 1..38, scale <= precision")
            return decimal(precision, scale)
        raise self.error(node, f"CAST to {text} is not supported",
                         hint="CAST to INT, BIGINT, DOUBLE, DECIMAL(p,s), STRING, DATE, TIMESTAMP, "
                         "BOOLEAN or BINARY")

    def trim(self, node: Any) -> Compiled:
        inner = self.stringy(node.this, self.compile(node.this))
        chars_node = node.args.get("expression")
        chars: Compiled = self.stringy(chars_node, self.compile(chars_node)) if chars_node is not None else _const(" ", STRING)
        position = (node.args.get("position") or "BOTH").upper()
        return self._trim(inner, chars, position)

    def _trim(self, inner: Compiled, chars: Compiled, position: str) -> Compiled:
        def trimmed(row: Row) -> Any:
            v, c = inner(row), chars(row)
            if v is None or c is None:
                return None
            if position == "LEADING":
                return v.lstrip(c)
            if position == "TRAILING":
                return v.rstrip(c)
            return v.strip(c)

        return Compiled(trimmed, STRING)

    # argument helpers --------------------------------------------------------------------------
    def arity(self, node: Any, args: list[Compiled], low: int, high: int | None = None) -> None:
        high = low if high is None else high
        if not low <= len(args) <= high:
            name = str(node.this).lower() if hasattr(node, "this") and isinstance(node.this, str) else "function"
            wanted = str(low) if low == high else f"{low} to {high}"
            raise self.error(node, f"{name}() takes {wanted} arguments, not {len(args)}")

    def stringy(self, node: Any, arg: Compiled) -> Compiled:
        """A string argument; other scalar types are cast to STRING as Spark does implicitly."""
        if arg.type.kind in ("string", "null", "any"):
            return arg
        if arg.type.kind == "binary":
            raise self.error(node, "a BINARY value where a string is expected",
                             hint="CAST(x AS STRING) decodes it as UTF-8")
        return self.coerce(arg, STRING)

    def integer(self, node: Any, arg: Compiled, what: str) -> Compiled:
        if arg.type.kind in ("int", "null", "any"):
            return arg
        if arg.type.kind == "bigint":
            convert = cast_function(BIGINT, INT, safe=False)
            fn = arg.fn
            return Compiled(lambda row: convert(fn(row)), INT)
        raise self.error(node, f"{what} must be an integer, not {arg.type}")

    def constant_int(self, node: Any, arg: Compiled, what: str) -> int:
        if not arg.constant or not arg.type.integral:
            raise self.error(node, f"{what} must be an integer literal")
        return int(arg.value)

    # functions -----------------------------------------------------------------------------------
    def fn_coalesce(self, node: Any, args: list[Compiled]) -> Compiled:
        if not args:
            raise self.error(node, "coalesce() needs arguments")
        result = NULL
        for arg in args:
            result = wider_type(result, arg.type, node_offset(node), "coalesce")
        parts = [self.coerce(a, result) for a in args]
        return Compiled(lambda row: next((v for p in parts if (v := p(row)) is not None), None), result)

    def fn_nvl(self, node: Any, args: list[Compiled]) -> Compiled:
        self.arity(node, args, 2)
        return self.fn_coalesce(node, args)

    fn_ifnull = fn_nvl

    def fn_nullif(self, node: Any, args: list[Compiled]) -> Compiled:
        self.arity(node, args, 2)
        left, right = self.comparable(node, args[0], args[1])
        first = args[0]

        def nullif(row: Row) -> Any:
            a, b = left(row), right(row)
            if a is not None and b is not None and a == b:
                return None
            return first(row)

        return Compiled(nullif, first.type)

    def fn_nvl2(self, node: Any, args: list[Compiled]) -> Compiled:
        self.arity(node, args, 3)
        test = args[0]
        result = wider_type(args[1].type, args[2].type, node_offset(node), "nvl2")
        yes, no = self.coerce(args[1], result), self.coerce(args[2], result)
        return Compiled(lambda row: yes(row) if test(row) is not None else no(row), result)

    def fn_if(self, node: Any, args: list[Compiled]) -> Compiled:  # pragma: no cover - parsed as exp.If
        raise self.error(node, "if() takes 3 arguments")

    def function_concat(self, node: Any, args: list[Compiled]) -> Compiled:
        if args and all(a.type.kind == "binary" for a in args):
            def concat_bytes(row: Row) -> Any:
                values = [a(row) for a in args]
                return None if any(v is None for v in values) else b"".join(values)

            return Compiled(concat_bytes, BINARY)
        parts = [self.stringy(node, a) for a in args]

        def concat(row: Row) -> Any:
            values = [p(row) for p in parts]
            return None if any(v is None for v in values) else "".join(values)

        if all(p.constant for p in parts):
            return _const(concat({}), STRING)
        return Compiled(concat, STRING)

    def fn_concat(self, node: Any, args: list[Compiled]) -> Compiled:
        return self.function_concat(node, args)

    def fn_concat_ws(self, node: Any, args: list[Compiled]) -> Compiled:
        if not args:
            raise self.error(node, "concat_ws() needs a separator")
        parts = [self.stringy(node, a) for a in args]
        separator, rest = parts[0], parts[1:]

        def concat_ws(row: Row) -> Any:
            sep = separator(row)
            if sep is None:
                return None
            return sep.join(v for p in rest if (v := p(row)) is not None)

        return Compiled(concat_ws, STRING)

    def _string_map(self, node: Any, args: list[Compiled], method: Callable[[str], str]) -> Compiled:
        self.arity(node, args, 1)
        inner = self.stringy(node, args[0])
        return Compiled(lambda row: None if (v := inner(row)) is None else method(v), STRING)

    def fn_upper(self, node: Any, args: list[Compiled]) -> Compiled:
        return self._string_map(node, args, str.upper)

    def fn_lower(self, node: Any, args: list[Compiled]) -> Compiled:
        return self._string_map(node, args, str.lower)

    fn_ucase, fn_lcase = fn_upper, fn_lower

    def fn_initcap(self, node: Any, args: list[Compiled]) -> Compiled:
        return self._string_map(node, args, _initcap)

    def fn_ltrim(self, node: Any, args: list[Compiled]) -> Compiled:
        self.arity(node, args, 1)
        return self._trim(self.stringy(node, args[0]), _const(" ", STRING), "LEADING")

    def fn_rtrim(self, node: Any, args: list[Compiled]) -> Compiled:
        self.arity(node, args, 1)
        return self._trim(self.stringy(node, args[0]), _const(" ", STRING), "TRAILING")

    def fn_trim(self, node: Any, args: list[Compiled]) -> Compiled:
        self.arity(node, args, 1)
        return self._trim(self.stringy(node, args[0]), _const(" ", STRING), "BOTH")

    def fn_length(self, node: Any, args: list[Compiled]) -> Compiled:
        self.arity(node, args, 1)
        inner = args[0] if args[0].type.kind == "binary" else self.stringy(node, args[0])
        return Compiled(lambda row: None if (v := inner(row)) is None else len(v), INT)

    fn_char_length = fn_character_length = fn_length

    def fn_substring(self, node: Any, args: list[Compiled]) -> Compiled:
        self.arity(node, args, 2, 3)
        inner = self.stringy(node, args[0])
        start = self.integer(node, args[1], "the position")
        length = self.integer(node, args[2], "the length") if len(args) > 2 else _const(INT_MAX, INT)

        def substring(row: Row) -> Any:
            v, p, n = inner(row), start(row), length(row)
            if v is None or p is None or n is None:
                return None
            return _substring_sql(v, p, n)

        return Compiled(substring, STRING)

    fn_substr = fn_substring

    def fn_left(self, node: Any, args: list[Compiled]) -> Compiled:
        self.arity(node, args, 2)
        inner, count = self.stringy(node, args[0]), self.integer(node, args[1], "the length")

        def left(row: Row) -> Any:
            v, n = inner(row), count(row)
            if v is None or n is None:
                return None
            return "" if n <= 0 else _substring_sql(v, 1, n)

        return Compiled(left, STRING)

    def fn_right(self, node: Any, args: list[Compiled]) -> Compiled:
        self.arity(node, args, 2)
        inner, count = self.stringy(node, args[0]), self.integer(node, args[1], "the length")

        def right(row: Row) -> Any:
            v, n = inner(row), count(row)
            if v is None or n is None:
                return None
            return "" if n <= 0 else _substring_sql(v, -n, INT_MAX)

        return Compiled(right, STRING)

    def fn_replace(self, node: Any, args: list[Compiled]) -> Compiled:
        self.arity(node, args, 2, 3)
        parts = [self.stringy(node, a) for a in args]
        if len(parts) == 2:
            parts.append(_const("", STRING))
        text, search, replacement = parts

        def replace(row: Row) -> Any:
            v, s, r = text(row), search(row), replacement(row)
            if v is None or s is None or r is None:
                return None
            return v if s == "" else v.replace(s, r)

        return Compiled(replace, STRING)

    def fn_regexp_replace(self, node: Any, args: list[Compiled]) -> Compiled:
        self.arity(node, args, 3)
        text = self.stringy(node, args[0])
        pattern, replacement = args[1], args[2]
        if not (pattern.constant and replacement.constant and pattern.type.kind == "string"
                and replacement.type.kind == "string"):
            raise self.error(node, "regexp_replace() needs literal pattern and replacement strings")
        regex = _java_regex(pattern.value, self.error(node.expressions[1], "x"))
        template = _java_replacement(replacement.value, regex, self.error(node.expressions[2], "x"))
        return Compiled(lambda row: None if (v := text(row)) is None else regex.sub(template, v), STRING)

    def _pad(self, node: Any, args: list[Compiled], left: bool) -> Compiled:
        self.arity(node, args, 2, 3)
        text = self.stringy(node, args[0])
        width = self.integer(node, args[1], "the length")
        fill = self.stringy(node, args[2]) if len(args) > 2 else _const(" ", STRING)

        def pad(row: Row) -> Any:
            v, n, f = text(row), width(row), fill(row)
            if v is None or n is None or f is None:
                return None
            if n <= 0:
                return ""
            if n > MAX_PAD:
                _fail("STRING_TOO_LONG", f"padding to {n} characters (replicator's limit: {MAX_PAD})")
            if len(v) >= n or not f:
                return v[:n]
            need = n - len(v)
            padding = (f * (need // len(f) + 1))[:need]
            return padding + v if left else v + padding

        return Compiled(pad, STRING)

    def fn_lpad(self, node: Any, args: list[Compiled]) -> Compiled:
        return self._pad(node, args, True)

    def fn_rpad(self, node: Any, args: list[Compiled]) -> Compiled:
        return self._pad(node, args, False)

    # math --------------------------------------------------------------------------------
    def numeric(self, node: Any, arg: Compiled) -> Compiled:
        if not (arg.type.numeric or arg.type.kind in ("null", "any")):
            raise self.error(node, f"a number is expected, not {arg.type}",
                             hint="CAST(x AS DECIMAL(p,s)) or CAST(x AS DOUBLE)")
        return arg if arg.type.kind != "null" else _const(None, INT)

    def _round(self, node: Any, args: list[Compiled], mode: str) -> Compiled:
        self.arity(node, args, 1, 2)
        inner = self.numeric(node, args[0])
        places = self.constant_int(node, args[1], "the scale") if len(args) > 1 else 0
        if places < 0:
            raise self.error(node, "a negative scale is not supported")
        t = inner.type
        if t.kind == "any":
            return Compiled(lambda row: None, ANY)
        if t.integral:
            return inner
        if t.kind == "double":
            def round_double(row: Row) -> Any:
                v = inner(row)
                if v is None or math.isnan(v) or math.isinf(v):
                    return v
                return float(Decimal(repr(v)).quantize(Decimal(1).scaleb(-places), rounding=mode, context=_CTX))

            return Compiled(round_double, DOUBLE)
        scale = min(t.scale, places)
        result = _bounded(t.precision - t.scale + 1 + scale, scale)

        def round_decimal(row: Row) -> Any:
            v = inner(row)
            if v is None:
                return None
            return _fit_decimal(v.quantize(Decimal(1).scaleb(-scale), rounding=mode, context=_CTX), result)

        return Compiled(round_decimal, result)

    def fn_round(self, node: Any, args: list[Compiled]) -> Compiled:
        return self._round(node, args, ROUND_HALF_UP)

    def fn_bround(self, node: Any, args: list[Compiled]) -> Compiled:
        from decimal import ROUND_HALF_EVEN

        return self._round(node, args, ROUND_HALF_EVEN)

    def _floor_ceil(self, node: Any, args: list[Compiled], ceiling: bool) -> Compiled:
        self.arity(node, args, 1)
        inner = self.numeric(node, args[0])
        t = inner.type
        if t.integral:
            fn = inner.fn
            return Compiled(lambda row: fn(row), BIGINT)
        if t.kind == "double":
            def integral(row: Row) -> Any:
                v = inner(row)
                if v is None:
                    return None
                if math.isnan(v) or math.isinf(v):
                    return _fail("ARITHMETIC_OVERFLOW", "overflow")
                result = math.ceil(v) if ceiling else math.floor(v)
                return _check_int(result, BIGINT)

            return Compiled(integral, BIGINT)
        result = _bounded(t.precision - t.scale + 1, 0)
        rounding = "ROUND_CEILING" if ceiling else ROUND_FLOOR

        def decimal_integral(row: Row) -> Any:
            v = inner(row)
            return None if v is None else v.quantize(Decimal(1), rounding=rounding, context=_CTX)

        return Compiled(decimal_integral, result)

    def fn_floor(self, node: Any, args: list[Compiled]) -> Compiled:
        return self._floor_ceil(node, args, False)

    def fn_ceil(self, node: Any, args: list[Compiled]) -> Compiled:
        return self._floor_ceil(node, args, True)

    fn_ceiling = fn_ceil

    def fn_abs(self, node: Any, args: list[Compiled]) -> Compiled:
        self.arity(node, args, 1)
        inner = self.numeric(node, args[0])
        t = inner.type

        def absolute(row: Row) -> Any:
            v = inner(row)
            if v is None:
                return None
            result = abs(v)
            if t.integral:
                _check_int(result, t)
            return result

        return Compiled(absolute, t)

    def fn_mod(self, node: Any, args: list[Compiled]) -> Compiled:
        from sqlglot import exp

        self.arity(node, args, 2)
        return self.arithmetic(exp.Mod(this=node.expressions[0], expression=node.expressions[1]), "%")

    def fn_pmod(self, node: Any, args: list[Compiled]) -> Compiled:
        remainder = self.fn_mod(node, args)
        divisor = self.coerce(args[1], remainder.type) if remainder.type.kind != "any" else args[1]
        t = remainder.type

        def positive(row: Row) -> Any:
            r = remainder(row)
            if r is None:
                return None
            if r < 0:
                d = divisor(row)
                r = r + d if d > 0 else r
                if t.kind == "decimal":
                    r = _fit_decimal(r, t)
            return r

        return Compiled(positive, t)

    def fn_try_divide(self, node: Any, args: list[Compiled]) -> Compiled:
        from sqlglot import exp

        self.arity(node, args, 2)
        divided = self.arithmetic(exp.Div(this=node.expressions[0], expression=node.expressions[1]), "/")
        fn = divided.fn

        def try_divide(row: Row) -> Any:
            try:
                return fn(row)
            except EvaluationError:
                return None

        return Compiled(try_divide, divided.type)

    def _extreme(self, node: Any, args: list[Compiled], pick: Callable[..., Any]) -> Compiled:
        if len(args) < 2:
            raise self.error(node, "greatest()/least() need at least 2 arguments")
        result = NULL
        for arg in args:
            result = wider_type(result, arg.type, node_offset(node), "greatest/least")
        parts = [self.coerce(a, result) for a in args]

        def extreme(row: Row) -> Any:
            values = [v for p in parts if (v := p(row)) is not None]
            return pick(values, key=_double_key if result.kind == "double" else _identity) if values else None

        return Compiled(extreme, result)

    def fn_greatest(self, node: Any, args: list[Compiled]) -> Compiled:
        return self._extreme(node, args, max)

    def fn_least(self, node: Any, args: list[Compiled]) -> Compiled:
        return self._extreme(node, args, min)

    # dates ---------------------------------------------------------------------------------
    def temporal(self, node: Any, arg: Compiled, want: str) -> Compiled:
        """A DATE or TIMESTAMP argument as ``want``; strings as Spark casts them (errors too)."""
        if arg.type.kind in ("null", "any"):
            return arg
        if arg.type.kind not in ("date", "timestamp", "string"):
            raise self.error(node, f"a date or timestamp is expected, not {arg.type}")
        if arg.type.kind == "string" and want == "timestamp":
            raise self.error(node, "a string where a timestamp is expected",
                             hint="CAST(x AS TIMESTAMP) first")
        return self.coerce(arg, DATE if want == "date" else TIMESTAMP)

    def fn_to_date(self, node: Any, args: list[Compiled]) -> Compiled:
        self.arity(node, args, 1)
        return self.temporal(node, args[0], "date")

    def _field(self, node: Any, args: list[Compiled], want: str, get: Callable[[Any], int]) -> Compiled:
        self.arity(node, args, 1)
        inner = self.temporal(node, args[0], want)
        return Compiled(lambda row: None if (v := inner(row)) is None else get(v), INT)

    def fn_year(self, node: Any, args: list[Compiled]) -> Compiled:
        return self._field(node, args, "date", lambda v: v.year)

    def fn_month(self, node: Any, args: list[Compiled]) -> Compiled:
        return self._field(node, args, "date", lambda v: v.month)

    def fn_day(self, node: Any, args: list[Compiled]) -> Compiled:
        return self._field(node, args, "date", lambda v: v.day)

    fn_dayofmonth = fn_day

    def fn_quarter(self, node: Any, args: list[Compiled]) -> Compiled:
        return self._field(node, args, "date", lambda v: (v.month - 1) // 3 + 1)

    def fn_hour(self, node: Any, args: list[Compiled]) -> Compiled:
        return self._field(node, args, "timestamp", lambda v: v.hour)

    def fn_minute(self, node: Any, args: list[Compiled]) -> Compiled:
        return self._field(node, args, "timestamp", lambda v: v.minute)

    def fn_second(self, node: Any, args: list[Compiled]) -> Compiled:
        return self._field(node, args, "timestamp", lambda v: v.second)

    def fn_datediff(self, node: Any, args: list[Compiled]) -> Compiled:
        self.arity(node, args, 2)
        end, start = self.temporal(node, args[0], "date"), self.temporal(node, args[1], "date")

        def datediff(row: Row) -> Any:
            a, b = end(row), start(row)
            return None if a is None or b is None else (a - b).days

        return Compiled(datediff, INT)

    def _date_add(self, node: Any, args: list[Compiled], sign: int) -> Compiled:
        self.arity(node, args, 2)
        start = self.temporal(node, args[0], "date")
        days = self.integer(node, args[1], "the number of days")

        def date_add(row: Row) -> Any:
            d, n = start(row), days(row)
            if d is None or n is None:
                return None
            try:
                return d + dt.timedelta(days=sign * n)
            except OverflowError:
                return _fail("DATETIME_OVERFLOW", "the date is out of the supported range (years 1-9999)")

        return Compiled(date_add, DATE)

    def fn_date_add(self, node: Any, args: list[Compiled]) -> Compiled:
        return self._date_add(node, args, 1)

    def fn_date_sub(self, node: Any, args: list[Compiled]) -> Compiled:
        return self._date_add(node, args, -1)

    def fn_date_trunc(self, node: Any, args: list[Compiled]) -> Compiled:
        self.arity(node, args, 2)
        unit = args[0]
        if not unit.constant or unit.type.kind != "string":
            raise self.error(node, "date_trunc() needs the unit as a string literal: date_trunc('month', ts)")
        truncate = _TRUNCATIONS.get(str(unit.value).upper())
        if truncate is None:
            raise self.error(node.expressions[0], f"unknown date_trunc unit {unit.value!r}",
                             hint="use YEAR, QUARTER, MONTH, WEEK, DAY, HOUR, MINUTE, SECOND, "
                             "MILLISECOND or MICROSECOND")
        inner = self.temporal(node, args[1], "timestamp")
        return Compiled(lambda row: None if (v := inner(row)) is None else truncate(v), TIMESTAMP)

    def fn_date_format(self, node: Any, args: list[Compiled]) -> Compiled:
        self.arity(node, args, 2)
        pattern = args[1]
        if not pattern.constant or pattern.type.kind != "string":
            raise self.error(node, "date_format() needs the pattern as a string literal")
        try:
            formatter = _date_formatter(pattern.value)
        except ValueError as exc:
            raise self.error(node.expressions[1], str(exc),
                             hint="use the pattern letters y M d H h m s S E a and quoted 'text'") from None
        inner = self.temporal(node, args[0], "timestamp")
        return Compiled(lambda row: None if (v := inner(row)) is None else formatter(v), STRING)

    # hashes ------------------------------------------------------------------------------------
    def bytes_arg(self, node: Any, arg: Compiled) -> Compiled:
        if arg.type.kind == "binary":
            return arg
        if arg.type.kind in ("string", "null", "any"):
            fn = arg.fn
            return Compiled(lambda row: None if (v := fn(row)) is None else v.encode("utf-8"), BINARY)
        raise self.error(node, f"a string or binary value is expected, not {arg.type}",
                         hint="CAST(x AS STRING) first")

    def fn_sha2(self, node: Any, args: list[Compiled]) -> Compiled:
        self.arity(node, args, 2)
        data = self.bytes_arg(node, args[0])
        bits = self.constant_int(node, args[1], "the bit length")
        algorithm = {0: "sha256", 224: "sha224", 256: "sha256", 384: "sha384", 512: "sha512"}.get(bits)
        if algorithm is None:
            return _const(None, STRING)  # Spark: NULL for an unsupported bit length
        return Compiled(lambda row: None if (v := data(row)) is None else hashlib.new(algorithm, v).hexdigest(), STRING)

    def fn_md5(self, node: Any, args: list[Compiled]) -> Compiled:
        self.arity(node, args, 1)
        data = self.bytes_arg(node, args[0])
        return Compiled(lambda row: None if (v := data(row)) is None else hashlib.md5(v).hexdigest(), STRING)

    def fn_sha1(self, node: Any, args: list[Compiled]) -> Compiled:
        self.arity(node, args, 1)
        data = self.bytes_arg(node, args[0])
        return Compiled(lambda row: None if (v := data(row)) is None else hashlib.sha1(v).hexdigest(), STRING)

    fn_sha = fn_sha1


# -- helpers -------------------------------------------------------------------------------------

def _identity(value: Any) -> Any:
    return value


def _double_key(value: float) -> Any:
    # Spark orders NaN above every other double and NaN = NaN; -0.0 = 0.0.
    return (1, 0.0) if math.isnan(value) else (0, value)


def _integral_op(op: str, left: Compiled, right: Compiled, result: SparkType) -> Fn:
    def apply(row: Row) -> Any:
        a, b = left(row), right(row)
        if a is None or b is None:
            return None
        if op == "+":
            value = a + b
        elif op == "-":
            value = a - b
        elif op == "*":
            value = a * b
        else:  # % with Java's sign (of the dividend)
            if b == 0:
                _fail("REMAINDER_BY_ZERO", "Remainder by zero")
            value = abs(a) % abs(b) * (1 if a >= 0 else -1)
        return _check_int(value, result)

    return apply


def _double_op(op: str, left: Compiled, right: Compiled) -> Fn:
    def apply(row: Row) -> Any:
        a, b = left(row), right(row)
        if a is None or b is None:
            return None
        if op == "+":
            return a + b
        if op == "-":
            return a - b
        if op == "*":
            return a * b
        if b == 0:
            _fail("DIVIDE_BY_ZERO" if op == "/" else "REMAINDER_BY_ZERO",
                  "Division by zero" if op == "/" else "Remainder by zero")
        if op == "/":
            return a / b
        return math.fmod(a, b)

    return apply


def _decimal_op(op: str, left: Compiled, right: Compiled, result: SparkType) -> Fn:
    def apply(row: Row) -> Any:
        a, b = left(row), right(row)
        if a is None or b is None:
            return None
        a, b = Decimal(a), Decimal(b)
        if op == "+":
            value = _CTX.add(a, b)
        elif op == "-":
            value = _CTX.subtract(a, b)
        elif op == "*":
            value = _CTX.multiply(a, b)
        elif op == "/":
            if b == 0:
                _fail("DIVIDE_BY_ZERO", "Division by zero")
            value = _CTX.divide(a, b)
        else:
            if b == 0:
                _fail("REMAINDER_BY_ZERO", "Remainder by zero")
            value = _CTX.remainder(a, b)  # sign of the dividend, like Java's BigDecimal
        return _fit_decimal(value, result)

    return apply


def _like_regex(pattern: str, bad_escape: Exception) -> re.Pattern[str]:
    """A Spark LIKE pattern as a regex for ``.match``: ``%`` any run, ``_`` one character;
    ``\\`` escapes only ``_ % \\``, and a pattern ending in a lone ``\\`` is an error."""
    out = []
    escaped = False
    for char in pattern:
        if escaped:
            if char not in "_%\\":
                raise bad_escape
            out.append(re.escape(char))
            escaped = False
        elif char == "\\":
            escaped = True
        elif char == "%":
            out.append(".*")
        elif char == "_":
            out.append(".")
        else:
            out.append(re.escape(char))
    if escaped:
        raise bad_escape
    # \Z, not $: '$' also matches before a trailing newline ('a\n' LIKE 'a' is false).
    return re.compile("".join(out) + r"\Z", re.DOTALL)


def _substring_sql(text: str, pos: int, length: int) -> str:
    """Spark's UTF8String.substringSQL over code points."""
    size = len(text)
    start = pos - 1 if pos > 0 else (size + pos if pos < 0 else 0)
    end = start + length
    start = max(start, 0)
    if start >= end:
        return ""
    return text[start:end]


def _initcap(text: str) -> str:
    """Spark's initcap: each word (split at ' ') gets its first character title-cased (full
    mapping: 'ß' -> 'Ss') and the rest lower-cased."""
    out = []
    previous = " "
    for char in text:
        out.append(char.title() if previous == " " else char.lower())
        previous = char
    return "".join(out)


_JAVA_ONLY = re.compile(r"\\[pPQEGZRhHXvVk]|[*+?}]\+|\(\?<[A-Za-z]|\\0\d|\[\[|&&")


def _java_regex(pattern: str, error: ExpressionError) -> re.Pattern[str]:
    """A Java regex whose meaning Python's ``re`` shares; other syntax is refused."""
    if _JAVA_ONLY.search(pattern):
        raise ExpressionError(f"regular expression {pattern!r} uses Java-only syntax",
                              error.offset, hint="use the common syntax: classes [..], \\d \\w \\s, "
                              "groups (..), quantifiers * + ? {n,m}, anchors ^ $")
    try:
        return re.compile(pattern)
    except re.error as exc:
        raise ExpressionError(f"regular expression {pattern!r}: {exc}", error.offset,
                              hint="fix the regular expression") from None


def _java_replacement(text: str, regex: re.Pattern[str], error: ExpressionError) -> Callable[[re.Match[str]], str]:
    """Java's Matcher replacement: $n is a group, \\x is x."""
    pieces: list[str | int] = []
    i = 0
    literal = []
    while i < len(text):
        char = text[i]
        if char == "\\":
            if i + 1 >= len(text):
                raise ExpressionError("replacement ends with a lone backslash", error.offset)
            literal.append(text[i + 1])
            i += 2
        elif char == "$":
            j = i + 1
            if j >= len(text) or not text[j].isdigit():
                raise ExpressionError("'$' in a replacement must be followed by a group number "
                                      "(write \\$ for a dollar sign)", error.offset)
            number = int(text[j])
            j += 1
            while j < len(text) and text[j].isdigit() and int(text[i + 1:j + 1]) <= regex.groups:
                number = int(text[i + 1:j + 1])
                j += 1
            if number > regex.groups:
                raise ExpressionError(f"replacement refers to group {number}; the pattern has "
                                      f"{regex.groups}", error.offset)
            if literal:
                pieces.append("".join(literal))
                literal = []
            pieces.append(number)
            i = j
        else:
            literal.append(char)
            i += 1
    if literal:
        pieces.append("".join(literal))

    def replace(match: re.Match[str]) -> str:
        return "".join(p if isinstance(p, str) else (match.group(p) or "") for p in pieces)

    return replace


def _trunc_week(v: dt.datetime) -> dt.datetime:
    day = v - dt.timedelta(days=v.weekday())
    return day.replace(hour=0, minute=0, second=0, microsecond=0)


_TRUNCATIONS: dict[str, Callable[[dt.datetime], dt.datetime]] = {
    **dict.fromkeys(("YEAR", "YYYY", "YY"), lambda v: v.replace(month=1, day=1, hour=0, minute=0, second=0, microsecond=0)),
    "QUARTER": lambda v: v.replace(month=(v.month - 1) // 3 * 3 + 1, day=1, hour=0, minute=0, second=0, microsecond=0),
    **dict.fromkeys(("MONTH", "MM", "MON"), lambda v: v.replace(day=1, hour=0, minute=0, second=0, microsecond=0)),
    "WEEK": _trunc_week,
    **dict.fromkeys(("DAY", "DD"), lambda v: v.replace(hour=0, minute=0, second=0, microsecond=0)),
    "HOUR": lambda v: v.replace(minute=0, second=0, microsecond=0),
    "MINUTE": lambda v: v.replace(second=0, microsecond=0),
    "SECOND": lambda v: v.replace(microsecond=0),
    "MILLISECOND": lambda v: v.replace(microsecond=v.microsecond // 1000 * 1000),
    "MICROSECOND": lambda v: v,
}

_MONTHS = ["January", "February", "March", "April", "May", "June", "July", "August", "September",
           "October", "November", "December"]
_DAYS = ["Monday", "Tuesday", "Wednesday", "Thursday", "Friday", "Saturday", "Sunday"]


def _date_formatter(pattern: str) -> Callable[[dt.datetime], str]:
    """Spark's datetime pattern (a subset) -> a formatting function."""
    parts: list[Callable[[dt.datetime], str]] = []
    i = 0
    while i < len(pattern):
        char = pattern[i]
        if char == "'":
            end = pattern.find("'", i + 1)
            if end < 0:
                raise ValueError("unterminated quote in the date pattern")
            text = pattern[i + 1:end] or "'"
            parts.append(lambda v, t=text: t)
            i = end + 1
            continue
        if not char.isalpha():
            parts.append(lambda v, t=char: t)
            i += 1
            continue
        j = i
        while j < len(pattern) and pattern[j] == char:
            j += 1
        count = j - i
        parts.append(_date_field(char, count))
        i = j
    return lambda v: "".join(part(v) for part in parts)


def _date_field(char: str, count: int) -> Callable[[dt.datetime], str]:
    def number(get: Callable[[dt.datetime], int], width_max: int) -> Callable[[dt.datetime], str]:
        if count > width_max:
            raise ValueError(f"too many pattern letters: {char * count}")
        return lambda v: f"{get(v):0{count}d}"

    if char == "y":
        if count == 2:
            return lambda v: f"{v.year % 100:02d}"
        return lambda v: f"{v.year:0{count}d}"
    if char == "M":
        if count == 3:
            return lambda v: _MONTHS[v.month - 1][:3]
        if count == 4:
            return lambda v: _MONTHS[v.month - 1]
        return number(lambda v: v.month, 2)
    if char == "d":
        return number(lambda v: v.day, 2)
    if char == "H":
        return number(lambda v: v.hour, 2)
    if char == "h":
        return number(lambda v: v.hour % 12 or 12, 2)
    if char == "m":
        return number(lambda v: v.minute, 2)
    if char == "s":
        return number(lambda v: v.second, 2)
    if char == "S":
        if count > 6:
            raise ValueError("at most 6 fraction digits (SSSSSS)")
        return lambda v: f"{v.microsecond:06d}"[:count]
    if char == "E":
        if count <= 3:
            return lambda v: _DAYS[v.weekday()][:3]
        if count == 4:
            return lambda v: _DAYS[v.weekday()]
        raise ValueError(f"too many pattern letters: {char * count}")
    if char == "a":
        if count > 1:
            raise ValueError("too many pattern letters: " + char * count)
        return lambda v: "AM" if v.hour < 12 else "PM"
    raise ValueError(f"date pattern letter {char!r} is not supported")


def compile_for_columns(text: str, columns: Iterable[tuple[str, SparkType]]) -> Compiled:
    return compile_expression(text, dict(columns))


__all__ = [
    "ANY",
    "BIGINT",
    "BINARY",
    "BOOLEAN",
    "DATE",
    "DOUBLE",
    "INT",
    "NULL",
    "ROUND_DOWN",
    "STRING",
    "TIMESTAMP",
    "Compiled",
    "EvaluationError",
    "ExpressionError",
    "SparkType",
    "check_expression",
    "compile_expression",
    "decimal",
    "parse",
    "referenced_columns",
    "spark_type_of",
    "spark_value",
]
