"""Filters and computed columns: the Snowflake rendering (``plan.transpile.snowflake``, what
the external-stage path runs) against a real Spark session, on fakesnow.

The expressions of the DuckDB differential test (tests/integration/
test_transforms_spark_differential.py) plus awkward cases (string/number comparisons,
overflow at the int and bigint bounds, division by zero, 'None' and empty strings, unicode
case, decimal scales, dates) are rendered for Snowflake and run by fakesnow over a table
typed as the raw table types it (NUMBER(10,0), NUMBER(10,2), FLOAT, VARCHAR, DATE,
TIMESTAMP_NTZ, BOOLEAN), and by Spark's ``selectExpr`` over the same rows. Values must be
equal with Spark's types (Decimal('1.50') is not Decimal('1.5')), and a row fakesnow fails
must fail in Spark. What has no exact Snowflake form is refused (``SNOWFLAKE_REFUSED``,
exactly these). fakesnow is DuckDB: where real Snowflake's documented semantics differ, the
rendering avoids relying on either (docs/snowflake.md, "Spark SQL in Snowflake").
"""

from __future__ import annotations

import datetime as dt
import uuid
from decimal import Decimal

import pytest
from hypothesis import HealthCheck, Phase, given, settings
from hypothesis import strategies as st

from replicator.plan.expressions.checker import check_expression
from replicator.plan.transpile.errors import Untranslatable
from replicator.plan.transpile.snowflake import translate_snowflake
from tests.integration.test_transforms_spark_differential import (
    _EDGES,
    COLUMNS,
    EXPRESSIONS,
    SPARK_SCHEMA,
    _rows,
    _same,
    _with_nulls,
)

pytestmark = [pytest.mark.spark]

AWKWARD = [
    "cast(i as string) = s", "s < cast(d as string)", "s = 'None'", "s = ''", "s IS NULL OR s = ''",
    "i * 2147483647", "i + 1", "-i", "abs(i)", "l * 2", "l + l", "-l", "abs(l)",
    "cast(l as int)", "cast(d * 100000000 as int)", "d * e * e", "d + 0.001",
    "i / 0", "d % 0", "try_divide(i, 0)", "f / 0", "mod(l, j)", "pmod(l, j)",
    "cast(d as decimal(4,1))", "cast(e as decimal(38,10))", "cast(i as decimal(3,0))",
    "cast(flag as int) + i", "cast(i as boolean)", "cast(f as bigint)", "ceil(f * 1e12)",
    "s LIKE '%ß%'", "s LIKE 'İ%'", "s = 'ß'", "concat(s, d, dt, flag)",
    "dt = '2024-02-29'", "dt BETWEEN '2000-01-01' AND '2100-12-31'", "date_add(dt, i)",
    "datediff(ts, '2024-01-01')", "year(ts) * 10000 + month(ts) * 100 + day(ts)",
    "to_date(ts) = dt", "second(ts) + minute(ts)", "replace(s, '', 'x')",
    "substring(s, 0, j)", "left(s, -1)", "nullif(s, '')", "i <=> NULL", "NULL = i",
    "cast(l as decimal(20,0)) * 10", "ts < dt", "round(d, -1)", "cast(e as decimal(19,4))",
    "cast(cast(e as decimal(38,10)) as string)",
]
CANDIDATES = [*EXPRESSIONS, *AWKWARD]

# No exact Snowflake form, or none fakesnow can prove (the renderer's docstring says which).
SNOWFLAKE_REFUSED = sorted([
    "i div j", "d / e", "d / 3", "e / d", "try_divide(d, e)", "d * e * e",
    "datediff(ts, '2024-01-01')", "greatest(i, j, 0)", "least(d, e)",
    "cast(s as int)", "try_cast(s as int)", "cast(s as bigint)", "cast(ts as string)",
    "try_cast(s as boolean)", "cast(s as binary)",
    "concat_ws('|', s, t, i)", "upper(s)", "lower(s)", "upper(concat(s, i))",
    "length(b)", "regexp_replace(s, '[0-9]+', '#')", "regexp_replace(s, '(a)(b)?', '<$1$2>')",
    "lpad(s, j, 'xy')", "rpad(s, j, 'xy')", "lpad(s, 8)", "bround(d, 1)",
    "date_trunc('month', ts)", "date_trunc('year', dt)", "date_trunc('week', ts)",
    "date_trunc('hour', ts)", "date_trunc('quarter', ts)",
    "date_format(ts, 'yyyy-MM-dd HH:mm:ss.SSS')", "date_format(dt, 'dd/MM/yy EEE MMM a h')",
    "date_format(ts, 'EEEE d MMMM yyyy, H')", "md5(b)", "lower(s) = 'abc' OR s IS NULL",
    "upper(s) LIKE 'A%'", "cast(cast(e as decimal(38,10)) as string)",
])

