"""Filters and computed columns: the DuckDB translation against a real Spark session.

Every supported operator, function and cast is evaluated over generated rows (hypothesis:
NULLs, unicode, negative numbers, decimals with scale, boundary dates and integers) twice:
by DuckDB running ``plan.transpile``'s SQL over an Arrow table of the rows (what the
transform step runs) and by Spark's own ``selectExpr`` on a DataFrame of the same rows, with
the same column types. Results must be equal with equal types (Decimal('1.50') is not
Decimal('1.5')), and a row on which DuckDB fails must fail in Spark (ANSI mode: division by
zero, overflow, invalid casts). The result type we infer must be Spark's. What does not
translate exactly is refused (``REFUSED``).
"""

from __future__ import annotations

import datetime as dt
import math
from decimal import Decimal

import pyarrow as pa
import pytest
from hypothesis import HealthCheck, Phase, given, settings
from hypothesis import strategies as st

from replicator.plan.expressions.checker import check_expression
from replicator.plan.expressions.spark_types import (
    BIGINT,
    BINARY,
    BOOLEAN,
    DATE,
    DOUBLE,
    INT,
    STRING,
    TIMESTAMP,
    decimal,
)
from replicator.plan.transpile.errors import Untranslatable
from replicator.plan.transpile.translator import translate

pytestmark = [pytest.mark.spark]

COLUMNS = {
    "i": INT, "j": INT, "l": BIGINT, "d": decimal(10, 2), "e": decimal(20, 4), "f": DOUBLE,
    "s": STRING, "t": STRING, "dt": DATE, "ts": TIMESTAMP, "b": BINARY, "flag": BOOLEAN,
}
SPARK_SCHEMA = ("id int, i int, j int, l bigint, d decimal(10,2), e decimal(20,4), f double, "
                "s string, t string, dt date, ts timestamp, b binary, flag boolean")

