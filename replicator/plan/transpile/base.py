"""What the DuckDB translation (``translator``) and the Snowflake one (``snowflake``) share:
the walk over the checker's typed tree (``plan.expressions``), and every rule whose SQL is the
same in both dialects but for a type name, a function name's case or a literal's escapes.

A dialect is a subclass giving data (``sql_type``, ``literal``, ``cast``, ``quote``, the case
of its function names, the arithmetic it renders, the message of a refusal) and the hooks for
the constructs whose SQL differs (``negate``, ``is_truth``, ``like_operand``,
``trim_operand``, ``exact``, ``arithmetic``, ``integral``). One place for each rule: the
dispatch over node types, a comparison's common type, CASE and IF, the conditional
functions, TRIM, mod and pmod, the date parts.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any, ClassVar

from replicator.plan.expressions.casts import parse_date, parse_timestamp
from replicator.plan.expressions.checker import Checker
from replicator.plan.expressions.parsing import node_offset
from replicator.plan.expressions.spark_types import (
    DATE,
    INT,
    NULL,
    STRING,
    TIMESTAMP,
    SparkType,
    wider_type,
)
from replicator.plan.transpile.errors import Untranslatable

COMPARISONS = {"EQ": "=", "NEQ": "<>", "GT": ">", "GTE": ">=", "LT": "<", "LTE": "<=",
               "NullSafeEQ": "<=>"}

ColumnSql = Callable[[str], str]  # source column name -> its SQL, already in the dialect's form of its Spark type


def _date_part_function(part: str) -> Callable[..., str]:
    """``fn_<part>``: the date part ``part`` of a date or timestamp (``_date_part``)."""

    def fn(self: BaseTranslator, node: Any, args: list[Any], result: SparkType) -> str:
        return self._date_part(node, args, part)

    return fn


class BaseTranslator:
    """Spark SQL nodes -> a dialect's SQL: the dispatch and the shared rules (the module's
    docstring); ``fn_<name>`` per function, the dialect's own in its subclass."""

    # -- the dialect, as data ----------------------------------------------------------------
    refusal: ClassVar[str] = "is not supported"  # follows the construct in Untranslatable's message
    upper_case_functions: ClassVar[bool] = False  # the spelling of function names in the SQL
    arithmetic_names: ClassVar[tuple[str, ...]] = ("Add", "Sub", "Mul", "Div", "Mod")
    negation: ClassVar[str] = "-({})"  # a negated operand, before ``exact``
    substring_function: ClassVar[str] = "substring"

    @staticmethod
    def sql_type(spark_type: SparkType) -> str:
        """The dialect's type of a Spark type."""
        raise NotImplementedError

    @staticmethod
    def literal(value: Any, spark_type: SparkType) -> str:
        """A constant the user wrote, in the dialect's form of its Spark type."""
        raise NotImplementedError

    @staticmethod
    def cast(sql: str, source: SparkType, target: SparkType, *, safe: bool = False) -> str:
        """Spark's ANSI CAST (``safe``: try_cast) in the dialect."""
        raise NotImplementedError

    @staticmethod
    def quote(text: str) -> str:
        """A string constant in the dialect's escapes."""
        raise NotImplementedError

    def __init__(self, columns: Mapping[str, SparkType], column_sql: ColumnSql) -> None:
        self.checker = Checker({name.lower(): (name, t) for name, t in columns.items()})
        self.columns = {name.lower(): name for name in columns}
        self.column_sql = column_sql

    def type(self, node: Any) -> SparkType:
        return self.checker.check(node).type

    def constant(self, node: Any) -> tuple[bool, Any]:
        """Whether ``node`` is a literal the user wrote, and its value (nothing is folded)."""
        typed = self.checker.check(node)
        return typed.literal, typed.value

    def fail(self, node: Any, what: str) -> Untranslatable:
        return Untranslatable(f"{what} {self.refusal}", node_offset(node))

    def call(self, function: str) -> str:
        """A function's name as the dialect spells it."""
        return function.upper() if self.upper_case_functions else function

    def as_type(self, node: Any, target: SparkType) -> str:
        """``node`` implicitly cast to ``target`` (Spark's implicit cast: ANSI CAST)."""
        return self.cast(self.sql(node), self.type(node), target)

    def string_arg(self, node: Any) -> str:
        return self.as_type(node, STRING)

    def count_arg(self, node: Any) -> str:
        """A position, length or count: Spark's int."""
        return self.as_type(node, INT)

    def common(self, nodes: list[Any]) -> SparkType:
        result = NULL
        for node in nodes:
            result = wider_type(result, self.type(node), 0, "")
        return result

    # -- the dispatch ------------------------------------------------------------------------
    def sql(self, node: Any) -> str:
        """The dialect's SQL for ``node``, giving Spark's value in the dialect's form of
        Spark's type."""
        from sqlglot import exp

        typed = self.checker.check(node)  # type-checks the node (ExpressionError)
        if typed.literal:  # what the user wrote; an expression over literals the engine folds
            return self.literal(typed.value, typed.type)
        result = typed.type
        if isinstance(node, exp.Paren):
            return self.sql(node.this)
        if isinstance(node, exp.Column):
            return self.column_sql(self.columns[node.name.lower()])
        if isinstance(node, exp.Neg):
            return self.exact(self.negation.format(self.sql(node.this)), result)
        if isinstance(node, exp.Not):
            return f"(NOT {self.sql(node.this)})"
        if isinstance(node, exp.And):
            return f"({self.sql(node.this)} AND {self.sql(node.expression)})"
        if isinstance(node, exp.Or):
            return f"({self.sql(node.this)} OR {self.sql(node.expression)})"
        name = type(node).__name__
        if name in COMPARISONS:
            return self.comparison(node, COMPARISONS[name])
        if name in self.arithmetic_names:
            return self.arithmetic(node, name, result)
        if isinstance(node, exp.DPipe):
            return self.concat([node.this, node.expression])
        if isinstance(node, exp.Concat):
            return self.concat(node.expressions)
        if isinstance(node, exp.Is):
            target = node.expression
            if isinstance(target, exp.Null):
                return f"({self.sql(node.this)} IS NULL)"
            return self.is_truth(self.sql(node.this), "TRUE" if target.this else "FALSE")
        if isinstance(node, exp.In) and not node.args.get("query"):
            parts = [self.comparison(exp.EQ(this=node.this, expression=o), "=") for o in node.expressions]
            return "(" + " OR ".join(parts) + ")"
        if isinstance(node, exp.Between):
            low = exp.GTE(this=node.this, expression=node.args["low"])
            high = exp.LTE(this=node.this, expression=node.args["high"])
            return f"({self.sql(low)} AND {self.sql(high)})"
        if isinstance(node, exp.Like):
            return self.like(node)
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
            return self.cast(self.sql(node.this), self.type(node.this), result, safe=safe)
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
            function = str(node.this).lower()
            handler = getattr(self, f"fn_{function}", None)
            if handler is None:
                raise self.fail(node, f"{function}()")
            return handler(node, list(node.expressions), result)
        if isinstance(node, exp.Func):
            raise self.fail(node, f"{node.sql_name().lower()}()")
        raise self.fail(node, repr(node.sql(dialect="spark")))

    # -- the dialect's hooks -------------------------------------------------------------------
    def exact(self, value: str, result: SparkType) -> str:
        """``value`` (computed exactly) as ``result``: the CAST fails where the value has
        more digits than the type holds."""
        return f"CAST({value} AS {self.sql_type(result)})"

    def is_truth(self, sql: str, truth: str) -> str:
        return f"({sql} IS {truth})"

    def like_operand(self, node: Any) -> str:
        return self.sql(node)

    def trim_operand(self, node: Any) -> str:
        return self.string_arg(node)

    def arithmetic(self, node: Any, name: str, result: SparkType) -> str:
        raise NotImplementedError

    def integral(self, node: Any, arg: Any, result: SparkType, function: str) -> str:
        """floor or ceil (``function``, as the dialect spells it) of ``arg``."""
        raise NotImplementedError

    def position_sum(self, start: str, length: str) -> str:
        """A substring's end: a start plus a length, without overflow."""
        raise NotImplementedError

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
            common = TIMESTAMP if "timestamp" in (lt.kind, rt.kind) else DATE  # a literal, folded
        else:
            common = lt
        a, b = self.side(left, common), self.side(right, common)
        if op == "<=>":
            return f"({a} IS NOT DISTINCT FROM {b})"
        return f"({a} {op} {b})"

    def side(self, node: Any, common: SparkType) -> str:
        """One side of a comparison in the common type; a string literal compared with a date
        or timestamp is read at plan time, as Spark's analyzer reads it."""
        constant, value = self.constant(node)
        if constant and isinstance(value, str) and common.kind in ("date", "timestamp"):
            parse_ = parse_date if common.kind == "date" else parse_timestamp
            return self.literal(parse_(value), common)
        return self.as_type(node, common)

    def like(self, node: Any) -> str:
        constant, pattern = self.constant(node.expression)
        if not constant or not isinstance(pattern, str) or node.args.get("escape"):
            raise self.fail(node, "LIKE with a non-literal pattern or an ESCAPE")
        if pattern.endswith("\\") and not pattern.endswith("\\\\"):
            raise self.fail(node, "a LIKE pattern ending in an escape")
        like = f"({self.like_operand(node.this)} LIKE {self.quote(pattern)} ESCAPE {self.quote(chr(92))})"
        # sqlglot parses ``x NOT LIKE p`` as one Like node with ``negate`` set (not as Not(Like)).
        return f"(NOT {like})" if node.args.get("negate") else like

    def concat(self, nodes: list[Any]) -> str:
        return "(" + " || ".join(self.string_arg(n) for n in nodes) + ")"

    def conditional(self, branches: list[tuple[Any, Any]], default: Any, result: SparkType) -> str:
        parts = [f"WHEN {self.sql(cond)} THEN {self.as_type(value, result)}" for cond, value in branches]
        otherwise = self.as_type(default, result) if default is not None else "NULL"
        return f"CAST(CASE {' '.join(parts)} ELSE {otherwise} END AS {self.sql_type(result)})"

    def trim(self, node: Any) -> str:
        chars = node.args.get("expression")
        position = (node.args.get("position") or "BOTH").upper()
        function = {"LEADING": "ltrim", "TRAILING": "rtrim"}.get(position, "trim")
        characters = self.string_arg(chars) if chars is not None else "' '"
        return f"{self.call(function)}({self.trim_operand(node.this)}, {characters})"

    # -- conditional functions: CASE in function form ----------------------------------------
    def fn_coalesce(self, node: Any, args: list[Any], result: SparkType) -> str:
        return f"{self.call('coalesce')}({', '.join(self.as_type(a, result) for a in args)})"

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

    def fn_ltrim(self, node: Any, args: list[Any], result: SparkType) -> str:
        return f"{self.call('ltrim')}({self.trim_operand(args[0])}, ' ')"

    def fn_rtrim(self, node: Any, args: list[Any], result: SparkType) -> str:
        return f"{self.call('rtrim')}({self.trim_operand(args[0])}, ' ')"

    def fn_trim(self, node: Any, args: list[Any], result: SparkType) -> str:
        return f"{self.call('trim')}({self.trim_operand(args[0])}, ' ')"

    def fn_length(self, node: Any, args: list[Any], result: SparkType) -> str:
        return f"CAST({self.call('length')}({self.string_arg(args[0])}) AS {self.sql_type(INT)})"

    fn_char_length = fn_character_length = fn_length

    def fn_substring(self, node: Any, args: list[Any], result: SparkType) -> str:
        text = self.string_arg(args[0])
        pos = self.count_arg(args[1])
        length = self.count_arg(args[2]) if len(args) > 2 else "2147483647"
        # Spark's UTF8String.substringSQL over code points; the dialect's substring then only
        # sees a start of at least 1 and a length of at least 0.
        size = f"{self.call('length')}({text})"
        start = f"(CASE WHEN {pos} > 0 THEN {pos} - 1 WHEN {pos} < 0 THEN {size} + {pos} ELSE 0 END)"
        end = self.position_sum(start, length)
        first = f"{self.call('greatest')}({start}, 0)"
        return (f"CASE WHEN {text} IS NULL OR {pos} IS NULL OR {length} IS NULL THEN NULL "
                f"WHEN {first} >= {end} THEN '' ELSE {self.substring_function}({text}, {first} + 1, "
                f"{self.call('least')}({end}, {size}) - {first}) END")

    fn_substr = fn_substring

    def fn_left(self, node: Any, args: list[Any], result: SparkType) -> str:
        return self._end_of_text(args, "left")

    def fn_right(self, node: Any, args: list[Any], result: SparkType) -> str:
        return self._end_of_text(args, "right")

    def _end_of_text(self, args: list[Any], function: str) -> str:
        text, count = self.string_arg(args[0]), self.count_arg(args[1])
        return (f"CASE WHEN {text} IS NULL OR {count} IS NULL THEN NULL WHEN {count} <= 0 THEN '' "
                f"ELSE {self.call(function)}({text}, {count}) END")

    # -- numbers -------------------------------------------------------------------------------
    def fn_abs(self, node: Any, args: list[Any], result: SparkType) -> str:
        return self.exact(f"{self.call('abs')}({self.as_type(args[0], result)})", result)

    def fn_floor(self, node: Any, args: list[Any], result: SparkType) -> str:
        return self.integral(node, args[0], result, self.call("floor"))

    def fn_ceil(self, node: Any, args: list[Any], result: SparkType) -> str:
        return self.integral(node, args[0], result, self.call("ceil"))

    fn_ceiling = fn_ceil

    def fn_mod(self, node: Any, args: list[Any], result: SparkType) -> str:
        from sqlglot import exp

        return self.arithmetic(exp.Mod(this=args[0], expression=args[1]), "Mod", result)

    def fn_pmod(self, node: Any, args: list[Any], result: SparkType) -> str:
        remainder = self.fn_mod(node, args, result)
        divisor = self.as_type(args[1], result)
        return (f"CAST(CASE WHEN {remainder} < 0 AND {divisor} > 0 THEN {remainder} + {divisor} "
                f"ELSE {remainder} END AS {self.sql_type(result)})")

    safe_division = False  # try_divide: NULL for a zero divisor

    def fn_try_divide(self, node: Any, args: list[Any], result: SparkType) -> str:
        from sqlglot import exp

        self.safe_division = True
        try:
            return self.arithmetic(exp.Div(this=args[0], expression=args[1]), "Div", result)
        finally:
            self.safe_division = False

    # -- dates ---------------------------------------------------------------------------------
    def _date_part(self, node: Any, args: list[Any], part: str) -> str:
        function = self.call(part)
        source = self.type(args[0])
        if source.kind not in ("date", "timestamp"):
            raise self.fail(node, f"{function}() of {source}")
        value = self.sql(args[0]) if part in ("year", "month", "day", "quarter") else self.as_type(args[0], TIMESTAMP)
        return f"CAST({function}({value}) AS {self.sql_type(INT)})"

    fn_year = _date_part_function("year")
    fn_month = _date_part_function("month")
    fn_day = fn_dayofmonth = _date_part_function("day")
    fn_quarter = _date_part_function("quarter")
    fn_hour = _date_part_function("hour")
    fn_minute = _date_part_function("minute")
    fn_second = _date_part_function("second")

    def as_date(self, node: Any) -> str:
        source = self.type(node)
        if source.kind in ("timestamp", "date"):
            return self.as_type(node, DATE)
        raise self.fail(node, f"a {source} where a date is expected")

    def fn_to_date(self, node: Any, args: list[Any], result: SparkType) -> str:
        if len(args) != 1:
            raise self.fail(node, "to_date() with a format")
        return self.as_date(args[0])


def decimal_scale(t: SparkType) -> int:
    """An exact number's scale (an integer's is 0)."""
    return t.scale if t.kind == "decimal" else 0
