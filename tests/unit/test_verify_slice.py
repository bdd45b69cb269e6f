"""``verify --where``: the condition checked as ``snapshot --where`` checks it, carried to the
target as a tree (target column names, literals typed for the column they meet), and refused,
with the reason, where the two databases would not select the same rows."""

from __future__ import annotations

import pytest

from replicator.errors import UsageError
from replicator.model.catalog import Catalog, MySQLType, SourceColumn, SourceTable
from replicator.model.pipeline import (
    ColumnMapping,
    DuckDBTarget,
    MySQLSource,
    Pipeline,
    TablePipeline,
    TargetConfig,
)
from replicator.plan import build_plan
from replicator.verify.slice import table_slice

COLUMNS = (
    SourceColumn("id", MySQLType.parse("bigint"), nullable=False),
    SourceColumn("qty", MySQLType.parse("int unsigned")),
    SourceColumn("big", MySQLType.parse("bigint unsigned")),
    SourceColumn("amount", MySQLType.parse("decimal(12,2)")),
    SourceColumn("name", MySQLType.parse("varchar(20)"), charset="utf8mb4"),
    SourceColumn("day", MySQLType.parse("date")),
    SourceColumn("at", MySQLType.parse("datetime(6)")),
    SourceColumn("ts", MySQLType.parse("timestamp")),
    SourceColumn("ratio", MySQLType.parse("double")),
    SourceColumn("flag", MySQLType.parse("tinyint(1)")),
    SourceColumn("secret", MySQLType.parse("int")),
    SourceColumn("gone", MySQLType.parse("int")),
)


def _slice(where: str, dialect: str = "duckdb"):
    source = SourceTable(database="db", table="t", primary_key=("id",), columns=COLUMNS)
    table = TablePipeline(source_database="db", source_table="t", columns=(
        ColumnMapping("qty", target_column="QUANTITY"),
        ColumnMapping("secret", mask="sha256"),
        ColumnMapping("gone", exclude=True),
    ))
    pipeline = Pipeline(name="p", source=MySQLSource(),
                        target=TargetConfig(warehouse=DuckDBTarget(path=":memory:")),
                        tables=(table,))
    plan = build_plan(pipeline, Catalog(tables=(source,)))
    return table_slice(where, source, plan.tables[0], dialect)


@pytest.mark.parametrize(("where", "source", "target"), [
    ("id BETWEEN 1000 AND 2000", "id BETWEEN 1000 AND 2000",
     '"ID" BETWEEN 1000 AND 2000'),
    ("qty > 5 AND NOT (amount <= -1.5)", "qty > 5 AND NOT (amount <= -1.5)",
     '"QUANTITY" > 5 AND NOT ("AMOUNT" <= -1.5)'),
    ("id % 10 = 3 OR big IN (1, 18446744073709551615)",
     "id % 10 = 3 OR big IN (1, 18446744073709551615)",
     '"ID" % 10 = 3 OR "BIG" IN (1, 18446744073709551615)'),
    ("day >= '2026-01-01' AND at < '2026-01-02 12:00'",
     "day >= '2026-01-01' AND at < '2026-01-02 12:00:00.000000'",
     "\"DAY\" >= CAST('2026-01-01' AS DATE) AND "
     "\"AT\" < CAST('2026-01-02 12:00:00.000000' AS TIMESTAMP)"),
    # A TIMESTAMP is an instant: MySQL reads the literal in verify's UTC session, the
    # target reads it with its offset.
    ("ts BETWEEN '2026-01-01' AND '2026-02-01' OR ts IS NULL",
     "ts BETWEEN '2026-01-01 00:00:00.000000' AND '2026-02-01 00:00:00.000000' "
     "OR ts IS NULL",
     "\"TS\" BETWEEN CAST('2026-01-01 00:00:00.000000+00:00' AS TIMESTAMPTZ) AND "
     "CAST('2026-02-01 00:00:00.000000+00:00' AS TIMESTAMPTZ) OR \"TS\" IS NULL"),
])
def test_carried_to_the_target(where, source, target):
    sliced = _slice(where)
    assert (sliced.where, sliced.source_sql, sliced.target_sql) == (where, source, target)


def test_snowflake_spelling():
    sliced = _slice("ts >= '2026-01-01' AND id % 2 = 0", "snowflake")
    assert sliced.target_sql == ("\"TS\" >= CAST('2026-01-01 00:00:00.000000+00:00' AS "
                                 "TIMESTAMPTZ) AND \"ID\" % 2 = 0")


@pytest.mark.parametrize(("where", "reason"), [
    ("name = 'a'", "collation"),
    ("flag = 1", "BOOLEAN"),
    ("ratio > 0.5", "double"),
    ("secret = 5", "masked"),
    ("gone = 5", "excluded"),
    ("id > 1; DROP TABLE t", "not one condition"),  # snapshot --where's own checks
    ("id IN (SELECT 1)", "subquery"),
    ("nope > 1", "has no column nope"),
    ("ABS(id) > 5", "no functions"),
    ("id DIV 2 = 1", "cannot be evaluated alike"),
    ("id > '5'", "quoted literal compares only with a DATE"),
    ("day > 20260101", "compares a date with a numeric"),
    ("day > '2026-13-01'", "not an ISO date"),
    ("ts > '2026-01-01 00:00:00+02:00'", "without an offset"),
    ("id > 1e3", "plain digits"),
    ("at + 1 > 5", "take numbers only"),
    ("id = id", None),  # allowed: two columns of one kind
])
def test_refused_with_the_reason(where, reason):
    if reason is None:
        assert _slice(where).target_sql == '"ID" = "ID"'
        return
    with pytest.raises(UsageError) as caught:
        _slice(where)
    assert reason in caught.value.message
