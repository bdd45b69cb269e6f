"""build_plan: names, keys, columns, identifier policy, and errors that say what to fix."""

from __future__ import annotations

import dataclasses

import pytest
import sqlglot

from replicator.errors import PlanError
from replicator.model.pipeline import ColumnMapping, TablePipeline
from replicator.plan import DUCKDB, SNOWFLAKE, build_plan, offline_catalog, table_statements
from replicator.plan.identifiers import qualified_name, quote_identifier
from replicator.plan.program import FILE_PLACEHOLDER
from replicator.plan.statements.ddl import add_columns
from replicator.plan.statements.merging import merge
from tests.fixtures.sink_sample import CATALOG, sample_pipeline


def with_tables(pipeline, *tables):
    return dataclasses.replace(pipeline, tables=tables)


def test_quote_identifier_escapes_quotes_and_keeps_everything_else():
    assert quote_identifier('a "b" c') == '"a ""b"" c"'
    assert quote_identifier("select") == '"select"'
    assert qualified_name(["DB", "Mixed Case", "t"]) == '"DB"."Mixed Case"."t"'
    with pytest.raises(ValueError):
        quote_identifier("")


def test_upper_case_policy_folds_every_target_name():
    plan = build_plan(sample_pipeline("snowflake"), CATALOG)
    table = plan.table("shop.Order Items")
    assert table.target_parts == ("ANALYTICS", "RAW", "ORDER ITEMS")
    names = [c.target_column for c in table.data_columns]
    assert names[:4] == ["ID", "SELECT", "MIXED CASE", 'QUOTE"COL']
    assert "RATIO PCT" in names  # renamed, then folded
    assert "PW" not in names and table.excluded == ("pw",)
    assert table.source_key == ("id",) and table.key_origin == "primary key"


def test_preserve_policy_keeps_names():
    plan = build_plan(sample_pipeline("duckdb", identifier_case="preserve"), CATALOG)
    table = plan.table("shop.Order Items")
    assert table.target_table == "Order Items"
    assert [c.target_column for c in table.data_columns][:3] == ["id", "select", "Mixed Case"]
    assert table.state_table == "_REPLICATOR_STATE"


def test_masked_column_becomes_varchar_and_metadata_and_soft_delete_columns_are_added():
    plan = build_plan(sample_pipeline("snowflake"), CATALOG)
    secret = plan.table("shop.Order Items").column("SECRET")
    assert (secret.mask, SNOWFLAKE.type_name(secret.target_type)) == ("sha256", "VARCHAR")
    regions = plan.table("shop.regions")
    assert [c.target_column for c in regions.columns if c.role != "data"] == [
        "_OP", "_TS_MS", "_DELETED", "_DELETED_AT"
    ]
    assert regions.target_key == ("REGION", "ID")


def test_a_table_without_key_asks_to_declare_one():
    catalog = dataclasses.replace(
        CATALOG,
        tables=tuple(dataclasses.replace(t, primary_key=()) for t in CATALOG.tables),
    )
    pipeline = sample_pipeline()
    with pytest.raises(PlanError) as caught:
        build_plan(with_tables(pipeline, pipeline.tables[0]), catalog)
    assert "no primary key" in caught.value.message and "key:" in caught.value.hint
    declared = dataclasses.replace(pipeline.tables[0], key=("ID",))  # MySQL names: any case
    plan = build_plan(with_tables(pipeline, declared), catalog)
    assert plan.tables[0].source_key == ("id",) and plan.tables[0].key_origin == "declared"


def test_every_problem_is_reported_at_once():
    pipeline = sample_pipeline()
    bad = dataclasses.replace(
        pipeline.tables[0],
        columns=(
            ColumnMapping("nope", mask="redact"),
            # a pin (source_type only) of a column gone from MySQL is no problem (issue 29)
            ColumnMapping("renamed_away", source_type="int"),
            ColumnMapping("select", target_column="mixed case"),  # collides after folding
            ColumnMapping("amount", target_type="GEOGRAPHY"),
            ColumnMapping("id", exclude=True),
        ),
    )
    missing = TablePipeline(source_database="shop", source_table="missing")
    with pytest.raises(PlanError) as caught:
        build_plan(with_tables(pipeline, bad, missing), CATALOG)
    message = caught.value.message
    assert message.startswith("5 problems")
    for expected in ("'nope'", "both land in target column", "GEOGRAPHY", "cannot be excluded",
                     "shop.missing"):
        assert expected in message
    assert "renamed_away" not in message


