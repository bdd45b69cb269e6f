"""Spark SQL -> Snowflake SQL: filters and computed columns as Snowflake runs them on the
external-stage path (``target.snowflake.stage``, ``plan.statements.stage_expressions``).

The same typed tree as the DuckDB translation (``plan.expressions``' checker gives every
node its Spark type), rendered for Snowflake so that every node gives Spark's value in the
Snowflake form of Spark's type (int -> NUMBER(10,0), bigint -> NUMBER(19,0), decimal(p,s) ->
NUMBER(p,s), double -> FLOAT, timestamp -> TIMESTAMP_NTZ in UTC), on real Snowflake as on
fakesnow (DuckDB underneath), without relying on where the two differ
(docs/snowflake.md, "Spark SQL in Snowflake"). The dispatch and the rules both dialects share
are ``base``'s; this module is the Snowflake dialect's data, hooks and functions; the types,
literals, failures and casts are ``snowflake_casts``':

- Snowflake's NUMBER does not overflow at 32 or 64 bits: an int or bigint result is
  range-checked and fails as Spark's ANSI mode does;
- a division or remainder by zero is checked before dividing (Snowflake fails, fakesnow
  returns inf or NULL); decimal division and ``div`` are refused (Snowflake's quotient
  scale is not Spark's, fakesnow divides decimals as DOUBLE);
- a failure is ``CAST('[ERROR_CLASS] message: ' || value AS <type>)`` in the failing branch:
  Snowflake has no ``error()``; the cast of that text fails on both engines, names Spark's
  error class, and reads the row's value, so no engine can fold it in a branch not taken;
- string literals are written with Snowflake's escapes (a backslash doubled);
- what differs between the engines and has no form avoiding it is refused (``Untranslatable``):
  upper/lower (Snowflake maps 'ß' to 'SS' as Java does, DuckDB to 'ẞ'), greatest/least and
  concat_ws (Snowflake returns NULL for any NULL argument), lpad/rpad (fakesnow cannot run
  them with a computed length, so the test could not prove them), regular expressions, date
  formatting, strings read as numbers, dates or booleans, binary values, timestamp text.

Nothing is folded here (as in the DuckDB translation). ``tests/integration/
test_transforms_snowflake_differential.py`` proves values, types and failures against Spark.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from replicator.plan.expressions.parsing import parse
from replicator.plan.expressions.spark_types import DOUBLE, INT, SparkType
from replicator.plan.transpile.base import BaseTranslator, ColumnSql, decimal_scale
from replicator.plan.transpile.snowflake_casts import (
    INT_RANGE,
    cast_sql,
    fail_sql,
    in_range,
    literal_sql,
    snowflake_type,
    string_literal,
)


class SnowflakeTranslator(BaseTranslator):
    """Spark SQL nodes -> Snowflake SQL (the module's docstring); ``fn_<name>`` per function,
    those both dialects share ``BaseTranslator``'s."""

    sql_type = staticmethod(snowflake_type)
    literal = staticmethod(literal_sql)
    cast = staticmethod(cast_sql)
    quote = staticmethod(string_literal)
    refusal = "has no exact Snowflake SQL form"
    upper_case_functions = True
    negation = "(-{})"
    substring_function = "SUBSTR"

    def position_sum(self, start: str, length: str) -> str:
        return f"({start} + {length})"  # NUMBER(38,0): no overflow

    def exact(self, value: str, result: SparkType) -> str:
        """Snowflake's NUMBER does not overflow at 32 or 64 bits: an int or bigint is
        range-checked, failing as Spark's ANSI arithmetic does."""
        if result.kind in INT_RANGE:
            return in_range(value, result)
        return f"CAST({value} AS {snowflake_type(result)})"

    def is_truth(self, sql: str, truth: str) -> str:
        # Snowflake has no IS TRUE: the comparison, unknown read as FALSE.
        return f"COALESCE({sql} = {truth}, FALSE)"

    def like_operand(self, node: Any) -> str:
        return self.string_arg(node)

    def trim_operand(self, node: Any) -> str:
        """A trimmed text, cast to VARCHAR: a no-op in Snowflake; fakesnow 0.12.1 drops TRIM's
        characters unless its operand is such a cast."""
        return f"CAST({self.string_arg(node)} AS VARCHAR)"

    def count_arg(self, node: Any) -> str:
        """A position or length (Spark's int) as INTEGER: Snowflake's NUMBER(38,0), the same
        value; DuckDB (fakesnow) has no SUBSTR, LEFT or LPAD over a DECIMAL."""
        return f"CAST({self.as_type(node, INT)} AS INTEGER)"

    # -- operators -----------------------------------------------------------------------------
    def arithmetic(self, node: Any, name: str, result: SparkType) -> str:
        left, right = node.this, node.expression
        if result.kind == "decimal" and name == "Div":
            raise self.fail(node, "DECIMAL division")
        if result.kind == "double":
            a, b = self.as_type(left, DOUBLE), self.as_type(right, DOUBLE)
        elif result.kind in INT_RANGE:
            # In NUMBER(38,0): a bigint product fits, so the range check below sees every
            # overflow (DuckDB, under fakesnow, would fail first at 18 digits).
            a = f"CAST({self.as_type(left, result)} AS NUMBER(38,0))"
            b = f"CAST({self.as_type(right, result)} AS NUMBER(38,0))"
        elif result.kind == "decimal":
            lt, rt = self.type(left), self.type(right)
            for side, t in ((left, lt), (right, rt)):
                if t.kind != "decimal" and not t.integral:
                    raise self.fail(side, f"DECIMAL arithmetic with {t}")
            scales = decimal_scale(lt), decimal_scale(rt)
            exact_scale = sum(scales) if name == "Mul" else max(scales)
            if result.scale < exact_scale:  # Spark rounds a result past 38 digits
                raise self.fail(node, "DECIMAL arithmetic Spark rounds")
            # Snowflake keeps a product's scale only up to max(s1, s2, 12) digits
            # (https://docs.snowflake.com/en/sql-reference/operators-arithmetic).
            if name == "Mul" and exact_scale > max(*scales, 12):
                raise self.fail(node, "a DECIMAL product whose scale Snowflake cuts")
            a, b = self.sql(left), self.sql(right)
        else:
            raise self.fail(node, f"arithmetic giving {result}")
        if name in ("Div", "Mod"):
            if name == "Mod" and result.kind == "double":
                raise self.fail(node, "a DOUBLE remainder")
            zero = "NULL" if self.safe_division else fail_sql("DIVIDE_BY_ZERO", "Division by zero", b, result)
            value = f"{a} / {b}" if name == "Div" else f"MOD({a}, {b})"
            return (f"CAST(CASE WHEN {a} IS NULL THEN NULL WHEN {b} = 0 THEN {zero} ELSE {value} END "
                    f"AS {snowflake_type(result)})")
        op = {"Add": "+", "Sub": "-", "Mul": "*"}[name]
        # decimal: exact in Snowflake's NUMBER (and DuckDB's DECIMAL); the CAST fails on both
        # where the value has more digits than Spark's result type, as Spark does.
        return self.exact(f"({a} {op} {b})", result)

    # -- strings -------------------------------------------------------------------------------
    def fn_replace(self, node: Any, args: list[Any], result: SparkType) -> str:
        text, search = self.string_arg(args[0]), self.string_arg(args[1])
        replacement = self.string_arg(args[2]) if len(args) > 2 else "''"
        # Spark leaves the text as it is for an empty search string.
        return (f"CASE WHEN {search} = '' THEN {text} ELSE REPLACE({text}, {search}, {replacement}) END")

    # Hashes of text: both engines hash the UTF-8 bytes and print lower-case hex.
    def fn_sha2(self, node: Any, args: list[Any], result: SparkType) -> str:
        constant, bits = self.constant(args[1])
        if not constant or bits not in (256, 0) or self.type(args[0]).kind == "binary":
            raise self.fail(node, "sha2() other than sha2(text, 256)")
        return f"SHA2({self.string_arg(args[0])}, 256)"

    def fn_md5(self, node: Any, args: list[Any], result: SparkType) -> str:
        if self.type(args[0]).kind == "binary":
            raise self.fail(node, "md5() of BINARY")
        return f"MD5({self.string_arg(args[0])})"

    def fn_sha1(self, node: Any, args: list[Any], result: SparkType) -> str:
        if self.type(args[0]).kind == "binary":
            raise self.fail(node, "sha1() of BINARY")
        return f"SHA1({self.string_arg(args[0])})"

    fn_sha = fn_sha1

    # -- numbers -------------------------------------------------------------------------------
    def fn_round(self, node: Any, args: list[Any], result: SparkType) -> str:
        source = self.type(args[0])
        constant, places = self.constant(args[1]) if len(args) > 1 else (True, 0)
        if not constant or not isinstance(places, int):
            raise self.fail(node, "round() to a scale that is not an integer literal")
        if source.kind != "decimal" and not (source.integral and places >= 0):
            raise self.fail(node, f"round() of {source}")
        if source.integral:
            return self.sql(args[0])
        # ROUND of a NUMBER: half away from zero on both engines, Spark's HALF_UP.
        return f"CAST(ROUND({self.sql(args[0])}, {int(places)}) AS {snowflake_type(result)})"

    def integral(self, node: Any, arg: Any, result: SparkType, function: str) -> str:
        source = self.type(arg)
        if source.kind == "double":
            value = self.sql(arg)
            rounded = f"{function}({value})"
            failure = fail_sql("ARITHMETIC_OVERFLOW", "overflow", value, result)
            return (f"CASE WHEN {value} IS NULL THEN NULL WHEN NOT ({value} = {value} AND "
                    f"{rounded} >= CAST('-9223372036854775808' AS FLOAT) AND "
                    f"{rounded} < CAST('9223372036854775808' AS FLOAT)) THEN {failure} "
                    f"ELSE CAST({rounded} AS NUMBER(19,0)) END")
        if source.integral:
            return f"CAST({self.sql(arg)} AS NUMBER(19,0))"
        if source.kind == "decimal":
            return f"CAST({function}({self.sql(arg)}) AS {snowflake_type(result)})"
        raise self.fail(node, f"{function.lower()}() of {source}")

    # -- dates ---------------------------------------------------------------------------------
    def fn_datediff(self, node: Any, args: list[Any], result: SparkType) -> str:
        return f"CAST(DATEDIFF(day, {self.as_date(args[1])}, {self.as_date(args[0])}) AS NUMBER(10,0))"

    def fn_date_add(self, node: Any, args: list[Any], result: SparkType) -> str:
        return f"CAST(DATEADD(day, {self.as_type(args[1], INT)}, {self.as_date(args[0])}) AS DATE)"

    def fn_date_sub(self, node: Any, args: list[Any], result: SparkType) -> str:
        return f"CAST(DATEADD(day, -{self.as_type(args[1], INT)}, {self.as_date(args[0])}) AS DATE)"


def translate_snowflake(text: str, inputs: Mapping[str, SparkType], column_sql: ColumnSql
                        ) -> tuple[str, SparkType]:
    """``text`` (Spark SQL over source columns of these Spark types) as Snowflake SQL, each
    column read by ``column_sql``, and its Spark result type; ``Untranslatable`` where no
    exact form exists."""
    translator = SnowflakeTranslator(inputs, column_sql)
    tree = parse(text)
    return translator.sql(tree), translator.type(tree)


__all__ = ["SnowflakeTranslator", "translate_snowflake"]
