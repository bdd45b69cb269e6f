"""The Snowflake sink's SQL on fakesnow: every statement runs and the target converges exactly."""

from __future__ import annotations

import datetime as dt

import pytest

from replicator.plan import SNOWFLAKE, build_plan
from replicator.plan.statements import target_name
from replicator.sink import open_sink
from tests.fixtures.sink_sample import (
    CATALOG,
    normalize,
    parse_json_columns,
    run_scenario,
    sample_pipeline,
    scenario,
)

fakesnow = pytest.importorskip("fakesnow")


def read_target(connection, plan, target_table):
    table = plan.table(target_table)
    key = ", ".join(f'"{c}"' for c in table.target_key)
    cursor = connection.cursor()
    cursor.execute(f"SELECT * FROM {target_name(table, SNOWFLAKE)} ORDER BY {key}")
    names = [d[0] for d in cursor.description]
    rows = [dict(zip(names, map(normalize, row), strict=True)) for row in cursor.fetchall()]
    return parse_json_columns(table, rows)


@pytest.fixture()
def snowflake_sink():
    with fakesnow.patch(create_database_on_connect=True, create_schema_on_connect=True):
        pipeline = sample_pipeline("snowflake")
        plan = build_plan(pipeline, CATALOG)
        sink = open_sink(pipeline, plan)
        sink.prepare()
        yield sink, plan
        sink.close()


def test_scripted_batches_leave_exactly_the_expected_rows(snowflake_sink):
    sink, plan = snowflake_sink
    before = dt.datetime.now(dt.UTC)
    results, expected = run_scenario(sink, plan)
    assert [r.skipped for r in results] == [False, False, True, True, False, False, False]
    for target_table, rows in expected.items():
        actual = read_target(sink.connection, plan, target_table)
        for row in actual:
            synced = row.pop("_SYNCED_AT", before)
            assert synced >= before - dt.timedelta(seconds=1)
        for got, want in zip(actual, rows, strict=False):
            assert {k: v for k, v in got.items() if want.get(k) != v} == {}, target_table
        assert actual == rows, target_table


def test_replay_is_a_noop_and_last_applied_is_recorded(snowflake_sink):
    sink, plan = snowflake_sink
    from replicator.sink.staging import stage_changes

    run_scenario(sink, plan)
    table = plan.table("shop.regions")
    first = read_target(sink.connection, plan, "REGION STOCK")
    batches, _ = scenario()
    batch_id, by_table = batches[-1]
    assert sink.apply(table, batch_id, {}, stage_changes(table, by_table["shop.regions"])).skipped
    assert read_target(sink.connection, plan, "REGION STOCK") == first
    last = sink.last_applied(table)
    assert last["batch_id"] == 4 and last["end_offset"] == {"file": "f", "pos": 4}


def test_prepare_adds_columns_added_to_the_source():
    from replicator.plan.model import PlannedColumn
    from replicator.plan.types import STRING

    with fakesnow.patch(create_database_on_connect=True, create_schema_on_connect=True):
        pipeline = sample_pipeline("snowflake")
        plan = build_plan(pipeline, CATALOG)
        sink = open_sink(pipeline, plan)
        sink.prepare()
        table = plan.tables[1]
        added = (
            PlannedColumn(target_column="NEW col", target_type=STRING, source_column="new col"),
            PlannedColumn(target_column="N2", target_type=STRING, source_column="n2"),
        )
        grown = type(plan)(
            pipeline_name=plan.pipeline_name,
            target_kind=plan.target_kind,
            tables=(plan.tables[0],
                    type(table)(**{**table.__dict__, "columns": (*table.columns, *added)})),
        )
        grown_sink = type(sink)(pipeline, grown, connection=sink.connection)
        grown_sink.prepare()
        grown_sink.prepare()  # idempotent
        cursor = sink.connection.cursor()
        cursor.execute(f"SELECT * FROM {target_name(table, SNOWFLAKE)} LIMIT 0")
        names = [d[0] for d in cursor.description]
        sink.close()
    assert [n.upper() for n in names[-2:]] == ["NEW COL", "N2"]
