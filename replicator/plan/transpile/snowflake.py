"""Spark SQL -> Snowflake SQL: filters and computed columns as Snowflake runs them on the
external-stage path (``target.snowflake.stage``, ``plan.statements.stage_expressions``).

The same typed tree as the DuckDB translation (``plan.expressions``' checker gives every
node its Spark type), rendered for Snowflake so that every node gives Spark's value in the
Snowflake form of Spark's type (int -> NUMBER(10,0), bigint -> NUMBER(19,0), decimal(p,s) ->
NUMBER(p,s), double -> FLOAT, timestamp -> TIMESTAMP_NTZ in UTC), on real Snowflake as on
fakesnow (DuckDB underneath), without relying on where the two differ
(docs/snowflake.md, "Spark SQL in Snowflake"). This module is the node dispatch; the types,
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

from collections.abc import Callable, Mapping
from typing import Any

from replicator.plan.expressions.casts import parse_date, parse_timestamp
from replicator.plan.expressions.checker import Checker
from replicator.plan.expressions.parsing import node_offset, parse
from replicator.plan.expressions.spark_types import (
    DATE,
    DOUBLE,
    INT,
    NULL,
    STRING,
    TIMESTAMP,
    SparkType,
    wider_type,
)
from replicator.plan.transpile.errors import Untranslatable
from replicator.plan.transpile.operators import COMPARISONS
from replicator.plan.transpile.snowflake_casts import (
    INT_RANGE,
    cast_sql,
    fail_sql,
    in_range,
    literal_sql,
    snowflake_type,
    string_literal,
)

ColumnSql = Callable[[str], str]  # source column name -> its SQL, in the Snowflake form of its Spark type


class SnowflakeTranslator:
    """Spark SQL nodes -> Snowflake SQL (the module's docstring); ``fn_<name>`` per function."""

    def __init__(self, columns: Mapping[str, SparkType], column_sql: ColumnSql) -> None:
        self.checker = Checker({name.lower(): (name, t) for name, t in columns.items()})
        self.columns = {name.lower(): name for name in columns}
        self.column_sql = column_sql

    def type(self, node: Any) -> SparkType:
        return self.checker.check(node).type

    def fail(self, node: Any, what: str) -> Untranslatable:
        return Untranslatable(f"{what} has no exact Snowflake SQL form", node_offset(node))

    def as_type(self, node: Any, target: SparkType) -> str:
        return cast_sql(self.sql(node), self.type(node), target)

    def string_arg(self, node: Any) -> str:
        return self.as_type(node, STRING)

    def text_operand(self, node: Any) -> str:
        """A trimmed text, cast to VARCHAR: a no-op in Snowflake; fakesnow 0.12.1 drops TRIM's
        characters unless its operand is such a cast."""
        return f"CAST({self.string_arg(node)} AS VARCHAR)"

    def count_arg(self, node: Any) -> str:
        """A position or length (Spark's int) as INTEGER: Snowflake's NUMBER(38,0), the same
        value; DuckDB (fakesnow) has no SUBSTR, LEFT or LPAD over a DECIMAL."""
        return f"CAST({self.as_type(node, INT)} AS INTEGER)"

    def common(self, nodes: list[Any]) -> SparkType:
        result = NULL
        for node in nodes:
            result = wider_type(result, self.type(node), 0, "")
        return result

    def sql(self, node: Any) -> str:
        from sqlglot import exp

        typed = self.checker.check(node)
        if typed.literal:
            return literal_sql(typed.value, typed.type)
        result = typed.type
        if isinstance(node, exp.Paren):
            return self.sql(node.this)
        if isinstance(node, exp.Column):
            return self.column_sql(self.columns[node.name.lower()])
        if isinstance(node, exp.Neg):
            value = f"(-{self.sql(node.this)})"
            if result.kind in INT_RANGE:
                return in_range(value, result)
            return f"CAST({value} AS {snowflake_type(result)})"
        if isinstance(node, exp.Not):
            return f"(NOT {self.sql(node.this)})"
        if isinstance(node, exp.And):
            return f"({self.sql(node.this)} AND {self.sql(node.expression)})"
        if isinstance(node, exp.Or):
            return f"({self.sql(node.this)} OR {self.sql(node.expression)})"
        name = type(node).__name__
        if name in COMPARISONS:
            return self.comparison(node, COMPARISONS[name])
        if name in ("Add", "Sub", "Mul", "Div", "Mod"):
            return self.arithmetic(node, name, result)
        if isinstance(node, exp.DPipe):
            return self.concat([node.this, node.expression])
        if isinstance(node, exp.Concat):
            return self.concat(node.expressions)
        if isinstance(node, exp.Is):
            target = node.expression
            if isinstance(target, exp.Null):
                return f"({self.sql(node.this)} IS NULL)"
            # Snowflake has no IS TRUE: the comparison, unknown read as FALSE.
            truth = "TRUE" if target.this else "FALSE"
            return f"COALESCE({self.sql(node.this)} = {truth}, FALSE)"
        if isinstance(node, exp.In) and not node.args.get("query"):
            parts = [self.comparison(exp.EQ(this=node.this, expression=o), "=") for o in node.expressions]
            return "(" + " OR ".join(parts) + ")"
        if isinstance(node, exp.Between):
            low = exp.GTE(this=node.this, expression=node.args["low"])
            high = exp.LTE(this=node.this, expression=node.args["high"])
            return f"({self.sql(low)} AND {self.sql(high)})"
        if isinstance(node, exp.Like):
            constant, pattern = self._constant(node.expression)
            if not constant or not isinstance(pattern, str) or node.args.get("escape"):
                raise self.fail(node, "LIKE with a non-literal pattern or an ESCAPE")
            if pattern.endswith("\\") and not pattern.endswith("\\\\"):
                raise self.fail(node, "a LIKE pattern ending in an escape")
            return f"({self.string_arg(node.this)} LIKE {string_literal(pattern)} ESCAPE {string_literal(chr(92))})"
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
            chars = node.args.get("expression")
            position = (node.args.get("position") or "BOTH").upper()
            function = {"LEADING": "LTRIM", "TRAILING": "RTRIM"}.get(position, "TRIM")
            characters = self.string_arg(chars) if chars is not None else "' '"
            return f"{function}({self.text_operand(node.this)}, {characters})"
        if isinstance(node, exp.Substring):
            args = [a for a in (node.this, node.args.get("start"), node.args.get("length")) if a is not None]
            return self.fn_substring(node, args, result)
        if isinstance(node, exp.Floor):
            return self._integral(node, node.this, result, "FLOOR")
        if isinstance(node, exp.Ceil):
            return self._integral(node, node.this, result, "CEIL")
        if isinstance(node, exp.Anonymous):
            function = str(node.this).lower()
            handler = getattr(self, f"fn_{function}", None)
            if handler is None:
                raise self.fail(node, f"{function}()")
            return handler(node, list(node.expressions), result)
        if isinstance(node, exp.Func):
            raise self.fail(node, f"{node.sql_name().lower()}()")
        raise self.fail(node, repr(node.sql(dialect="spark")))

    def _constant(self, node: Any) -> tuple[bool, Any]:
        typed = self.checker.check(node)
        return typed.literal, typed.value

    # -- operators -----------------------------------------------------------------------------
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
            common = TIMESTAMP if "timestamp" in (lt.kind, rt.kind) else DATE
        else:
            common = lt
        a, b = self.side(left, common), self.side(right, common)
        if op == "<=>":
            return f"({a} IS NOT DISTINCT FROM {b})"
        return f"({a} {op} {b})"

    def side(self, node: Any, common: SparkType) -> str:
        """A string literal compared with a date or timestamp is read at plan time, as Spark's
        analyzer reads it (a string column there would be a cast from string: refused)."""
        constant, value = self._constant(node)
        if constant and isinstance(value, str) and common.kind in ("date", "timestamp"):
            return literal_sql((parse_date if common.kind == "date" else parse_timestamp)(value), common)
        return self.as_type(node, common)

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
            exact = _scale(lt) + _scale(rt) if name == "Mul" else max(_scale(lt), _scale(rt))
            if result.scale < exact:  # Spark rounds a result past 38 digits
                raise self.fail(node, "DECIMAL arithmetic Spark rounds")
            # Snowflake keeps a product's scale only up to max(s1, s2, 12) digits
            # (https://docs.snowflake.com/en/sql-reference/operators-arithmetic).
            if name == "Mul" and exact > max(_scale(lt), _scale(rt), 12):
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
        value = f"({a} {op} {b})"
        if result.kind in INT_RANGE:
            return in_range(value, result)
        # decimal: exact in Snowflake's NUMBER (and DuckDB's DECIMAL); the CAST fails on both
        # where the value has more digits than Spark's result type, as Spark does.
        return f"CAST({value} AS {snowflake_type(result)})"

    safe_division = False

    def concat(self, nodes: list[Any]) -> str:
        return "(" + " || ".join(self.string_arg(n) for n in nodes) + ")"

    def conditional(self, branches: list[tuple[Any, Any]], default: Any, result: SparkType) -> str:
        parts = [f"WHEN {self.sql(cond)} THEN {self.as_type(value, result)}" for cond, value in branches]
        otherwise = self.as_type(default, result) if default is not None else "NULL"
        return f"CAST(CASE {' '.join(parts)} ELSE {otherwise} END AS {snowflake_type(result)})"

    # -- conditional functions -----------------------------------------------------------------
    def fn_coalesce(self, node: Any, args: list[Any], result: SparkType) -> str:
        return f"COALESCE({', '.join(self.as_type(a, result) for a in args)})"

    fn_nvl = fn_ifnull = fn_coalesce

    def fn_nullif(self, node: Any, args: list[Any], result: SparkType) -> str:
        from sqlglot import exp

        equal = self.comparison(exp.EQ(this=args[0], expression=args[1]), "=")
        return f"CASE WHEN {equal} THEN NULL ELSE {self.as_type(args[0], result)} END"

    def fn_nvl2(self, node: Any, args: list[Any], result: SparkType) -> str:
        return (f"CASE WHEN {self.sql(args[0])} IS NOT NULL THEN {self.as_type(args[1], result)} "
                f"ELSE {self.as_type(args[2], result)} END")

    # -- strings -------------------------------------------------------------------------------
    def fn_concat(self, node: Any, args: list[Any], result: SparkType) -> str:
        return self.concat(args)

    def fn_length(self, node: Any, args: list[Any], result: SparkType) -> str:
        return f"CAST(LENGTH({self.string_arg(args[0])}) AS NUMBER(10,0))"

    fn_char_length = fn_character_length = fn_length

    def fn_ltrim(self, node: Any, args: list[Any], result: SparkType) -> str:
        return f"LTRIM({self.text_operand(args[0])}, ' ')"

    def fn_rtrim(self, node: Any, args: list[Any], result: SparkType) -> str:
        return f"RTRIM({self.text_operand(args[0])}, ' ')"

    def fn_trim(self, node: Any, args: list[Any], result: SparkType) -> str:
        return f"TRIM({self.text_operand(args[0])}, ' ')"

    def fn_substring(self, node: Any, args: list[Any], result: SparkType) -> str:
        text = self.string_arg(args[0])
        pos = self.count_arg(args[1])
        length = self.count_arg(args[2]) if len(args) > 2 else "2147483647"
        # Spark's UTF8String.substringSQL over code points; SUBSTR then only sees a start of
        # at least 1 and a length of at least 0.
        size = f"LENGTH({text})"
        start = f"(CASE WHEN {pos} > 0 THEN {pos} - 1 WHEN {pos} < 0 THEN {size} + {pos} ELSE 0 END)"
        end = f"({start} + {length})"
        first = f"GREATEST({start}, 0)"
        return (f"CASE WHEN {text} IS NULL OR {pos} IS NULL OR {length} IS NULL THEN NULL "
                f"WHEN {first} >= {end} THEN '' ELSE SUBSTR({text}, {first} + 1, "
                f"LEAST({end}, {size}) - {first}) END")

    fn_substr = fn_substring

    def fn_left(self, node: Any, args: list[Any], result: SparkType) -> str:
        text, count = self.string_arg(args[0]), self.count_arg(args[1])
        return (f"CASE WHEN {text} IS NULL OR {count} IS NULL THEN NULL WHEN {count} <= 0 THEN '' "
                f"ELSE LEFT({text}, {count}) END")

    def fn_right(self, node: Any, args: list[Any], result: SparkType) -> str:
        text, count = self.string_arg(args[0]), self.count_arg(args[1])
        return (f"CASE WHEN {text} IS NULL OR {count} IS NULL THEN NULL WHEN {count} <= 0 THEN '' "
                f"ELSE RIGHT({text}, {count}) END")

    def fn_replace(self, node: Any, args: list[Any], result: SparkType) -> str:
        text, search = self.string_arg(args[0]), self.string_arg(args[1])
        replacement = self.string_arg(args[2]) if len(args) > 2 else "''"
        # Spark leaves the text as it is for an empty search string.
        return (f"CASE WHEN {search} = '' THEN {text} ELSE REPLACE({text}, {search}, {replacement}) END")

    # Hashes of text: both engines hash the UTF-8 bytes and print lower-case hex.
    def fn_sha2(self, node: Any, args: list[Any], result: SparkType) -> str:
        constant, bits = self._constant(args[1])
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
    def fn_abs(self, node: Any, args: list[Any], result: SparkType) -> str:
        value = f"ABS({self.as_type(args[0], result)})"
        if result.kind in INT_RANGE:
            return in_range(value, result)  # abs(-2^31) overflows in Spark
        return f"CAST({value} AS {snowflake_type(result)})"

    def fn_round(self, node: Any, args: list[Any], result: SparkType) -> str:
        source = self.type(args[0])
        constant, places = self._constant(args[1]) if len(args) > 1 else (True, 0)
        if not constant or not isinstance(places, int):
            raise self.fail(node, "round() to a scale that is not an integer literal")
        if source.kind != "decimal" and not (source.integral and places >= 0):
            raise self.fail(node, f"round() of {source}")
        if source.integral:
            return self.sql(args[0])
        # ROUND of a NUMBER: half away from zero on both engines, Spark's HALF_UP.
        return f"CAST(ROUND({self.sql(args[0])}, {int(places)}) AS {snowflake_type(result)})"

    def _integral(self, node: Any, arg: Any, result: SparkType, function: str) -> str:
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

    def fn_floor(self, node: Any, args: list[Any], result: SparkType) -> str:
        return self._integral(node, args[0], result, "FLOOR")

    def fn_ceil(self, node: Any, args: list[Any], result: SparkType) -> str:
        return self._integral(node, args[0], result, "CEIL")

    fn_ceiling = fn_ceil

    def fn_mod(self, node: Any, args: list[Any], result: SparkType) -> str:
        from sqlglot import exp

        return self.arithmetic(exp.Mod(this=args[0], expression=args[1]), "Mod", result)

    def fn_pmod(self, node: Any, args: list[Any], result: SparkType) -> str:
        remainder = self.fn_mod(node, args, result)
        divisor = self.as_type(args[1], result)
        return (f"CAST(CASE WHEN {remainder} < 0 AND {divisor} > 0 THEN {remainder} + {divisor} "
                f"ELSE {remainder} END AS {snowflake_type(result)})")

    def fn_try_divide(self, node: Any, args: list[Any], result: SparkType) -> str:
        from sqlglot import exp

        self.safe_division = True
        try:
            return self.arithmetic(exp.Div(this=args[0], expression=args[1]), "Div", result)
        finally:
            self.safe_division = False

    # -- dates ---------------------------------------------------------------------------------
    def _date_part(self, node: Any, args: list[Any], part: str) -> str:
        source = self.type(args[0])
        if source.kind not in ("date", "timestamp"):
            raise self.fail(node, f"{part}() of {source}")
        value = self.sql(args[0]) if part in ("YEAR", "MONTH", "DAY", "QUARTER") \
            else self.as_type(args[0], TIMESTAMP)
        return f"CAST({part}({value}) AS NUMBER(10,0))"

    def fn_year(self, node: Any, args: list[Any], result: SparkType) -> str:
        return self._date_part(node, args, "YEAR")

    def fn_month(self, node: Any, args: list[Any], result: SparkType) -> str:
        return self._date_part(node, args, "MONTH")

    def fn_day(self, node: Any, args: list[Any], result: SparkType) -> str:
        return self._date_part(node, args, "DAY")

    fn_dayofmonth = fn_day

    def fn_quarter(self, node: Any, args: list[Any], result: SparkType) -> str:
        return self._date_part(node, args, "QUARTER")

    def fn_hour(self, node: Any, args: list[Any], result: SparkType) -> str:
        return self._date_part(node, args, "HOUR")

    def fn_minute(self, node: Any, args: list[Any], result: SparkType) -> str:
        return self._date_part(node, args, "MINUTE")

    def fn_second(self, node: Any, args: list[Any], result: SparkType) -> str:
        return self._date_part(node, args, "SECOND")

    def _as_date(self, node: Any) -> str:
        source = self.type(node)
        if source.kind in ("timestamp", "date"):
            return self.as_type(node, DATE)
        raise self.fail(node, f"a {source} where a date is expected")

    def fn_to_date(self, node: Any, args: list[Any], result: SparkType) -> str:
        if len(args) != 1:
            raise self.fail(node, "to_date() with a format")
        return self._as_date(args[0])

    def fn_datediff(self, node: Any, args: list[Any], result: SparkType) -> str:
        return f"CAST(DATEDIFF(day, {self._as_date(args[1])}, {self._as_date(args[0])}) AS NUMBER(10,0))"

    def fn_date_add(self, node: Any, args: list[Any], result: SparkType) -> str:
        return f"CAST(DATEADD(day, {self.as_type(args[1], INT)}, {self._as_date(args[0])}) AS DATE)"

    def fn_date_sub(self, node: Any, args: list[Any], result: SparkType) -> str:
        return f"CAST(DATEADD(day, -{self.as_type(args[1], INT)}, {self._as_date(args[0])}) AS DATE)"


def _scale(t: SparkType) -> int:
    return t.scale if t.kind == "decimal" else 0


def translate_snowflake(text: str, inputs: Mapping[str, SparkType], column_sql: ColumnSql
                        ) -> tuple[str, SparkType]:
    """``text`` (Spark SQL over source columns of these Spark types) as Snowflake SQL, each
    column read by ``column_sql``, and its Spark result type; ``Untranslatable`` where no
    exact form exists."""
    translator = SnowflakeTranslator(inputs, column_sql)
    tree = parse(text)
    return translator.sql(tree), translator.type(tree)


__all__ = ["SnowflakeTranslator", "translate_snowflake"]