EXPRESSIONS = [
    # arithmetic and its types
    "i + j", "i - j", "i * j", "i + 2147483647", "i * 65536", "l * 4", "i / j", "i % j", "i div j", "-i", "l + i", "l * j",
    "d + e", "d - i", "d * e", "d / e", "d % j", "d * 1.2", "d / 3", "e / d", "d + 1",
    "f + i", "f * d", "f / j", "mod(i, j)", "pmod(i, j)", "try_divide(i, j)", "try_divide(d, e)",
    # comparison and logic
    "i = j", "i <> j", "i < j", "d >= e", "f > d", "s = t", "s < t", "i <=> j", "dt < ts",
    "dt = '2024-02-29'", "ts >= '2024-01-01 00:00:00'", "flag AND i > 0", "flag OR i > 0",
    "NOT flag", "i IS NULL", "s IS NOT NULL", "i IN (1, 2, j)", "d BETWEEN -1 AND 1.5",
    "s LIKE 'a%'", "s LIKE '%\\\\_%'", "s NOT LIKE 'a%'",
    # conditionals
    "CASE WHEN i > 0 THEN 'pos' WHEN i < 0 THEN 'neg' ELSE 'zero' END",
    "CASE i WHEN 1 THEN d ELSE e END", "if(flag, i, l)", "coalesce(s, t, 'none')",
    "nvl(d, 0)", "ifnull(i, j)", "nullif(i, j)", "nvl2(s, 1, 2)", "coalesce(d, i)",
    "greatest(i, j, 0)", "least(d, e)",
    # casts
    "cast(s as int)", "try_cast(s as int)", "cast(s as bigint)", "cast(s as double)",
    "try_cast(s as decimal(10,2))", "cast(d as int)", "cast(f as int)", "cast(e as decimal(6,1))",
    "cast(i as string)", "cast(d as string)", "cast(f as string)", "cast(dt as string)",
    "cast(ts as string)", "cast(flag as string)", "try_cast(s as date)", "try_cast(s as boolean)",
    "cast(ts as date)", "cast(dt as timestamp)", "cast(i as double)", "cast(l as int)",
    "try_cast(s as timestamp)", "cast(b as string)", "cast(s as binary)", "cast(f as decimal(12,3))",
    # strings
    "concat(s, t)", "concat(s, '-', i)", "s || t", "concat_ws('|', s, t, i)", "upper(s)",
    "lower(s)", "trim(s)", "ltrim(s)", "rtrim(s)", "trim(BOTH 'a' FROM s)", "substring(s, i, j)",
    "substr(s, 2)", "substring(s, -3, 2)", "left(s, j)", "right(s, j)", "length(s)", "length(b)",
    "replace(s, 'a', 'xy')", "replace(s, t)", "regexp_replace(s, '[0-9]+', '#')",
    "regexp_replace(s, '(a)(b)?', '<$1$2>')", "lpad(s, j, 'xy')", "rpad(s, j, 'xy')",
    "lpad(s, 8)", "initcap(s)", "upper(concat(s, i))",
    # math
    "round(d, 1)", "round(e, 2)", "round(d)", "round(f, 2)", "round(i, 2)", "bround(d, 1)",
    "floor(d)", "ceil(e)", "floor(f)", "ceil(i)", "abs(i)", "abs(d)", "abs(f)",
    # dates
    "to_date(s)", "to_date(ts)", "year(dt)", "month(ts)", "day(dt)", "dayofmonth(ts)", "hour(ts)",
    "minute(ts)", "second(ts)", "quarter(dt)", "hour(dt)", "datediff(dt, ts)", "date_add(dt, j)",
    "date_sub(dt, j)", "date_trunc('month', ts)", "date_trunc('year', dt)", "date_trunc('week', ts)",
    "date_trunc('hour', ts)", "date_trunc('quarter', ts)",
    "date_format(ts, 'yyyy-MM-dd HH:mm:ss.SSS')", "date_format(dt, 'dd/MM/yy EEE MMM a h')",
    "date_format(ts, 'EEEE d MMMM yyyy, H')",
    # hashes
    "sha2(s, 256)", "sha2(b, 512)", "sha2(s, 224)", "sha2(s, 1)", "md5(s)", "md5(b)", "sha1(s)",
]

# Supported by the interpreter before the vectorized engine; no exact DuckDB form (Java's
# double printing, Java's date parsing, title case, SHA-224/384/512 ...): refused by validate.
REFUSED = ['cast(s as double)', 'try_cast(s as decimal(10,2))', 'cast(f as string)', 'try_cast(s as date)', 'try_cast(s as timestamp)', 'cast(b as string)', 'cast(f as decimal(12,3))', 'initcap(s)', 'round(f, 2)', 'to_date(s)', 'sha2(b, 512)', 'sha2(s, 224)']
EXPRESSIONS = [text for text in EXPRESSIONS if text not in REFUSED] + [
    # filters are conditions in the same dialect
    "s <> 'test' AND i >= 0", "lower(s) = 'abc' OR s IS NULL", "NOT (d > 1.5) AND f < 0",
    "ts >= '2024-01-01' AND dt < '2100-01-01'", "coalesce(i, 0) BETWEEN -5 AND 5",
    "upper(s) LIKE 'A%'",
]

