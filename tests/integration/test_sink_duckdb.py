"""The DuckDB sink runs every generated statement and converges exactly (full typed rows)."""

from __future__ import annotations

import datetime as dt

import pytest

from replicator.plan import build_plan
from replicator.plan.model import PlannedColumn
from replicator.plan.types import STRING
from replicator.sink import open_sink
from tests.fixtures.row_transforms import stage_events
from tests.fixtures.sink_sample import (
    CATALOG,
    normalize,
    parse_json_columns,
    run_scenario,
    sample_pipeline,
    scenario,
)

duckdb = pytest.importorskip("duckdb")


def read_target(connection, plan, target_table):
    table = plan.table(target_table)
    name = ".".join(f'"{p}"' for p in table.target_parts)
    key = ", ".join(f'"{c}"' for c in table.target_key)
    cursor = connection.execute(f"SELECT * FROM {name} ORDER BY {key}")
    names = [d[0] for d in cursor.description]
    rows = [dict(zip(names, map(normalize, row), strict=True)) for row in cursor.fetchall()]
    return parse_json_columns(table, rows)


@pytest.fixture()
def duckdb_sink(tmp_path):
    pipeline = sample_pipeline("duckdb", str(tmp_path / "warehouse.duckdb"))
    plan = build_plan(pipeline, CATALOG)
    sink = open_sink(pipeline, plan)
    sink.prepare()
    yield sink, plan
    sink.close()


def test_scripted_batches_leave_exactly_the_expected_rows(duckdb_sink):
    sink, plan = duckdb_sink
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


def test_replayed_batch_changes_nothing_and_last_applied_is_recorded(duckdb_sink):
    sink, plan = duckdb_sink
    run_scenario(sink, plan)
    table = plan.table("shop.regions")
    first = read_target(sink.connection, plan, "REGION STOCK")
    batches, _ = scenario()
    batch_id, by_table = batches[-1]
    replay = sink.apply(table, batch_id, {}, stage_events(table, by_table["shop.regions"]))
    assert replay.skipped
    assert read_target(sink.connection, plan, "REGION STOCK") == first
    last = sink.last_applied(table)
    assert last["batch_id"] == 4 and last["end_offset"] == {"file": "f", "pos": 4}


def test_failed_merge_rolls_back_the_state_row(duckdb_sink):
    sink, plan = duckdb_sink
    table = plan.table("shop.regions")
    batches, _ = scenario()
    staged = stage_events(table, batches[0][1]["shop.regions"])
    # A staged table with a column the staging table lacks fails inside the transaction.
    broken = staged.append_column("EXTRA", staged.column(0))
    from replicator.errors import SinkError

    with pytest.raises(SinkError):
        sink.apply(table, 9, {}, broken)
    assert sink.last_applied(table) is None
    assert sink.apply(table, 9, {}, staged).skipped is False


def test_prepare_adds_columns_added_to_the_source(tmp_path):
    pipeline = sample_pipeline("duckdb", str(tmp_path / "w.duckdb"))
    plan = build_plan(pipeline, CATALOG)
    sink = open_sink(pipeline, plan)
    sink.prepare()
    sink.close()
    table = plan.tables[1]
    added = PlannedColumn(target_column="NEW col", target_type=STRING, source_column="new col")
    grown = type(plan)(
        pipeline_name=plan.pipeline_name,
        target_kind=plan.target_kind,
        tables=(plan.tables[0], type(table)(**{**table.__dict__, "columns": (*table.columns, added)})),
    )
    sink = open_sink(pipeline, grown)
    sink.prepare()
    sink.prepare()  # idempotent
    names = [
        d[0]
        for d in sink.connection.execute('SELECT * FROM "RAW"."REGION STOCK" LIMIT 0').description
    ]
    sink.close()
    assert names[-1] == "NEW col"


def test_tables_of_one_batch_apply_concurrently(duckdb_sink):
    from concurrent.futures import ThreadPoolExecutor

    sink, plan = duckdb_sink
    batches, _ = scenario()
    staged = {
        name: stage_events(plan.table(name), events) for name, events in batches[0][1].items()
    }
    with ThreadPoolExecutor(max_workers=2) as pool:
        results = list(pool.map(
            lambda name: sink.apply(plan.table(name), 1, {"pos": 1}, staged[name]), staged
        ))
    assert [r.skipped for r in results] == [False, False]
    assert all(sink.last_applied(plan.table(name))["batch_id"] == 1 for name in staged)


def test_a_second_writer_process_gets_a_terminal_error_with_a_hint(tmp_path):
    import subprocess
    import sys

    path = tmp_path / "locked.duckdb"
    holder = duckdb.connect(str(path))
    code = (
        "from tests.fixtures.sink_sample import CATALOG, sample_pipeline\n"
        "from replicator.plan import build_plan\n"
        "from replicator.sink import open_sink\n"
        "from replicator.errors import SinkError\n"
        f"p = sample_pipeline('duckdb', {str(path)!r})\n"
        "try:\n"
        "    open_sink(p, build_plan(p, CATALOG))\n"
        "except SinkError as e:\n"
        "    print('TRANSIENT' if e.transient else 'TERMINAL', e.hint)\n"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          cwd=str(__import__("pathlib").Path(__file__).resolve().parents[2]),
                          timeout=60)
    holder.close()
    assert done.stdout.startswith("TERMINAL"), done.stdout + done.stderr
    assert "one writer process" in done.stdout
