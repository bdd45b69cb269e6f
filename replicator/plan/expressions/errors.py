"""What an expression may use (``FUNCTIONS``, ``SUPPORTED_HINT``) and its two failures: an
``ExpressionError`` when it does not check (with the offset of the offending part, so
``validate`` reports it without Spark), an ``EvaluationError`` where the engine fails a row
as Spark (ANSI mode) would fail the query (``transform.expressions.evaluation_error``).

What is outside the subset, and what Spark would only do by an implicit conversion we do not
reproduce (a string compared with a number, a CASE mixing strings and numbers), is an
``ExpressionError``: an explicit ``CAST`` is the fix.
"""

from __future__ import annotations

from replicator.errors import PlanError, ReplicatorError


class ExpressionError(PlanError):
    """The expression does not check; ``offset`` is where in its text (0-based)."""

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