_texts = st.one_of(
    st.text(max_size=12),
    st.sampled_from(["", " ", "  a b ", "abc", "aab", "a_b", "ß", "İx", "Ǆ dž", "😀x",
                     " 12 ", "12.0", "-7", "1e3", "2147483648", "true", " No ", "2024-02-29",
                     "2024-02-30", "2024-3-1", "2024-01-01 10:11:12.5", "x'y\"z", "None", "NaN"]),
)
_rows = st.fixed_dictionaries({
    "i": st.one_of(st.integers(-50, 50), st.sampled_from([0, 1, -1, 2**31 - 1, -(2**31)])),
    "j": st.integers(-9, 9),
    "l": st.one_of(st.integers(-(2**40), 2**40), st.sampled_from([2**63 - 1, -(2**63)])),
    "d": st.decimals(min_value=-99999999, max_value=99999999, places=2, allow_nan=False),
    "e": st.decimals(min_value=-10**15, max_value=10**15, places=4, allow_nan=False),
    "f": st.one_of(st.floats(-1e9, 1e9, allow_nan=False), st.sampled_from([0.0, -0.0, 1e20, 1e-5, 0.125, 2.675])),
    "s": _texts,
    "t": _texts,
    "dt": st.dates(dt.date(1000, 1, 1), dt.date(9998, 12, 31)),
    "ts": st.datetimes(dt.datetime(1900, 1, 1), dt.datetime(2200, 1, 1)),
    "b": st.binary(max_size=8),
    "flag": st.booleans(),
}).map(lambda row: {k: v for k, v in row.items()})


def _with_nulls(rows, data):
    out = []
    for row in rows:
        nulls = data.draw(st.sets(st.sampled_from(sorted(COLUMNS)), max_size=3))
        out.append({k: (None if k in nulls else v) for k, v in row.items()})
    return out


TYPES = {text: check_expression(text, COLUMNS) for text in EXPRESSIONS}
ARROW = {"i": pa.int32(), "j": pa.int32(), "l": pa.int64(), "d": pa.decimal128(10, 2),
         "e": pa.decimal128(20, 4), "f": pa.float64(), "s": pa.string(), "t": pa.string(),
         "dt": pa.date32(), "ts": pa.timestamp("us"), "b": pa.binary(), "flag": pa.bool_()}
SQL = {text: translate(text, COLUMNS)[0] for text in EXPRESSIONS}
_ERRORS_CHECKED: set[str] = set()


class Failed(Exception):
    """DuckDB failed the expression on this row."""


def _duckdb_values(rows: list[dict]) -> dict[str, list]:
    """Each expression's value per row as DuckDB computes it (Failed where it fails)."""
    import duckdb

    connection = duckdb.connect()
    connection.execute("SET TimeZone = 'UTC'")
    table = pa.table({name: pa.array([row[name] for row in rows], ARROW[name]) for name in COLUMNS})
    connection.register("batch", table)
    out = {}
    for text, sql in SQL.items():
        try:
            out[text] = [r[0] for r in connection.sql(f"SELECT {sql} FROM batch").fetchall()]
            continue
        except duckdb.Error:
            pass
        values = []
        for index in range(len(rows)):  # find the failing rows one by one (tests only)
            try:
                values.append(connection.sql(f"SELECT {sql} FROM (SELECT * FROM batch LIMIT 1 "
                                             f"OFFSET {index})").fetchall()[0][0])
            except duckdb.Error:
                values.append(Failed)
        out[text] = values
    return out


def test_refused_constructs_have_no_translation() -> None:
    for text in REFUSED:
        with pytest.raises(Untranslatable):
            translate(text, COLUMNS)


def _same(ours, theirs) -> bool:
    if isinstance(ours, float) and isinstance(theirs, float):
        return (math.isnan(ours) and math.isnan(theirs)) or ours == theirs
    if type(ours) is not type(theirs):
        if isinstance(ours, (bytes, bytearray)) and isinstance(theirs, (bytes, bytearray)):
            return bytes(ours) == bytes(theirs)
        return False
    if isinstance(ours, Decimal):
        return ours == theirs and ours.as_tuple().exponent == theirs.as_tuple().exponent
    return ours == theirs


def test_result_types_are_sparks(spark) -> None:
    frame = spark.createDataFrame([], SPARK_SCHEMA)
    selected = frame.selectExpr(*[f"{text} AS c{n}" for n, text in enumerate(EXPRESSIONS)])
    spark_types = [field.dataType.simpleString() for field in selected.schema.fields]
    ours = [str(TYPES[text]) for text in EXPRESSIONS]
    mismatches = [(text, o, s) for text, o, s in zip(EXPRESSIONS, ours, spark_types, strict=True) if o != s]
    assert mismatches == []