SNOWFLAKE_TYPES = {"i": "NUMBER(10,0)", "j": "NUMBER(10,0)", "l": "NUMBER(19,0)",
                   "d": "NUMBER(10,2)", "e": "NUMBER(20,4)", "f": "FLOAT", "s": "VARCHAR",
                   "t": "VARCHAR", "dt": "DATE", "ts": "TIMESTAMP_NTZ", "flag": "BOOLEAN"}
READ = {name: t for name, t in COLUMNS.items() if name in SNOWFLAKE_TYPES}


def _translated() -> tuple[dict[str, str], list[str]]:
    rendered, refused = {}, []
    for text in CANDIDATES:
        try:
            check_expression(text, COLUMNS)
        except Exception:
            continue  # what Spark's analyzer refuses is validate's business, not this test's
        try:
            rendered[text] = translate_snowflake(text, COLUMNS, lambda name: f'"{name}"')[0]
        except Untranslatable:
            refused.append(text)
    return rendered, sorted(refused)


SQL, REFUSED = _translated()


def test_exactly_the_listed_constructs_are_refused() -> None:
    assert REFUSED == SNOWFLAKE_REFUSED


_ERRORS_CHECKED: set[str] = set()


class Failed(Exception):
    """fakesnow failed the expression on this row."""


@pytest.fixture(scope="module")
def snowflake(fakesnow_server):
    database = f"X_{uuid.uuid4().hex[:8].upper()}"
    with fakesnow_server.connect("", "") as connection:
        connection.cursor().execute(f"CREATE DATABASE {database}")
        connection.cursor().execute(f"CREATE SCHEMA {database}.RAW")
    connection = fakesnow_server.connect(database, "RAW", paramstyle="qmark")
    yield connection
    connection.close()


def _snowflake_values(connection, rows: list[dict]) -> dict[str, list]:
    """Each rendered expression's value per row as fakesnow computes it (Failed where it
    fails), from a table of the rows typed as the raw table types them."""
    table = f"R_{uuid.uuid4().hex[:8].upper()}"
    cursor = connection.cursor()
    columns = ", ".join(f'"{name}" {sql_type}' for name, sql_type in SNOWFLAKE_TYPES.items())
    cursor.execute(f'CREATE TABLE {table} ("id" NUMBER(10,0), {columns})')
    names = ["id", *SNOWFLAKE_TYPES]
    # Dates, timestamps and decimals bound as text and cast by the statement (the
    # connector binds a date as epoch milliseconds, which fakesnow reads only up to 9999).
    casts = ", ".join(f"CAST(? AS {sql_type})" for sql_type in SNOWFLAKE_TYPES.values())
    cursor.executemany(
        f"INSERT INTO {table} ({', '.join(chr(34) + n + chr(34) for n in names)}) "
        f"SELECT ?, {casts}",
        [[index, *[_bound(row[name]) for name in SNOWFLAKE_TYPES]]
         for index, row in enumerate(rows)])
    out = {}
    for text, sql in SQL.items():
        values = _values(cursor, f'SELECT "id", {sql} FROM {table}', list(range(len(rows))))
        out[text] = [Failed if values[i] is Failed else _python(values[i], text)
                     for i in range(len(rows))]
    return out


def _values(cursor, select: str, ids: list[int]) -> dict[int, object]:
    """The select's value per row id, Failed for the rows it fails on (found by halving
    the ids: one query for the rows that do not fail)."""
    try:
        cursor.execute(f'{select} WHERE "id" IN ({", ".join(map(str, ids))})')
        return dict(cursor.fetchall())
    except Exception:
        if len(ids) == 1:
            return {ids[0]: Failed}
    half = len(ids) // 2
    return {**_values(cursor, select, ids[:half]), **_values(cursor, select, ids[half:])}


def _bound(value):
    if isinstance(value, dt.datetime):
        return value.isoformat(sep=" ")
    if isinstance(value, dt.date | Decimal):
        return str(value)
    return value


