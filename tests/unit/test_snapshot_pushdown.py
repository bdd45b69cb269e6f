"""What part of a row filter is pushed into the snapshot's chunk SELECT, and what is not.

The rule (plan.pushdown): the MySQL predicate never drops a row the Spark filter keeps. The
differential test against MariaDB is tests/integration/test_snapshot_pushdown.py.
"""

from __future__ import annotations

import pytest

from replicator.model.catalog import Catalog, MySQLType, SourceColumn, SourceTable
from replicator.model.pipeline import (
    ColumnMapping,
    DuckDBTarget,
    MySQLSource,
    Pipeline,
    TablePipeline,
    TargetConfig,
)
from replicator.plan import build_plan, render_sql
from replicator.plan.dialects import DUCKDB
from replicator.plan.expressions.spark_types import spark_type_of
from replicator.plan.pushdown import pushdown, snapshot_predicate, table_predicate
from replicator.source.snapshot import Chunk, chunk_select, chunk_select_preview

COLUMNS = (
    SourceColumn("id", MySQLType.parse("bigint"), nullable=False),
    SourceColumn("qty", MySQLType.parse("int unsigned")),
    SourceColumn("big", MySQLType.parse("bigint unsigned")),
    SourceColumn("amount", MySQLType.parse("decimal(12,2)")),
    SourceColumn("wide", MySQLType.parse("decimal(38,0)")),
    SourceColumn("name", MySQLType.parse("varchar(20)"), charset="utf8mb4"),
    SourceColumn("note", MySQLType.parse("text"), charset="utf8mb3"),
    SourceColumn("code", MySQLType.parse("char(3)"), charset="utf8mb4"),
    SourceColumn("legacy", MySQLType.parse("varchar(20)"), charset="latin1"),
    SourceColumn("status", MySQLType.parse("enum('a','b')"), charset="utf8mb4"),
    SourceColumn("day", MySQLType.parse("date")),
    SourceColumn("at", MySQLType.parse("datetime(6)")),
    SourceColumn("ts", MySQLType.parse("timestamp")),
    SourceColumn("ratio", MySQLType.parse("double")),
    SourceColumn("flag", MySQLType.parse("tinyint(1)")),
    SourceColumn("yr", MySQLType.parse("year")),
    SourceColumn("bits", MySQLType.parse("bit(8)")),
)
INPUTS = {c.name: spark_type_of(c.mysql_type) for c in COLUMNS}


def pushed(text: str) -> str | None:
    predicate = pushdown(text, INPUTS, COLUMNS)
    return None if predicate is None else predicate.sql(dialect="mysql")


@pytest.mark.parametrize(("text", "expected"), [
    ("id > 100", "(`id` > 100)"),
    ("100 < id", "(`id` > 100)"),  # the column on the right: the operator flips
    ("amount >= 10.5", "(`amount` >= 10.5)"),
    ("qty <> -3", "(`qty` <> -3)"),
    ("big <=> 18446744073709551615", "(`big` <=> 18446744073709551615)"),
    ("id BETWEEN 1 AND 10", "(`id` >= 1) AND (`id` <= 10)"),
    ("id IN (1, 2, 3)", "(`id` IN (1, 2, 3))"),
    ("amount IN (1, 2.5)", "(`amount` IN (1, 2.5))"),
    ("NOT id IN (1, 2)", "(NOT (`id` IN (1, 2)))"),
    ("NOT (id = 3 OR amount > 1)", "(NOT ((`id` = 3) OR (`amount` > 1)))"),
    ("id IS NULL OR amount IS NOT NULL", "(`id` IS NULL) OR (NOT (`amount` IS NULL))"),
    # strings: bytes of UTF-8 text, no collation (no case folding, no PAD SPACE)
    ("name = 'Bob'", "(CAST(`name` AS BINARY) = x'426f62')"),
    ("note < 'é'", "(CAST(`note` AS BINARY) < x'c3a9')"),
    ("name IN ('a', 'b ')", "(CAST(`name` AS BINARY) IN (x'61', x'6220'))"),
    ("name IS NULL", "(`name` IS NULL)"),
    # temporal: the literal as Spark parses it, the column compared in a UTC session
    ("day >= '2024-01-01 12:00'", "(`day` >= '2024-01-01')"),
    ("at < '2025-01-01'", "(`at` < '2025-01-01 00:00:00.000000')"),
    ("ts > TIMESTAMP '2024-03-01 10:00:00.5'", "(`ts` > '2024-03-01 10:00:00.500000')"),
    ("day IS NOT NULL", "(NOT (`day` IS NULL))"),
    # a zero date: NULL to Spark, a value to MySQL, which refines Spark's NULL; under NOT too
    ("NOT (day > '2024-01-01')", "(NOT (`day` > '2024-01-01'))"),
    # an AND keeps its safe conjuncts: a weaker predicate, the transform step does the rest
    ("upper(name) = 'X' AND id > -5", "(`id` > -5)"),
    ("(id > 1 OR ratio > 1) AND day < DATE '2020-01-01'", "(`day` < '2020-01-01')"),
    ("id > 1 AND (qty = 2 OR amount < 0)", "(`id` > 1) AND ((`qty` = 2) OR (`amount` < 0))"),
])
def test_pushed_down(text, expected):
    assert pushed(text) == expected


