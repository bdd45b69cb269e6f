"""Every example pipeline's statements run on DuckDB and on fakesnow (Snowflake SQL)."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest

from replicator.config import load_pipeline
from replicator.model.pipeline import DuckDBTarget, SnowflakeTarget
from replicator.plan import SNOWFLAKE, build_plan, offline_catalog
from replicator.plan.statements.names import target_name
from replicator.sink import open_sink
from tests.fixtures.row_transforms import stage_events
from tests.fixtures.sink_sample import outbox_sample_events, sample_events

ROOT = Path(__file__).resolve().parents[2]
PIPELINES = sorted((ROOT / "pipelines").glob("*.yaml"))


def retarget(pipeline, warehouse):
    return dataclasses.replace(
        pipeline, target=dataclasses.replace(pipeline.target, warehouse=warehouse)
    )


def exercise(pipeline, count_rows):
    catalog = offline_catalog(pipeline)
    plan = build_plan(pipeline, catalog)
    sink = open_sink(pipeline, plan)
    try:
        sink.prepare()
        sink.prepare()  # idempotent
        for table in plan.tables:
            # A routed table (`sources:`) is planned offline from one placeholder table.
            source = (catalog.table("", table.source_name) if table.routed
                      else catalog.table(table.source_database, table.source_table))
            if table.outbox is not None:
                # Outbox rows of the route's type, flattened by stage_batch as the engine
                # does: 4 events, keys 1, 2, 1, then 2 deleted by `delete_when`.
                events = outbox_sample_events(table)
            else:  # a routed table's _SOURCE_TABLE comes from the batch's table column
                events = sample_events(table, source)
            staged = stage_events(table, events)
            assert not sink.apply(table, 1, {"file": "f", "pos": 1}, staged).skipped
            assert sink.apply(table, 1, {"file": "f", "pos": 1}, staged).skipped
            # sample_events: 4 changes leaving 1 row; a changelog keeps all 4, scd2 keeps the
            # deleted row's ended version beside the current one.
            assert count_rows(sink, table) == {"changelog": 4, "scd2": 2}.get(table.mode, 1)
            assert sink.last_applied(table)["batch_id"] == 1
    finally:
        sink.close()


@pytest.mark.parametrize("pipeline_file", PIPELINES, ids=lambda p: p.stem)
def test_duckdb_sql_of_every_example_runs(pipeline_file, tmp_path):
    pipeline = load_pipeline(pipeline_file)
    schema = getattr(pipeline.target.warehouse, "schema", "main")
    pipeline = retarget(pipeline, DuckDBTarget(path=str(tmp_path / "w.duckdb"), schema=schema))

    def count_rows(sink, table):
        from replicator.plan import DUCKDB

        return sink.connection.execute(f"SELECT count(*) FROM {target_name(table, DUCKDB)}").fetchone()[0]

    exercise(pipeline, count_rows)


@pytest.mark.parametrize("pipeline_file", PIPELINES, ids=lambda p: p.stem)
def test_snowflake_sql_of_every_example_runs_on_fakesnow(pipeline_file):
    fakesnow = pytest.importorskip("fakesnow")
    pipeline = load_pipeline(pipeline_file)
    warehouse = pipeline.target.warehouse
    # A DuckDB example's schema `main` is DuckDB's built-in schema, which fakesnow (DuckDB
    # underneath, case-blind) would also find for "MAIN": the staging stage's lookup then
    # misses it. A Snowflake schema of its own keeps the test about the sink.
    schema = "RAW" if isinstance(warehouse, DuckDBTarget) else warehouse.schema
    target = SnowflakeTarget(
        database=getattr(warehouse, "database", "ANALYTICS"), schema=schema,
        account="fake", user="fake", password="fake",
    )

    def count_rows(sink, table):
        cursor = sink.connection.cursor()
        cursor.execute(f"SELECT count(*) FROM {target_name(table, SNOWFLAKE)}")
        return cursor.fetchone()[0]

    with fakesnow.patch(create_database_on_connect=True, create_schema_on_connect=True):
        exercise(retarget(pipeline, target), count_rows)