def _python(value, text: str):
    """fakesnow's value as Spark's Python value of the expression's type (NUMBER(10,0) comes
    back as a Decimal, Spark's int as an int)."""
    kind = check_expression(text, COLUMNS).kind
    if value is None:
        return None
    if kind in ("int", "bigint"):
        assert Decimal(value) == int(value)
        return int(value)
    if kind == "double":
        return float(value)
    if kind == "decimal":
        return Decimal(value)
    if kind == "timestamp" and isinstance(value, dt.datetime):
        return value.replace(tzinfo=None)
    return value


def _spark_columns(frame, selects: list[str], size: int) -> list[list]:
    """Spark's values of each select; where a select fails, its first error line (found by
    halving the selects: one Spark query each is slow)."""
    try:
        records = sorted(frame.selectExpr("id", *selects).collect(), key=lambda r: r[0])
        return [[r[n + 1] for r in records] for n in range(len(selects))]
    except Exception as exc:
        if len(selects) == 1:
            return [[f"spark failed: {str(exc).splitlines()[0]}"] * size]
    half = len(selects) // 2
    return _spark_columns(frame, selects[:half], size) + _spark_columns(frame, selects[half:], size)


def _check_against_spark(spark, connection, rows: list[dict]) -> None:
    ours = _snowflake_values(connection, rows)
    texts = list(SQL)
    failing = {text: [i for i, v in enumerate(values) if v is Failed] for text, values in ours.items()}
    frame = spark.createDataFrame(
        [(n, *[row[c] for c in COLUMNS]) for n, row in enumerate(rows)], SPARK_SCHEMA)
    selects = []
    for n, text in enumerate(texts):
        bad = failing[text]
        guard = f"CASE WHEN id NOT IN ({', '.join(map(str, bad))}) THEN {text} END" if bad else text
        selects.append(f"{guard} AS c{n}")
    columns = _spark_columns(frame, selects, len(rows))
    mismatches = []
    for n, text in enumerate(texts):
        for index, theirs in enumerate(columns[n]):
            mine = ours[text][index]
            if mine is not Failed and not _same(mine, theirs):
                mismatches.append((text, rows[index], mine, theirs))
                break
    assert mismatches == [], "\n".join(
        f"{text}: snowflake {mine!r} spark {theirs!r} on {row}" for text, row, mine, theirs in mismatches)
    # A row fakesnow fails on: Spark fails on it too (one row per expression and test
    # session: a Spark query each).
    not_failing = []
    for text, indexes in failing.items():
        if not indexes or text in _ERRORS_CHECKED:
            continue
        _ERRORS_CHECKED.add(text)
        try:
            frame.where(f"id = {indexes[0]}").selectExpr(text).collect()
        except Exception:
            continue
        not_failing.append((text, rows[indexes[0]]))
    assert not_failing == []


BOUNDS = {"i": 2**31 - 1, "j": 0, "l": 2**63 - 1, "d": Decimal("99999999.99"),
          "e": Decimal("-999999999999999.9999"), "f": 1e300, "s": "ß", "t": "",
          "dt": dt.date(9999, 12, 31), "ts": dt.datetime(1900, 1, 1, 0, 0, 0, 1), "b": b"",
          "flag": False}


def test_awkward_rows_give_sparks_values_and_errors(spark, snowflake) -> None:
    """Bounds, zero divisors, 'None', empty and unicode strings, and the bytes Spark's casts
    trim, all on one run."""
    lows = {**BOUNDS, "i": -(2**31), "l": -(2**63), "j": -1, "s": "None", "t": "İx",
            "f": -0.0, "dt": dt.date(1000, 1, 1), "flag": True}
    nulls = {name: None for name in BOUNDS}
    edges = [{**BOUNDS, "i": 1, "l": 3, "f": 0.5, "s": text, "t": text[::-1]} for text in _EDGES]
    _check_against_spark(spark, snowflake, [BOUNDS, lows, nulls, *edges])


@settings(max_examples=1, deadline=None, suppress_health_check=list(HealthCheck),
          phases=[Phase.explicit, Phase.reuse, Phase.generate])  # no shrinking: a Spark query each
@given(rows=st.lists(_rows, min_size=12, max_size=20), data=st.data())
def test_values_and_errors_are_sparks(spark, snowflake, rows, data) -> None:
    _check_against_spark(spark, snowflake, _with_nulls(rows, data))