@pytest.mark.parametrize("text", [
    "code = 'x'",  # CHAR: trailing spaces
    "legacy = 'x'",  # latin1: its bytes are not the UTF-8 the literal is
    "status = 'a'",  # ENUM
    "name LIKE 'a%'",
    "lower(name) = 'bob'",
    "id > 1e3",  # a DOUBLE literal
    "ratio > 1.5",  # a DOUBLE column
    "flag",  # TINYINT(1) read as BOOLEAN: 2 is TRUE to Spark, not = TRUE to MySQL
    "flag = true",
    "yr > 2000",
    "bits > 1",
    "id = NULL",
    "id IN (1, NULL)",
    "id > qty",  # two columns
    "id + 1 > 5",
    "wide > 0.5",  # Spark's common type DECIMAL(39,1) is capped at 38: it rounds the column
    "amount > 0.1234567890123456789012345678901",  # past MySQL's 30 decimals
    "day IS NULL",  # a zero date is NULL to Spark, a value to MySQL
    "ts > '1960-01-01'",  # outside TIMESTAMP's range
    "day > '2024-13-45'",  # no date: Spark compares with NULL
    "day < TIMESTAMP '2024-01-01 10:00:00'",  # Spark compares the DATE as a TIMESTAMP
    "id > 1 OR name LIKE 'a%'",  # an OR with an unsafe branch
    "NOT (id > 1 AND name LIKE 'a%')",  # NOT of an inexact part
    "NOT (day IS NOT NULL)",  # IS NOT NULL of a date is only a superset: not under NOT
    "missing > 1",  # not a column: the filter does not compile, nothing is pushed
])
def test_not_pushed_down(text):
    assert pushed(text) is None


def _plan(*tables: TablePipeline, columns=COLUMNS, key=("id",)):
    source = SourceTable(database="db", table="t", primary_key=key, columns=columns)
    pipeline = Pipeline(name="p", source=MySQLSource(),
                        target=TargetConfig(warehouse=DuckDBTarget(path=":memory:")),
                        tables=tables)
    catalog = Catalog(tables=(source,))
    return build_plan(pipeline, catalog), catalog, source


def _table(**settings) -> TablePipeline:
    return TablePipeline(source_database="db", source_table="t", **settings)


def test_a_merged_table_with_a_masked_key_reads_every_row():
    # A re-copy could not delete the target rows it no longer reads (remove_absent_rows
    # compares by the unmasked key), so such a table gets no pushdown.
    plan, _, source = _plan(_table(filter="qty > 5",
                                   columns=(ColumnMapping("id", mask="sha256"),)))
    assert table_predicate(plan.tables[0], source) is None
    plan, _, source = _plan(_table(filter="qty > 5", mode="changelog",
                                   columns=(ColumnMapping("id", mask="sha256"),)))
    assert snapshot_predicate(plan.tables, source) == "(`qty` > 5)"


def test_readers_of_one_source_table_share_one_predicate():
    plan, _, source = _plan(_table(filter="qty > 5"),
                            _table(filter="amount < 1", target_table="t2"))
    assert snapshot_predicate(plan.tables, source) == "(`qty` > 5) OR (`amount` < 1)"
    plan, _, source = _plan(_table(filter="qty > 5"), _table(target_table="t2"))
    assert snapshot_predicate(plan.tables, source) is None  # the second needs every row


def test_the_chunk_select_puts_the_predicate_beside_the_key_range():
    source = SourceTable("db", "t", COLUMNS[:2], ("id",))
    chunk = Chunk("db.t", 1, ("id",), (10,), (20,))
    assert chunk_select(source, chunk, str, "(`qty` > 5) OR (`qty` IS NULL)") == (
        "SELECT `id`, `qty` FROM `db`.`t` WHERE ((`qty` > 5) OR (`qty` IS NULL))"
        " AND `id` > 10 AND `id` <= 20 ORDER BY `id`")
    assert chunk_select(source, Chunk("db.t", 0, ("id",)), str, None) == (
        "SELECT `id`, `qty` FROM `db`.`t` ORDER BY `id`")


def test_plan_prints_the_chunk_select_run_executes():
    plan, catalog, _ = _plan(_table(filter="qty > 5 AND lower(name) = 'x'"),
                             columns=COLUMNS[:6])
    table = plan.tables[0]
    preview = chunk_select_preview(plan.tables, table, catalog)
    assert preview is not None
    select, predicate = preview
    assert predicate == "(`qty` > 5)"
    assert "WHERE ((`qty` > 5)) AND `id` > ? AND `id` <= ? ORDER BY `id`" in select
    sql = render_sql(table, DUCKDB, None, preview)
    assert f"--   {select}\n" in sql
    assert "pushed down: (`qty` > 5); the transform step applies the whole filter" in sql
    plan, catalog, _ = _plan(_table(filter="lower(name) = 'x'"), columns=COLUMNS[:6])
    sql = render_sql(plan.tables[0], DUCKDB, None,
                     chunk_select_preview(plan.tables, plan.tables[0], catalog))
    assert "(no filter is pushed down" in sql