@settings(max_examples=4, deadline=None, suppress_health_check=list(HealthCheck),
          phases=[Phase.explicit, Phase.reuse, Phase.generate])  # no shrinking: a Spark query each
@given(rows=st.lists(_rows, min_size=12, max_size=24), data=st.data())
def test_values_and_errors_are_sparks(spark, rows, data) -> None:
    _check_against_spark(spark, _with_nulls(rows, data))


# What Spark's casts trim around a value is ASCII only (UTF8String.trimAll works on bytes:
# U+0088, U+00A0, U+3000 are kept, so the cast fails); DEL is trimmed for int, boolean and
# dates, not for decimal and double. Found by the test above once, so now always checked.
_EDGES = ["\x88\x1bN", "\x1bN\x1f", "\u300012\u3000", "\x7f12\x7f", "\xa0yes", "\x00 7 \x7f",
          "\x852024-01-02", "\x7f2024-01-02 10:11:12\x1b", "\u2000true", " 1.5\x7f"]


def test_casts_trim_only_what_spark_trims(spark) -> None:
    base = {"i": 1, "j": 2, "l": 3, "d": Decimal("1.50"), "e": Decimal("2.0000"), "f": 0.5,
            "dt": dt.date(2024, 1, 2), "ts": dt.datetime(2024, 1, 2, 3, 4, 5), "b": b"x",
            "flag": True}
    _check_against_spark(spark, [{**base, "s": text, "t": text[::-1]} for text in _EDGES])


def _check_against_spark(spark, rows) -> None:
    ours = _duckdb_values(rows)
    failing: dict[str, list[int]] = {}
    for text, values in ours.items():
        for index, value in enumerate(values):
            if value is Failed:
                failing.setdefault(text, []).append(index)
    frame = spark.createDataFrame(
        [(n, *[row[c] for c in COLUMNS]) for n, row in enumerate(rows)], SPARK_SCHEMA)
    selects = []
    for n, text in enumerate(EXPRESSIONS):
        bad = failing.get(text, [])
        guard = f"CASE WHEN id NOT IN ({', '.join(map(str, bad))}) THEN {text} END" if bad else text
        selects.append(f"{guard} AS c{n}")
    try:
        columns = list(zip(*sorted(frame.selectExpr("id", *selects).collect(), key=lambda r: r[0]),
                           strict=True))[1:]
    except Exception:
        columns = []
        for select in selects:
            try:
                records = sorted(frame.selectExpr("id", select).collect(), key=lambda r: r[0])
                columns.append([r[1] for r in records])
            except Exception as exc:
                columns.append([f"spark failed: {str(exc).splitlines()[0]}"] * len(rows))
    mismatches = []
    for n, text in enumerate(EXPRESSIONS):
        for index, theirs in enumerate(columns[n]):
            mine = ours[text][index]
            if mine is Failed:
                continue
            if not _same(mine, theirs):
                mismatches.append((text, rows[index], mine, theirs))
                break  # one row per expression is enough to see the difference
    assert mismatches == [], "\n".join(
        f"{text}: ours {mine!r} spark {theirs!r} on {row}" for text, row, mine, theirs in mismatches)
    # Rows on which we fail: Spark fails on them too (one row per expression and test run:
    # a Spark query each).
    not_failing = []
    for text, indexes in failing.items():
        if text in _ERRORS_CHECKED:
            continue
        _ERRORS_CHECKED.add(text)
        index = indexes[0]
        try:
            frame.where(f"id = {index}").selectExpr(text).collect()
        except Exception:
            continue
        not_failing.append((text, rows[index]))
    assert not_failing == []
