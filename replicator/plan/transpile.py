"""Spark SQL -> DuckDB SQL: filters and computed columns as the transform step runs them.

The user writes Spark SQL (one dialect for ``filter:`` and ``expression:``); ``plan.expressions``
parses and type-checks it (Spark 4's analyzer types, ANSI mode). This module writes the same
expression as a DuckDB expression that gives Spark's value in Spark's type on every row, so the
transform step (``transform.stage``) evaluates it vectorized inside its one statement:

- every node is CAST to the DuckDB type of its Spark type (decimal results keep Spark's
  precision and scale; Spark's HALF_UP rounding is DuckDB's half-away-from-zero);
- where Spark (ANSI) fails and DuckDB would not, the SQL calls ``error('[ERROR_CLASS] ...')``
  in the branch Spark fails in (division by zero, invalid casts); DuckDB raises on integer
  and decimal overflow by itself;
- a construct with no exact DuckDB form raises ``Untranslatable``: ``validate`` and ``plan``
  refuse it (R241), so what runs is what the differential test
  (tests/integration/test_transforms_spark_differential.py) proves equal to Spark.

Literals the user wrote are part of the expression and rendered as SQL literals; row values
never enter SQL text.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from decimal import Decimal
from typing import Any

from replicator.errors import PlanError
from replicator.plan.expressions.casts import parse_date, parse_timestamp
from replicator.plan.expressions.compiler import Compiler
from replicator.plan.expressions.errors import SUPPORTED_HINT, ExpressionError
from replicator.plan.expressions.parsing import node_offset, parse
from replicator.plan.expressions.spark_types import (
    DATE,
    DOUBLE,
    INT,
    NULL,
    TIMESTAMP,
    SparkType,
    as_decimal_type,
    wider_type,
)
from replicator.plan.identifiers import quote_identifier as q


class Untranslatable(PlanError):
    """A supported-looking construct with no exact DuckDB form; ``offset`` as ExpressionError."""

    def __init__(self, message: str, offset: int = 0) -> None:
        super().__init__(message, hint=SUPPORTED_HINT)
        self.offset = offset


def duck_type(spark_type: SparkType) -> str:
    kind = spark_type.kind
    if kind == "decimal":
        return f"DECIMAL({spark_type.precision},{spark_type.scale})"
    return {"boolean": "BOOLEAN", "int": "INTEGER", "bigint": "BIGINT", "double": "DOUBLE",
            "string": "VARCHAR", "date": "DATE", "timestamp": "TIMESTAMP", "binary": "BLOB",
            "null": "INTEGER", "any": "VARCHAR"}[kind]


def _string_literal(text: str) -> str:
    return "'" + text.replace("'", "''") + "'"


def _fail_sql(error_class: str, message: str) -> str:
    return f"error({_string_literal(f'[{error_class}] {message}')})"


def literal_sql(value: Any, spark_type: SparkType) -> str:
    """A constant of the expression (written by the user, or folded from what they wrote)."""
    if value is None:
        return f"CAST(NULL AS {duck_type(spark_type)})"
    kind = spark_type.kind
    if kind == "boolean":
        return "TRUE" if value else "FALSE"
    if kind in ("int", "bigint"):
        return f"CAST({int(value)} AS {duck_type(spark_type)})"
    if kind == "decimal":
        return f"CAST({_string_literal(format(Decimal(value), 'f'))} AS {duck_type(spark_type)})"
    if kind == "double":
        return f"CAST({_string_literal(repr(float(value)))} AS DOUBLE)"
    if kind == "string":
        return _string_literal(value)
    if kind == "date":
        return f"CAST({_string_literal(value.isoformat())} AS DATE)"
    if kind == "timestamp":
        return f"CAST({_string_literal(value.isoformat(sep=' '))} AS TIMESTAMP)"
    if kind == "binary":
        return f"unhex({_string_literal(bytes(value).hex())})"
    raise Untranslatable(f"no literal of type {spark_type}")


# -- implicit and explicit casts ------------------------------------------------------------

# Spark's UTF8String.trimAll(), which casts to int, boolean and dates use: it tests each BYTE
# for Java whitespace or ISO control, so only ASCII ones (0x00-0x20, DEL) go; a character
# beyond ASCII (U+0085, U+00A0, U+3000) is kept and the cast fails (measured on Spark 4).
_WS_CLASS = "[\\x00-\\x20\\x7f]"


def _trim_all(sql: str) -> str:
    return f"regexp_replace({sql}, '^{_WS_CLASS}+|{_WS_CLASS}+$', '', 'g')"


def _timestamp_text(sql: str) -> str:
    # Spark prints the fraction without trailing zeros, and none when it is zero.
    return f"regexp_replace(strftime({sql}, '%Y-%m-%d %H:%M:%S.%f'), '\\.?0+$', '')"


def to_string_sql(sql: str, source: SparkType) -> str:
    kind = source.kind
    if kind in ("string", "any"):
        return sql
    if kind == "boolean":
        return f"CASE WHEN {sql} THEN 'true' WHEN NOT {sql} THEN 'false' END"
    if kind in ("int", "bigint", "decimal"):
        return f"CAST({sql} AS VARCHAR)"
    if kind == "date":
        return f"strftime({sql}, '%Y-%m-%d')"
    if kind == "timestamp":
        return f"CASE WHEN {sql} IS NOT NULL THEN regexp_replace({_timestamp_text(sql)}, ':(\\d\\d)$', ':\\1') END"
    if kind == "null":
        return "CAST(NULL AS VARCHAR)"
    raise Untranslatable(f"CAST of {source} to string")


def cast_sql(sql: str, source: SparkType, target: SparkType, *, safe: bool = False) -> str:
    """``sql`` (of Spark type ``source``) as ``target``: Spark's ANSI CAST (``safe``: try_cast,
    NULL where CAST fails)."""
    s, t = source.kind, target.kind
    if source == target or s == "any":
        return sql  # every node is already in the DuckDB form of its Spark type
    if s == "null":
        return f"CAST({sql} AS {duck_type(target)})"

    def guarded(condition: str, value: str, error_class: str, what: str) -> str:
        failure = "NULL" if safe else _fail_sql(error_class, what)
        return f"CASE WHEN {sql} IS NULL THEN NULL WHEN {condition} THEN {value} ELSE {failure} END"

    if t == "string":
        return to_string_sql(sql, source)
    if t in ("int", "bigint"):
        low, high = ("-2147483648", "2147483647") if t == "int" else ("-9223372036854775808", "9223372036854775807")
        if s == "boolean":
            return f"CAST({sql} AS {duck_type(target)})"
        if s == "string":
            text = _trim_all(sql)
            return guarded(f"regexp_matches({text}, '^[+-]?[0-9]+$') AND "
                           f"TRY_CAST({text} AS HUGEINT) BETWEEN {low} AND {high}",
                           f"CAST({text} AS {duck_type(target)})", "CAST_INVALID_INPUT",
                           f"a STRING value cannot be cast to {t.upper()} because it is malformed")
        if s == "double":
            return guarded(f"NOT isnan({sql}) AND NOT isinf({sql}) AND trunc({sql}) BETWEEN {low} AND {high}",
                           f"CAST(trunc({sql}) AS {duck_type(target)})", "CAST_OVERFLOW",
                           f"a DOUBLE value cannot be cast to {t.upper()} due to an overflow")
        if s == "decimal":
            return guarded(f"trunc({sql}) BETWEEN {low} AND {high}",
                           f"CAST(trunc({sql}) AS {duck_type(target)})", "CAST_OVERFLOW",
                           f"a DECIMAL value cannot be cast to {t.upper()} due to an overflow")
        if s in ("int", "bigint"):
            return guarded(f"{sql} BETWEEN {low} AND {high}", f"CAST({sql} AS {duck_type(target)})",
                           "CAST_OVERFLOW", f"the value cannot be cast to {t.upper()} due to an overflow")
    if t == "decimal":
        p, sc = target.precision, target.scale
        bound = f"1e{p - sc}"
        if s in ("int", "bigint", "decimal", "boolean"):
            value = f"CAST({sql} AS DECIMAL(38,{sc}))" if s != "decimal" else f"round({sql}, {sc})"
            if s == "boolean":
                value = f"CAST(CAST({sql} AS INTEGER) AS DECIMAL(38,{sc}))"
            return guarded(f"abs({value}) < {bound}", f"CAST({value} AS {duck_type(target)})",
                           "NUMERIC_VALUE_OUT_OF_RANGE",
                           f"the value cannot be represented as Decimal({p}, {sc})")
        raise Untranslatable(f"CAST of {source} to {target}")
    if t == "double":
        if s in ("int", "bigint", "decimal", "boolean"):
            return f"CAST({sql} AS DOUBLE)"
        raise Untranslatable(f"CAST of {source} to double")
    if t == "boolean":
        if s == "string":
            text = f"lower({_trim_all(sql)})"
            failure = "NULL" if safe else _fail_sql("CAST_INVALID_INPUT", "a STRING value cannot be cast to BOOLEAN")
            return (f"CASE WHEN {sql} IS NULL THEN NULL WHEN {text} IN ('t', 'true', 'y', 'yes', '1') THEN TRUE "
                    f"WHEN {text} IN ('f', 'false', 'n', 'no', '0') THEN FALSE ELSE {failure} END")
        return f"({sql} <> 0)"
    if t == "date" and s == "timestamp":
        return f"CAST({sql} AS DATE)"
    if t == "timestamp" and s == "date":
        return f"CAST({sql} AS TIMESTAMP)"
    if t == "binary" and s == "string":
        return f"encode({sql})"
    raise Untranslatable(f"CAST of {source} to {target}")


# -- the translator ---------------------------------------------------------------------------

ColumnSql = Callable[[str], str]  # source column name -> its SQL, already in its Spark type


class _Translator:
    def __init__(self, columns: Mapping[str, SparkType], column_sql: ColumnSql) -> None:
        self.compiler = Compiler({name.lower(): (name, t) for name, t in columns.items()})
        self.columns = {name.lower(): name for name in columns}
        self.column_sql = column_sql

    def type(self, node: Any) -> SparkType:
        return self.compiler.compile(node).type

    def constant(self, node: Any) -> tuple[bool, Any]:
        compiled = self.compiler.compile(node)
        return compiled.constant, compiled.value

    def fail(self, node: Any, what: str) -> Untranslatable:
        return Untranslatable(f"{what} is not supported", node_offset(node))

    def sql(self, node: Any) -> str:
        """DuckDB SQL for ``node``, giving Spark's value in the DuckDB form of Spark's type."""
        from sqlglot import exp

        compiled = self.compiler.compile(node)  # type-checks the node (ExpressionError)
        if compiled.constant:
            return literal_sql(compiled.value, compiled.type)
        result = compiled.type
        if isinstance(node, exp.Paren):
            return self.sql(node.this)
        if isinstance(node, exp.Column):
            return self.column_sql(self.columns[node.name.lower()])
        if isinstance(node, exp.Neg):
            return f"CAST(-({self.sql(node.this)}) AS {duck_type(result)})"
        if isinstance(node, exp.Not):
            return f"(NOT {self.sql(node.this)})"
        if isinstance(node, exp.And):
            return f"({self.sql(node.this)} AND {self.sql(node.expression)})"
        if isinstance(node, exp.Or):
            return f"({self.sql(node.this)} OR {self.sql(node.expression)})"
        name = type(node).__name__
        if name in _COMPARISONS:
            return self.comparison(node, _COMPARISONS[name])
        if name in ("Add", "Sub", "Mul", "Div", "Mod", "IntDiv"):
            return self.arithmetic(node, name, result)
        if isinstance(node, exp.DPipe):
            return self.concat([node.this, node.expression])
        if isinstance(node, exp.Concat):
            return self.concat(node.expressions)
        if isinstance(node, exp.Is):
            target = node.expression
            if isinstance(target, exp.Null):
                return f"({self.sql(node.this)} IS NULL)"
            return f"({self.sql(node.this)} IS {'TRUE' if target.this else 'FALSE'})"
        if isinstance(node, exp.In):
            parts = [self.comparison(exp.EQ(this=node.this, expression=o), "=") for o in node.expressions]
            return "(" + " OR ".join(parts) + ")"
        if isinstance(node, exp.Between):
            low = exp.GTE(this=node.this, expression=node.args["low"])
            high = exp.LTE(this=node.this, expression=node.args["high"])
            return f"({self.sql(low)} AND {self.sql(high)})"
        if isinstance(node, exp.Like):
            pattern = node.expression.this
            if pattern.endswith("\\") and not pattern.endswith("\\\\"):
                raise self.fail(node, "a LIKE pattern ending in an escape")
            return f"({self.sql(node.this)} LIKE {_string_literal(pattern)} ESCAPE '\\')"
        if isinstance(node, exp.Case):
            subject = node.this
            branches = []
            for when in node.args.get("ifs") or []:
                condition = when.this if subject is None else exp.EQ(this=subject, expression=when.this)
                branches.append((condition, when.args.get("true")))
            return self.conditional(branches, node.args.get("default"), result)
        if isinstance(node, exp.If):
            return self.conditional([(node.this, node.args.get("true"))], node.args.get("false"), result)
        if isinstance(node, (exp.Cast, exp.TryCast)):
            safe = isinstance(node, exp.TryCast) and bool(node.args.get("safe"))
            return cast_sql(self.sql(node.this), self.type(node.this), result, safe=safe)
        if isinstance(node, exp.Trim):
            return self.trim(node)
        if isinstance(node, exp.Substring):
            args = [a for a in (node.this, node.args.get("start"), node.args.get("length")) if a is not None]
            return self.fn_substring(node, args, result)
        if isinstance(node, exp.Floor):
            return self.fn_floor(node, [node.this], result)
        if isinstance(node, exp.Ceil):
            return self.fn_ceil(node, [node.this], result)
        if isinstance(node, exp.Anonymous):
            handler = getattr(self, f"fn_{str(node.this).lower()}", None)
            if handler is None:
                raise self.fail(node, f"{str(node.this).lower()}()")
            return handler(node, list(node.expressions), result)
        if isinstance(node, exp.Func):
            raise self.fail(node, f"{node.sql_name().lower()}()")
        raise self.fail(node, repr(node.sql(dialect="spark")))

    def as_type(self, node: Any, target: SparkType) -> str:
        """``node`` implicitly cast to ``target`` (the compiler's coerce: ANSI CAST)."""
        return cast_sql(self.sql(node), self.type(node), target)

    def string_arg(self, node: Any) -> str:
        source = self.type(node)
        if source.kind == "binary":
            raise self.fail(node, "a BINARY argument")
        return cast_sql(self.sql(node), source, _spark("string"))

    def common(self, nodes: list[Any]) -> SparkType:
        result = NULL
        for node in nodes:
            result = wider_type(result, self.type(node), 0, "")
        return result

    def comparison(self, node: Any, op: str) -> str:
        left, right = node.this, node.expression
        lt, rt = self.type(left), self.type(right)
        if lt.kind in ("null", "any") or rt.kind in ("null", "any") or lt == rt:
            common = lt if lt.kind not in ("null", "any") else rt
        elif lt.numeric and rt.numeric:
            common = self.common([left, right])
        elif {lt.kind, rt.kind} == {"date", "timestamp"}:
            common = TIMESTAMP
        elif "string" in (lt.kind, rt.kind) and ({lt.kind, rt.kind} & {"date", "timestamp"}):
            common = TIMESTAMP if "timestamp" in (lt.kind, rt.kind) else DATE  # a literal, folded
        else:
            common = lt
        a, b = self.side(left, common), self.side(right, common)
        if op == "<=>":
            return f"({a} IS NOT DISTINCT FROM {b})"
        return f"({a} {op} {b})"

    def side(self, node: Any, common: SparkType) -> str:
        """One side of a comparison in the common type; a string literal compared with a date
        or timestamp is parsed at plan time, as the compiler does."""
        constant, value = self.constant(node)
        if constant and isinstance(value, str) and common.kind in ("date", "timestamp"):
            parse_ = parse_date if common.kind == "date" else parse_timestamp
            return literal_sql(parse_(value), common)
        return self.as_type(node, common)

    def arithmetic(self, node: Any, name: str, result: SparkType) -> str:
        left, right = node.this, node.expression
        lt, rt = self.type(left), self.type(right)
        if name == "IntDiv":
            a, b = self.as_type(left, result), self.as_type(right, result)
            return (f"CASE WHEN {a} IS NULL THEN NULL WHEN {b} = 0 THEN "
                    f"{_fail_sql('DIVIDE_BY_ZERO', 'Division by zero')} ELSE {a} // {b} END")
        if result.kind == "double":
            a, b = self.as_type(left, DOUBLE), self.as_type(right, DOUBLE)
        elif result.kind in ("int", "bigint"):
            a, b = self.as_type(left, result), self.as_type(right, result)
        else:  # decimal: DuckDB's exact decimal arithmetic, then Spark's precision and scale
            if name == "Div":
                return self.decimal_divide(node, result)
            a, b = self.sql(left), self.sql(right)
            for side, t in ((left, lt), (right, rt)):
                if t.kind != "decimal" and not t.integral:
                    raise self.fail(side, f"DECIMAL arithmetic with {t}")
            if name == "Mul" and _digits(lt) + _digits(rt) > 38:
                raise self.fail(node, "a DECIMAL product wider than 38 digits")
            a = f"CAST({a} AS DECIMAL({_digits(lt)},{_scale(lt)}))"
            b = f"CAST({b} AS DECIMAL({_digits(rt)},{_scale(rt)}))"
        op = {"Add": "+", "Sub": "-", "Mul": "*", "Div": "/", "Mod": "%"}[name]
        if name in ("Div", "Mod"):
            zero = _fail_sql("DIVIDE_BY_ZERO", "Division by zero") if name == "Div" or result.kind != "double" \
                else "CAST('nan' AS DOUBLE)"
            if name == "Mod" and result.kind == "double":
                zero = _fail_sql("DIVIDE_BY_ZERO", "Division by zero")
            if self.safe_division:
                zero = "NULL"
            minus_one = f"WHEN {b} = -1 THEN 0 " if name == "Mod" and result.integral else ""
            return (f"CAST(CASE WHEN {a} IS NULL THEN NULL WHEN {b} = 0 THEN {zero} {minus_one}ELSE {a} {op} {b} END "
                    f"AS {duck_type(result)})")
        return f"CAST({a} {op} {b} AS {duck_type(result)})"

    safe_division = False

    def decimal_divide(self, node: Any, result: SparkType) -> str:
        """Exact DECIMAL division (DuckDB would divide as DOUBLE): the unscaled integers in
        HUGEINT, rounded HALF_UP to Spark's result scale."""
        left, right = node.this, node.expression
        a_type = as_decimal_type(self.compiler.compile(left))
        b_type = as_decimal_type(self.compiler.compile(right))
        shift = result.scale + b_type.scale - a_type.scale
        if a_type.precision + max(shift, 0) > 38 or b_type.precision + max(-shift, 0) > 38:
            raise self.fail(node, "a DECIMAL division this wide")

        def unscaled(side: Any, t: SparkType) -> str:
            text = f"CAST(CAST({self.sql(side)} AS DECIMAL({t.precision},{t.scale})) AS VARCHAR)"
            return f"CAST(replace({text}, '.', '') AS HUGEINT)"

        numerator, denominator = unscaled(left, a_type), unscaled(right, b_type)
        if shift > 0:
            numerator = f"({numerator} * CAST('1{'0' * shift}' AS HUGEINT))"
        elif shift < 0:
            denominator = f"({denominator} * CAST('1{'0' * -shift}' AS HUGEINT))"
        quotient, remainder = f"({numerator} // {denominator})", f"({numerator} % {denominator})"
        rounded = (f"({quotient} + CASE WHEN abs({remainder}) >= abs({denominator}) - abs({remainder}) "
                   f"THEN sign({numerator}) * sign({denominator}) ELSE 0 END)")
        magnitude = f"CAST(abs({rounded}) AS VARCHAR)"
        # lpad also cuts a longer text: pad only up to one digit before the point.
        digits = f"lpad({magnitude}, CAST(greatest(length({magnitude}), {result.scale + 1}) AS INTEGER), '0')"
        if result.scale:
            digits = f"regexp_replace({digits}, '([0-9]{{{result.scale}}})$', '.\\1')"
        text = f"(CASE WHEN {rounded} < 0 THEN '-' ELSE '' END || {digits})"
        zero = "NULL" if self.safe_division else _fail_sql("DIVIDE_BY_ZERO", "Division by zero")
        return (f"CASE WHEN {numerator} IS NULL THEN NULL WHEN {denominator} = 0 THEN {zero} "
                f"ELSE CAST({text} AS {duck_type(result)}) END")

    def concat(self, nodes: list[Any]) -> str:
        return "(" + " || ".join(self.string_arg(n) for n in nodes) + ")"

    def conditional(self, branches: list[tuple[Any, Any]], default: Any, result: SparkType) -> str:
        parts = [f"WHEN {self.sql(cond)} THEN {self.as_type(value, result)}" for cond, value in branches]
        otherwise = self.as_type(default, result) if default is not None else "NULL"
        return f"CAST(CASE {' '.join(parts)} ELSE {otherwise} END AS {duck_type(result)})"

    def trim(self, node: Any) -> str:
        chars = node.args.get("expression")
        position = (node.args.get("position") or "BOTH").upper()
        function = {"LEADING": "ltrim", "TRAILING": "rtrim"}.get(position, "trim")
        characters = self.string_arg(chars) if chars is not None else "' '"
        return f"{function}({self.string_arg(node.this)}, {characters})"

    # functions ------------------------------------------------------------------------------
    def fn_coalesce(self, node: Any, args: list[Any], result: SparkType) -> str:
        return f"coalesce({', '.join(self.as_type(a, result) for a in args)})"

    fn_nvl = fn_ifnull = fn_coalesce

    def fn_nullif(self, node: Any, args: list[Any], result: SparkType) -> str:
        from sqlglot import exp

        equal = self.comparison(exp.EQ(this=args[0], expression=args[1]), "=")
        return f"CASE WHEN {equal} THEN NULL ELSE {self.as_type(args[0], result)} END"

    def fn_nvl2(self, node: Any, args: list[Any], result: SparkType) -> str:
        return (f"CASE WHEN {self.sql(args[0])} IS NOT NULL THEN {self.as_type(args[1], result)} "
                f"ELSE {self.as_type(args[2], result)} END")

    def fn_concat(self, node: Any, args: list[Any], result: SparkType) -> str:
        return self.concat(args)

    def fn_concat_ws(self, node: Any, args: list[Any], result: SparkType) -> str:
        separator, rest = args[0], args[1:]
        if not rest:
            return f"CASE WHEN {self.string_arg(separator)} IS NOT NULL THEN '' END"
        return f"concat_ws({', '.join(self.string_arg(a) for a in args)})"

    def fn_upper(self, node: Any, args: list[Any], result: SparkType) -> str:
        return _upper(self.string_arg(args[0]))

    def fn_lower(self, node: Any, args: list[Any], result: SparkType) -> str:
        return _lower(self.string_arg(args[0]))

    fn_ucase, fn_lcase = fn_upper, fn_lower

    def fn_ltrim(self, node: Any, args: list[Any], result: SparkType) -> str:
        return f"ltrim({self.string_arg(args[0])}, ' ')"

    def fn_rtrim(self, node: Any, args: list[Any], result: SparkType) -> str:
        return f"rtrim({self.string_arg(args[0])}, ' ')"

    def fn_trim(self, node: Any, args: list[Any], result: SparkType) -> str:
        return f"trim({self.string_arg(args[0])}, ' ')"

    def fn_length(self, node: Any, args: list[Any], result: SparkType) -> str:
        if self.type(args[0]).kind == "binary":
            return f"CAST(octet_length({self.sql(args[0])}) AS INTEGER)"
        return f"CAST(length({self.string_arg(args[0])}) AS INTEGER)"

    fn_char_length = fn_character_length = fn_length

    def fn_substring(self, node: Any, args: list[Any], result: SparkType) -> str:
        if self.type(args[0]).kind == "binary":
            raise self.fail(node, "substring() of BINARY")
        text = self.string_arg(args[0])
        pos = self.integer_arg(args[1])
        length = self.integer_arg(args[2]) if len(args) > 2 else "2147483647"
        # Spark's UTF8String.substringSQL over code points.
        size = f"length({text})"
        start = f"(CASE WHEN {pos} > 0 THEN {pos} - 1 WHEN {pos} < 0 THEN {size} + {pos} ELSE 0 END)"
        end = f"(CAST({start} AS BIGINT) + {length})"
        first = f"greatest({start}, 0)"
        return (f"CASE WHEN {text} IS NULL OR {pos} IS NULL OR {length} IS NULL THEN NULL "
                f"WHEN {first} >= {end} THEN '' ELSE substring({text}, {first} + 1, "
                f"least({end}, {size}) - {first}) END")

    fn_substr = fn_substring

    def integer_arg(self, node: Any) -> str:
        return self.as_type(node, INT)

    def fn_left(self, node: Any, args: list[Any], result: SparkType) -> str:
        text, count = self.string_arg(args[0]), self.integer_arg(args[1])
        return (f"CASE WHEN {text} IS NULL OR {count} IS NULL THEN NULL WHEN {count} <= 0 THEN '' "
                f"ELSE left({text}, {count}) END")

    def fn_right(self, node: Any, args: list[Any], result: SparkType) -> str:
        text, count = self.string_arg(args[0]), self.integer_arg(args[1])
        return (f"CASE WHEN {text} IS NULL OR {count} IS NULL THEN NULL WHEN {count} <= 0 THEN '' "
                f"ELSE right({text}, {count}) END")

    def fn_replace(self, node: Any, args: list[Any], result: SparkType) -> str:
        text, search = self.string_arg(args[0]), self.string_arg(args[1])
        replacement = self.string_arg(args[2]) if len(args) > 2 else "''"
        return f"replace({text}, {search}, {replacement})"

    def fn_regexp_replace(self, node: Any, args: list[Any], result: SparkType) -> str:
        constant, pattern = self.constant(args[1])
        constant2, replacement = self.constant(args[2]) if len(args) > 2 else (True, "")
        if len(args) != 3 or not (constant and constant2) or pattern is None or replacement is None:
            raise self.fail(node, "regexp_replace() with a non-literal pattern or replacement")
        if re.search(r"\\[dDwWsSbB]|\(\?|\\[0-9]", pattern) or "\\" in replacement:
            raise self.fail(node, "this regexp_replace() pattern (Java and RE2 regexes differ here)")
        if "$" in replacement.replace("$$", "") and not re.fullmatch(r"([^$]|\$\d)*", replacement):
            raise self.fail(node, "a replacement with '$' that is no group reference")
        groups = re.sub(r"\$(\d)", r"\\\1", replacement)
        return f"regexp_replace({self.string_arg(args[0])}, {_string_literal(pattern)}, {_string_literal(groups)}, 'g')"

    def _pad(self, function: str, args: list[Any]) -> str:
        text, size = self.string_arg(args[0]), self.integer_arg(args[1])
        pad = self.string_arg(args[2]) if len(args) > 2 else "' '"
        return (f"CASE WHEN {text} IS NULL OR {size} IS NULL OR {pad} IS NULL THEN NULL "
                f"WHEN {size} <= 0 THEN '' WHEN {pad} = '' THEN left({text}, {size}) "
                f"ELSE {function}({text}, {size}, {pad}) END")

    def fn_lpad(self, node: Any, args: list[Any], result: SparkType) -> str:
        return self._pad("lpad", args)

    def fn_rpad(self, node: Any, args: list[Any], result: SparkType) -> str:
        return self._pad("rpad", args)

    def _round(self, node: Any, args: list[Any], result: SparkType, function: str) -> str:
        source = self.type(args[0])
        places = int(self.constant(args[1])[1]) if len(args) > 1 else 0
        if source.kind == "double" or (source.integral and places < 0):
            raise self.fail(node, f"{function}() of {source}")
        if source.integral:
            return self.sql(args[0])
        value = f"{'round' if function == 'round' else 'round_even'}({self.sql(args[0])}, {places})"
        return f"CAST({value} AS {duck_type(result)})"

    def fn_round(self, node: Any, args: list[Any], result: SparkType) -> str:
        return self._round(node, args, result, "round")

    def fn_bround(self, node: Any, args: list[Any], result: SparkType) -> str:
        return self._round(node, args, result, "bround")

    def fn_floor(self, node: Any, args: list[Any], result: SparkType) -> str:
        return self._integral(node, args, result, "floor")

    def fn_ceil(self, node: Any, args: list[Any], result: SparkType) -> str:
        return self._integral(node, args, result, "ceil")

    fn_ceiling = fn_ceil

    def _integral(self, node: Any, args: list[Any], result: SparkType, function: str) -> str:
        source = self.type(args[0])
        if source.kind == "double":
            value = self.sql(args[0])
            failure = _fail_sql("ARITHMETIC_OVERFLOW", "overflow")
            return (f"CASE WHEN {value} IS NULL THEN NULL WHEN isnan({value}) OR isinf({value}) OR "
                    f"{function}({value}) NOT BETWEEN -9223372036854775808 AND 9223372036854775807 "
                    f"THEN {failure} ELSE CAST({function}({value}) AS BIGINT) END")
        if source.integral:
            return f"CAST({self.sql(args[0])} AS BIGINT)"
        return f"CAST({function}({self.sql(args[0])}) AS {duck_type(result)})"

    def fn_abs(self, node: Any, args: list[Any], result: SparkType) -> str:
        return f"CAST(abs({self.as_type(args[0], result)}) AS {duck_type(result)})"

    def fn_mod(self, node: Any, args: list[Any], result: SparkType) -> str:
        from sqlglot import exp

        return self.arithmetic(exp.Mod(this=args[0], expression=args[1]), "Mod", result)

    def fn_pmod(self, node: Any, args: list[Any], result: SparkType) -> str:
        remainder = self.fn_mod(node, args, result)
        divisor = self.as_type(args[1], result)
        return (f"CAST(CASE WHEN {remainder} < 0 AND {divisor} > 0 THEN {remainder} + {divisor} "
                f"ELSE {remainder} END AS {duck_type(result)})")

    def fn_try_divide(self, node: Any, args: list[Any], result: SparkType) -> str:
        from sqlglot import exp

        self.safe_division = True
        try:
            return self.arithmetic(exp.Div(this=args[0], expression=args[1]), "Div", result)
        finally:
            self.safe_division = False

    def fn_greatest(self, node: Any, args: list[Any], result: SparkType) -> str:
        return f"greatest({', '.join(self.as_type(a, result) for a in args)})"

    def fn_least(self, node: Any, args: list[Any], result: SparkType) -> str:
        return f"least({', '.join(self.as_type(a, result) for a in args)})"

    def _date_part(self, node: Any, args: list[Any], part: str) -> str:
        source = self.type(args[0])
        if source.kind not in ("date", "timestamp"):
            raise self.fail(node, f"{part}() of {source}")
        value = self.sql(args[0]) if part in ("year", "month", "day", "quarter") else self.as_type(args[0], TIMESTAMP)
        return f"CAST({part}({value}) AS INTEGER)"

    def fn_year(self, node: Any, args: list[Any], result: SparkType) -> str:
        return self._date_part(node, args, "year")

    def fn_month(self, node: Any, args: list[Any], result: SparkType) -> str:
        return self._date_part(node, args, "month")

    def fn_day(self, node: Any, args: list[Any], result: SparkType) -> str:
        return self._date_part(node, args, "day")

    fn_dayofmonth = fn_day

    def fn_quarter(self, node: Any, args: list[Any], result: SparkType) -> str:
        return self._date_part(node, args, "quarter")

    def fn_hour(self, node: Any, args: list[Any], result: SparkType) -> str:
        return self._date_part(node, args, "hour")

    def fn_minute(self, node: Any, args: list[Any], result: SparkType) -> str:
        return self._date_part(node, args, "minute")

    def fn_second(self, node: Any, args: list[Any], result: SparkType) -> str:
        return self._date_part(node, args, "second")

    def _as_date(self, node: Any) -> str:
        source = self.type(node)
        if source.kind == "timestamp":
            return f"CAST({self.sql(node)} AS DATE)"
        if source.kind == "date":
            return self.sql(node)
        raise self.fail(node, f"a {source} where a date is expected")

    def fn_to_date(self, node: Any, args: list[Any], result: SparkType) -> str:
        if len(args) != 1:
            raise self.fail(node, "to_date() with a format")
        return self._as_date(args[0])

    def fn_datediff(self, node: Any, args: list[Any], result: SparkType) -> str:
        return f"CAST({self._as_date(args[0])} - {self._as_date(args[1])} AS INTEGER)"

    def fn_date_add(self, node: Any, args: list[Any], result: SparkType) -> str:
        return f"CAST({self._as_date(args[0])} + {self.integer_arg(args[1])} AS DATE)"

    def fn_date_sub(self, node: Any, args: list[Any], result: SparkType) -> str:
        return f"CAST({self._as_date(args[0])} - {self.integer_arg(args[1])} AS DATE)"

    def fn_date_trunc(self, node: Any, args: list[Any], result: SparkType) -> str:
        constant, unit = self.constant(args[0])
        units = {"year": "year", "yyyy": "year", "yy": "year", "quarter": "quarter", "month": "month",
                 "mon": "month", "mm": "month", "week": "week", "day": "day", "dd": "day",
                 "hour": "hour", "minute": "minute", "second": "second",
                 "millisecond": "millisecond", "microsecond": "microsecond"}
        if not constant or not isinstance(unit, str) or unit.lower() not in units:
            raise self.fail(node, "date_trunc() with this unit")
        return f"date_trunc('{units[unit.lower()]}', {self.as_type(args[1], TIMESTAMP)})"

    def fn_date_format(self, node: Any, args: list[Any], result: SparkType) -> str:
        constant, pattern = self.constant(args[1])
        if not constant or not isinstance(pattern, str):
            raise self.fail(node, "date_format() with a non-literal pattern")
        return f"strftime({self.as_type(args[0], TIMESTAMP)}, {_string_literal(_strftime(pattern, node, self))})"

    def fn_sha2(self, node: Any, args: list[Any], result: SparkType) -> str:
        constant, bits = self.constant(args[1])
        if not constant or bits not in (256, 0):
            raise self.fail(node, "sha2() other than sha2(x, 256)")
        return f"sha256({self.binary_arg(args[0])})"

    def binary_arg(self, node: Any) -> str:
        if self.type(node).kind == "binary":
            return self.sql(node)
        return f"encode({self.string_arg(node)})"

    def fn_md5(self, node: Any, args: list[Any], result: SparkType) -> str:
        return f"md5({self.binary_arg(args[0])})"

    def fn_sha1(self, node: Any, args: list[Any], result: SparkType) -> str:
        return f"sha1({self.binary_arg(args[0])})"

    fn_sha = fn_sha1


def _special_upper() -> dict[str, str]:
    """Characters whose upper case is not one character (Java and Python: 'ß' -> 'SS');
    DuckDB maps them one to one. 102 characters in Unicode 15, all in U+00DF..U+FB17 (the
    scan is kept to that range: the whole of Unicode takes seconds on a busy machine)."""
    global _SPECIAL_UPPER
    if _SPECIAL_UPPER is None:
        _SPECIAL_UPPER = {chr(c): chr(c).upper() for c in range(0x00DF, 0xFB18)
                          if not 0xD800 <= c <= 0xDFFF and len(chr(c).upper()) > 1}
    return _SPECIAL_UPPER


_SPECIAL_UPPER: dict[str, str] | None = None


def _upper(sql: str) -> str:
    specials = _special_upper()
    replaced = sql
    for char, upper in specials.items():
        replaced = f"replace({replaced}, {_string_literal(char)}, {_string_literal(upper)})"
    pattern = "[" + "".join(specials) + "]"
    return (f"CASE WHEN regexp_matches({sql}, {_string_literal(pattern)}) THEN upper({replaced}) "
            f"ELSE upper({sql}) END")


def _lower(sql: str) -> str:
    # Java and Python: 'İ' -> 'i̇' (two characters), and a final capital sigma -> 'ς'.
    sigma = f"regexp_replace({sql}, '(\\pL\\pM*)Σ(\\PL|$)', '\\1ς\\2', 'g')"
    return (f"CASE WHEN regexp_matches({sql}, '[İΣ]') THEN lower(replace({sigma}, 'İ', 'i̇')) "
            f"ELSE lower({sql}) END")


def _spark(kind: str) -> SparkType:
    return SparkType(kind)


def _digits(t: SparkType) -> int:
    return t.precision if t.kind == "decimal" else (10 if t.kind == "int" else 20)


def _scale(t: SparkType) -> int:
    return t.scale if t.kind == "decimal" else 0


_COMPARISONS = {"EQ": "=", "NEQ": "<>", "GT": ">", "GTE": ">=", "LT": "<", "LTE": "<=",
                "NullSafeEQ": "<=>"}

# Java DateTimeFormatter letters (as Spark's date_format reads them) -> strftime.
_DATE_FIELDS = {"yyyy": "%Y", "yy": "%y", "MMMM": "%B", "MMM": "%b", "MM": "%m", "dd": "%d",
                "HH": "%H", "hh": "%I", "mm": "%M", "ss": "%S", "SSS": "%g", "SSSSSS": "%f",
                "EEEE": "%A", "EEE": "%a", "E": "%a", "a": "%p", "D": "%-j", "d": "%-d",
                "M": "%-m", "H": "%-H", "h": "%-I", "m": "%-M", "s": "%-S"}


def _strftime(pattern: str, node: Any, translator: _Translator) -> str:
    out = []
    index = 0
    while index < len(pattern):
        char = pattern[index]
        if char == "'":
            end = pattern.find("'", index + 1)
            if end < 0:
                raise translator.fail(node, "an unclosed quote in a date_format() pattern")
            literal = pattern[index + 1:end] or "'"
            out.append(literal.replace("%", "%%"))
            index = end + 1
            continue
        if char.isalpha():
            run = len(pattern) - index - len(pattern[index:].lstrip(char))
            token = char * run
            if token not in _DATE_FIELDS:
                raise translator.fail(node, f"date_format() letter {token!r}")
            out.append(_DATE_FIELDS[token])
            index += run
            continue
        out.append("%%" if char == "%" else char)
        index += 1
    return "".join(out)


# -- what the transform step calls ------------------------------------------------------------

def translate(text: str, inputs: Mapping[str, SparkType], kinds: Mapping[str, str] | None = None,
              mysql_types: Mapping[str, str | None] | None = None) -> tuple[str, SparkType]:
    """``text`` (Spark SQL over source columns of these Spark types) as DuckDB SQL over the
    batch's columns of the same names, and its Spark result type."""
    kinds = kinds or {}
    mysql_types = mysql_types or {}

    def column_sql(name: str) -> str:
        spark_type = inputs[name]
        value = q(name)
        kind = kinds.get(name, "string")
        if mysql_types.get(name) == "time":
            return (f"CASE WHEN regexp_matches({value}, '\\.0*$') THEN regexp_replace({value}, '\\.0*$', '') "
                    f"WHEN {value} LIKE '%.%' THEN rpad({value}, strpos({value}, '.') + 6, '0') ELSE {value} END")
        if spark_type.kind == "binary" and kind in ("int", "uint"):
            raise Untranslatable(f"column {name}: BIT values read as BINARY")
        if spark_type.kind in ("int", "bigint", "decimal") and kind == "bool":
            return f"CAST(CAST({value} AS INTEGER) AS {duck_type(spark_type)})"
        return f"CAST({value} AS {duck_type(spark_type)})"

    translator = _Translator(inputs, column_sql)
    tree = parse(text)
    return translator.sql(tree), translator.type(tree)


def result_type(text: str, inputs: Mapping[str, SparkType]) -> SparkType:
    """The Spark type of ``text``'s value."""
    return _Translator(inputs, q).type(parse(text))




def describe_transforms(table: Any) -> list[str]:
    """``replicator plan``'s view of a table's transforms: each filter and computed column as
    the transform step runs it (the DuckDB SQL), and each mask; never a salt."""
    lines = []

    def translated(text: str, inputs: Mapping[str, SparkType]) -> str:
        try:
            return translate(text, inputs)[0]
        except (Untranslatable, ExpressionError) as exc:  # plan refuses these; offline: a note
            return f"(not translatable: {exc.message})"

    if table.filter:
        lines += [f"filter: {table.filter}", f"  -> {translated(table.filter, dict(table.filter_inputs))}"]
    for column in table.data_columns:
        if column.expression is not None:
            lines += [f"{column.target_column} = {column.expression}",
                      f"  -> {translated(column.expression, dict(column.expression_inputs))}"]
        if column.mask is not None:
            detail = {"sha256": "sha256 of the value's text" + (" (salted: the salt is a bind "
                                                                 "parameter, never printed)"
                                                                 if column.mask_salt else ""),
                      "md5": "md5 of the value's text", "null": "NULL",
                      "redact": f"redact, keeping the last {column.mask_keep_last}"
                      if column.mask_keep_last else "redact ('***')",
                      "truncate": f"the first {column.mask_length} characters"}[column.mask]
            lines.append(f"{column.target_column}: mask {detail}")
    return lines