def test_reserved_target_column_prefix_is_rejected():
    pipeline = sample_pipeline()
    bad = dataclasses.replace(
        pipeline.tables[1], columns=(ColumnMapping("name", target_column="_replicator_op"),)
    )
    with pytest.raises(PlanError, match="reserves"):
        build_plan(with_tables(pipeline, bad), CATALOG)


def test_bad_filter_is_a_plan_error():
    pipeline = sample_pipeline()
    bad = dataclasses.replace(pipeline.tables[1], filter="no_such_column > 1")
    with pytest.raises(PlanError, match="no_such_column"):
        build_plan(with_tables(pipeline, bad), CATALOG)


def test_offline_catalog_needs_source_types():
    pipeline = sample_pipeline()
    declared = TablePipeline(
        source_database="shop", source_table="t", key=("id",),
        columns=(ColumnMapping("id", source_type="int"), ColumnMapping("name")),
    )
    with pytest.raises(PlanError) as caught:
        offline_catalog(with_tables(pipeline, declared))
    assert "'name'" in caught.value.message and "--offline" in caught.value.hint
    fixed = dataclasses.replace(
        declared, columns=(ColumnMapping("id", source_type="int"),
                           ColumnMapping("name", source_type="varchar(5)"))
    )
    plan = build_plan(with_tables(pipeline, fixed), offline_catalog(with_tables(pipeline, fixed)))
    assert not plan.live_catalog
    assert [c.origin for c in plan.tables[0].data_columns] == ["yaml", "yaml"]


@pytest.mark.parametrize("dialect", [SNOWFLAKE, DUCKDB], ids=lambda d: d.name)
def test_every_statement_parses_in_its_dialect(dialect):
    plan = build_plan(sample_pipeline(dialect.name), CATALOG)
    for table in plan.tables:
        for statement in table_statements(table, dialect):
            assert sqlglot.parse_one(statement.sql, read=dialect.name) is not None


def test_merge_differences_are_dialect_data():
    plan = build_plan(sample_pipeline("snowflake"), CATALOG)
    regions = plan.table("shop.regions")
    snowflake_merge, duckdb_merge = merge(regions, SNOWFLAKE), merge(regions, DUCKDB)
    assert '"tgt"."_DELETED" = TRUE' in snowflake_merge  # Snowflake: qualified SET names
    assert '\n    "_DELETED" = TRUE' in duckdb_merge  # DuckDB: unqualified
    assert "QUALIFY ROW_NUMBER() OVER (PARTITION BY \"REGION\", \"ID\"" in duckdb_merge
    assert "WHEN MATCHED AND \"src\".\"_REPLICATOR_OP\" = 'd' THEN DELETE" not in duckdb_merge
    items = plan.table("shop.Order Items")
    assert "THEN DELETE" in merge(items, DUCKDB)
    assert 'PARSE_JSON("DOC") AS "DOC"' in merge(items, SNOWFLAKE)
    assert 'CAST("DOC" AS JSON) AS "DOC"' in merge(items, DUCKDB)


def test_no_value_ever_enters_sql_text():
    plan = build_plan(sample_pipeline("snowflake"), CATALOG)
    for table in plan.tables:
        for dialect in (SNOWFLAKE, DUCKDB):
            for statement in table_statements(table, dialect):
                literals = {
                    node.this for node in sqlglot.parse_one(statement.sql, read=dialect.name)
                    .find_all(sqlglot.exp.Literal)
                    # NUMBER(38,10), and LIMIT 0 (reading a table's columns)
                    if node.find_ancestor(sqlglot.exp.DataType, sqlglot.exp.Limit) is None
                }
                # Only replicator's own constants: the delete op and ROW_NUMBER() = 1, and
                # where a batch's Parquet file goes (a path of the sink's, never a value).
                assert literals <= {"d", "1", f"file://{FILE_PLACEHOLDER}"}, (
                    statement.purpose, literals)


def test_one_alter_per_added_column():
    plan = build_plan(sample_pipeline("snowflake"), CATALOG)
    regions = plan.table("shop.regions")
    statements = add_columns(regions, regions.data_columns[2:], DUCKDB)
    assert statements == [
        'ALTER TABLE "RAW"."REGION STOCK" ADD COLUMN "NAME" VARCHAR',
        'ALTER TABLE "RAW"."REGION STOCK" ADD COLUMN "QTY" INTEGER',
    ]
