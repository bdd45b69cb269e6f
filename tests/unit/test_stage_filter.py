"""``stage_filter``: the filters Snowflake decides exactly as Spark, rendered over the raw
table; everything else is None (the plan refuses it, R311). The rows each rendering keeps
are compared with the driver's (DuckDB's, Spark-differential) in
tests/integration/test_snowflake_external_stage.py."""

from __future__ import annotations

import pytest

from replicator.model.catalog import Catalog, MySQLType, SourceColumn, SourceTable
from replicator.model.pipeline import (
    ColumnMapping,
    MySQLSource,
    Pipeline,
    SnowflakeTarget,
    TablePipeline,
    TargetConfig,
)
from replicator.plan import build_plan
from replicator.plan.statements.stage_filter import filter_sql

COLUMNS = [("id", "bigint(20) unsigned"), ("n", "int(11)"), ("name", "varchar(20)"),
           ("amount", "decimal(38,10)"), ("ratio", "double"), ("active", "tinyint(1)"),
           ("secret", "varchar(20)"), ("code", "char(3)")]
CATALOG = Catalog(tables=(SourceTable(database="shop", table="t", primary_key=("id",),
                                      columns=tuple(
    SourceColumn(name=c, mysql_type=MySQLType.parse(t), nullable=True, ordinal=i)
    for i, (c, t) in enumerate(COLUMNS, start=1))),))


def _rendered(text: str) -> tuple[str | None, list[object]]:
    table = TablePipeline(source_database="shop", source_table="t", filter=text,
                          columns=(ColumnMapping("secret", mask="md5"),))
    pipeline = Pipeline(name="x", source=MySQLSource(), tables=(table,),
                        target=TargetConfig(warehouse=SnowflakeTarget(
                            database="D", schema="RAW", account="a")))
    bound: list[object] = []

    def bind(value: object) -> str:
        bound.append(value)
        return "?"

    return filter_sql(build_plan(pipeline, CATALOG).tables[0], bind), bound


def test_numbers_strings_and_logic_render_with_string_literals_bound():
    sql, bound = _rendered("(n > -3 AND name IN ('it\\'s', 'b')) OR NOT (id BETWEEN 1 AND 2.5)"
                           " OR amount <= 0.0000000001 OR name IS NULL OR 7 < n")
    assert sql == ('((((((("n" > -3) AND ("name" IN (?, ?)))) OR (NOT (("id" BETWEEN 1 AND '
                   '2.5)))) OR ("amount" <= 0.0000000001)) OR ("name" IS NULL)) OR ("n" > 7))')
    assert bound == ["it's", "b"]


@pytest.mark.parametrize("text", [
    "upper(name) = 'X'",  # a function: DuckDB's translation only
    "ratio > 1",  # a DOUBLE
    "amount > 0.00000000005",  # Spark's common type would round (39 digits)
    "n = 1e3",  # a DOUBLE literal
    "active",  # a TINYINT(1): BOOLEAN in the raw table, not a comparison
    "secret = 'x'",  # masked: the raw table holds the value, the target the hash
    "code = 'abc'",  # CHAR: not in the subset
    "n + 1 > 2",
    "n <=> 2",
])
def test_what_snowflake_would_decide_otherwise_is_not_rendered(text):
    assert _rendered(text) == (None, [])
