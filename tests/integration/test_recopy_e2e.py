"""`replicator snapshot PIPELINE.yaml --table db.t`: one table copied again while the others
stream (engine.recopy).

The table's target drifted from MySQL behind the binlog's back (`sql_log_bin = 0`: rows
updated, inserted and deleted that no binlog shows), which is what a re-copy is for. After it
the target equals the source row by row, awkward values included, the drifted rows deleted;
the other tables kept streaming meanwhile.
"""

from __future__ import annotations

import dataclasses
import json
import os
import random
import threading
import time

import pytest

from replicator.config import load_pipeline
from replicator.demo.workload import apply_changes, awkward_row, create_schema, seed
from replicator.engine.recopy import request, requested
from replicator.engine.runner import RunOptions, run_pipeline
from replicator.engine.state.checkpoint import CheckpointDir
from replicator.model.pipeline import DuckDBTarget
from replicator.source.positions import current_position
from tests.integration.e2e_support import (
    assert_target_equals_source,
    demo_pipeline,
    demo_pipeline_yaml,
    differences,
    fakesnow_warehouse,
    ok,
    replicator,
    run,
)

pytestmark = [pytest.mark.mysql, pytest.mark.spark]

# awkward rows deleted behind the binlog's back: ids 5, 10, ..., 45 but 35 (the seed stores a
# multiple of 7 as BIGINT UNSIGNED max - id)
DRIFTED_DELETES = 8


def _drift(root, database: str) -> None:
    """Change `awkward` with the binlog off: nothing the pipeline streams shows it."""
    rng = random.Random(11)
    with root.cursor() as cursor:
        cursor.execute(f"USE `{database}`")
        cursor.execute("SET SESSION sql_log_bin = 0")
        cursor.execute("SET SESSION sql_mode = 'NO_ENGINE_SUBSTITUTION'")
        cursor.execute("SET SESSION time_zone = '+00:00'")
        cursor.execute("UPDATE awkward SET note = CONCAT('drifted ', id) WHERE id % 3 = 0")
        cursor.execute("DELETE FROM awkward WHERE id % 5 = 0 AND id < 50")
        assert cursor.rowcount == DRIFTED_DELETES
        for row_id in range(500, 512):
            row = awkward_row(rng, row_id)
            columns = ", ".join(f"`{name}`" for name in row)
            marks = ", ".join(["%s"] * len(row))
            cursor.execute(f"INSERT INTO awkward ({columns}) VALUES ({marks})",
                           _text_values(row))
        cursor.execute("SET SESSION sql_log_bin = 1")


def _text_values(row):
    from replicator.demo.workload import _bind

    return _bind(row)


def _awkward_differs(pipeline, root, warehouse) -> list[str]:
    import duckdb

    with duckdb.connect(str(warehouse), read_only=True) as target:
        return differences(pipeline, root, target)


def _flagged(warehouse) -> int:
    import duckdb

    with duckdb.connect(str(warehouse), read_only=True) as target:
        return target.execute('SELECT COUNT(*) FROM main."AWKWARD" WHERE "_DELETED"'
                              ).fetchone()[0]


@pytest.mark.parametrize("deletes", ["hard", "soft"])
def test_a_drifted_table_is_copied_again_and_rows_gone_from_mysql_are_removed(
        spark, mariadb, mysql_source, fresh_database, tmp_path, deletes):
    """Merged with hard deletes: rows not rewritten since the copy's marker are deleted in one
    statement. Soft deletes: the missing keys are found by comparing (and flagged deleted)."""
    import duckdb

    root = mariadb.root_connection(fresh_database)
    create_schema(root, fresh_database)
    seed(root, fresh_database, customers=10, orders=40, awkward=60)
    warehouse = tmp_path / "warehouse.duckdb"
    pipeline = demo_pipeline(mysql_source, fresh_database, tmp_path, DuckDBTarget(str(warehouse)))
    pipeline = dataclasses.replace(pipeline, tables=tuple(
        dataclasses.replace(t, deletes=deletes) if t.source_table == "awkward" else t
        for t in pipeline.tables))
    run(pipeline, spark)
    _drift(root, fresh_database)
    apply_changes(root, fresh_database, rounds=5)
    run(pipeline, spark)
    drifted = _awkward_differs(pipeline, root, warehouse)
    assert len(drifted) == 1 and "awkward" in drifted[0], drifted  # the drift is real
    flagged_before = _flagged(warehouse) if deletes == "soft" else 0

    checkpoint = CheckpointDir(pipeline.checkpoint_dir)
    request(checkpoint, f"{fresh_database}.AWKWARD")  # any case: MySQL's spelling is used
    assert requested(checkpoint) == [f"{fresh_database}.awkward"]
    notices: list[str] = []
    reports = []
    result = run(pipeline, spark, chunk_rows=7, on_notice=notices.append,
                 on_report=reports.append)
    assert not result.stopped
    assert requested(checkpoint) == []
    with root.cursor() as cursor:
        cursor.execute("SELECT COUNT(*) FROM awkward")
        rows = cursor.fetchone()[0]
    chunks = [r for r in reports if r.kind == "recopy"]
    # The marker batch (empty), then the rows in chunks of 7.
    assert [r.changes for r in chunks] == [0] + [7] * (rows // 7) + ([rows % 7] if rows % 7
                                                                     else [])
    done = [n for n in notices if "re-copy of" in n and "done" in n]
    assert done == [f"re-copy of {fresh_database}.awkward done: {-(-rows // 7)} chunk(s), "
                    f"{DRIFTED_DELETES} row(s) the source no longer has removed"], notices
    with duckdb.connect(str(warehouse), read_only=True) as target:
        assert_target_equals_source(pipeline, root, target)
    if deletes == "soft":  # the stream's deletes were flagged before; the drifted rows now
        assert _flagged(warehouse) == flagged_before + DRIFTED_DELETES
    state = checkpoint.load_start()
    assert state.recopies == [] and f"{fresh_database}.awkward" not in state.chunks_applied
    assert state.copies[f"{fresh_database}.awkward"] == 2  # the snapshot's copy, then this one

    # Changes after the re-copy stream on it as before.
    apply_changes(root, fresh_database, rounds=5, seed_value=9, first_new_id=200_000)
    with root.cursor() as cursor:
        cursor.execute("UPDATE awkward SET note = 'after the copy' WHERE id % 2 = 1")
        cursor.execute("DELETE FROM awkward WHERE id = 4")
    run(pipeline, spark)
    with duckdb.connect(str(warehouse), read_only=True) as target:
        assert_target_equals_source(pipeline, root, target)
    root.close()


def test_the_copy_runs_between_stream_batches_of_a_running_pipeline(
        spark, mariadb, mysql_source, fresh_database, tmp_path):
    """A running pipeline takes the request, copies the table chunk by chunk while a writer
    keeps changing it and the other tables, and stream batches of the other tables are applied
    between its chunks."""
    import duckdb

    root = mariadb.root_connection(fresh_database)
    create_schema(root, fresh_database)
    seed(root, fresh_database, customers=10, orders=200, awkward=60)
    warehouse = tmp_path / "warehouse.duckdb"
    pipeline = demo_pipeline(mysql_source, fresh_database, tmp_path, DuckDBTarget(str(warehouse)),
                             max_rows=50)
    pipeline = dataclasses.replace(pipeline, batching=dataclasses.replace(pipeline.batching,
                                                                          max_delay_ms=200))
    run(pipeline, spark)
    with root.cursor() as cursor:  # the table to copy drifts
        cursor.execute("SET SESSION sql_log_bin = 0")
        cursor.execute(f"DELETE FROM `{fresh_database}`.orders WHERE id % 10 = 0")
        cursor.execute(f"UPDATE `{fresh_database}`.orders SET status = 'drifted' "
                       "WHERE id % 10 = 1")
        cursor.execute("SET SESSION sql_log_bin = 1")
    checkpoint = CheckpointDir(pipeline.checkpoint_dir)
    stop, writing = threading.Event(), threading.Event()
    notices: list[str] = []
    reports = []
    outcome = []
    options = RunOptions(stop=stop, handle_signals=False, on_notice=notices.append,
                         on_report=reports.append, chunk_rows=5)

    def forever():
        try:
            outcome.append(run_pipeline(pipeline, options, spark=spark))
        except BaseException as exc:  # reported by the assertions below
            outcome.append(exc)

    def writer():
        writer_root = mariadb.root_connection(fresh_database)
        round_ = 0
        while writing.is_set():
            apply_changes(writer_root, fresh_database, rounds=2, seed_value=round_,
                          first_new_id=300_000 + 10 * round_)
            round_ += 1
            time.sleep(0.05)
        writer_root.close()

    runner = threading.Thread(target=forever, daemon=True)
    runner.start()
    writing.set()
    changes = threading.Thread(target=writer, daemon=True)
    changes.start()
    try:
        time.sleep(3)
        request(checkpoint, f"{fresh_database}.orders")
        deadline = time.monotonic() + 240
        while not any("re-copy of" in n and "done" in n for n in notices):
            assert time.monotonic() < deadline, notices[-20:]
            assert not outcome, outcome
            time.sleep(0.5)
        writing.clear()
        changes.join(60)
        head = current_position(mysql_source)
        while not (checkpoint.committed() and checkpoint.committed()[1] >= head):
            assert time.monotonic() < deadline, checkpoint.committed()
            time.sleep(0.3)
    finally:
        writing.clear()
        stop.set()
        runner.join(120)
    assert outcome and not isinstance(outcome[0], BaseException), outcome
    copied = [i for i, r in enumerate(reports) if r.kind == "recopy"]
    assert len(copied) >= 40, len(copied)  # 200 rows in chunks of 5 (and the marker)
    between = [r for r in reports[copied[0]:copied[-1]] if r.kind == "stream"
               and any(t.table.endswith("customers") for t in r.tables)]
    assert between, "no stream batch of another table ran while the table was copied"
    with duckdb.connect(str(warehouse), read_only=True) as target:
        assert_target_equals_source(pipeline, root, target)
    root.close()


def test_snapshot_command_names_the_table_or_says_what_the_pipeline_has(
        mariadb, mysql_source, fresh_database, tmp_path):
    root = mariadb.root_connection(fresh_database)
    create_schema(root, fresh_database)
    root.close()
    path = tmp_path / "p.yaml"
    path.write_text(demo_pipeline_yaml("recopy", fresh_database))
    env = {**os.environ, "MYSQL_HOST": mysql_source.host, "MYSQL_PORT": str(mysql_source.port),
           "MYSQL_USER": mysql_source.user, "MYSQL_PASSWORD": mysql_source.password or "",
           "WORKDIR": str(tmp_path), "NO_COLOR": "1"}
    wrong = replicator("snapshot", str(path), "--table", f"{fresh_database}.nope", env=env)
    assert wrong.returncode == 1, wrong.stderr
    assert f"{fresh_database}.nope: not a source table" in wrong.stderr
    assert f"{fresh_database}.orders" in wrong.stderr  # the hint lists the tables
    assert "Traceback" not in wrong.stderr
    pipeline = load_pipeline(path, environ=env)
    assert requested(CheckpointDir(pipeline.checkpoint_dir)) == []

    asked = ok(replicator("snapshot", str(path), "-t", f"{fresh_database}.ORDERS",
                          "--format", "json", env=env))
    assert json.loads(asked.stdout) == {"pipeline": "recopy",
                                        "tables": [f"{fresh_database}.orders"],
                                        "where": None, "running_pid": None}
    assert requested(CheckpointDir(pipeline.checkpoint_dir)) == [f"{fresh_database}.orders"]
    status = replicator("status", str(path), env=env)
    assert f"re-copy {fresh_database}.orders: requested, not started" in status.stdout, \
        status.stdout + status.stderr

    # --where: a condition over the table's own columns, checked before anything is asked.
    for where, says in [("nope > 1", "has no column nope"),
                        ("id > 1; DROP TABLE orders", "is not one condition"),
                        ("id IN (SELECT id FROM customers)", "reads another table")]:
        refused = replicator("snapshot", str(path), "-t", f"{fresh_database}.customers",
                             "--where", where, env=env)
        assert refused.returncode == 2 and says in refused.stderr, refused.stderr  # usage
        assert "hint:" in refused.stderr and "Traceback" not in refused.stderr
    asked = ok(replicator("snapshot", str(path), "-t", f"{fresh_database}.customers",
                          "--where", "id BETWEEN 3 AND 7 or name = 'it''s'", env=env))
    assert (f"{fresh_database}.customers: re-copy requested (the rows where id BETWEEN 3 AND 7 "
            "OR name = 'it''s'; none removed)") in asked.stdout


def test_a_drifted_table_is_copied_again_on_snowflake(
        spark, mariadb, mysql_source, fresh_database, tmp_path, monkeypatch):
    """The same through fakesnow: the marker's state row and the final DELETE in Snowflake's
    SQL (its CURRENT_TIMESTAMP is per statement, not per transaction)."""
    from replicator.verify import verify_pipeline

    root = mariadb.root_connection(fresh_database)
    create_schema(root, fresh_database)
    seed(root, fresh_database, customers=10, orders=40, awkward=60)
    with fakesnow_warehouse(tmp_path, monkeypatch) as (target, _connect):
        pipeline = demo_pipeline(mysql_source, fresh_database, tmp_path, target)
        run(pipeline, spark)
        _drift(root, fresh_database)
        run(pipeline, spark)
        before = verify_pipeline(pipeline)
        assert [t.source_table.split(".")[-1] for t in before.tables if not t.equal] == \
            ["awkward"]
        request(CheckpointDir(pipeline.checkpoint_dir), f"{fresh_database}.awkward")
        notices: list[str] = []
        run(pipeline, spark, chunk_rows=20, on_notice=notices.append)
        assert any(f"awkward done: 4 chunk(s), {DRIFTED_DELETES} row(s)" in n for n in notices), \
            notices
        after = verify_pipeline(pipeline)
        assert after.equal, "\n".join(after.describe())
    root.close()


def test_a_copy_stopped_midway_resumes_at_its_next_chunk_exactly_once(
        spark, mariadb, mysql_source, fresh_database, tmp_path):
    """Stopped after three chunks, and the checkpoint set back by one as if the process died
    between a chunk's commit and saving its progress: the next run finds that chunk in the
    state table (skipped), goes on from there, and ends equal."""
    import duckdb

    root = mariadb.root_connection(fresh_database)
    create_schema(root, fresh_database)
    seed(root, fresh_database, customers=10, orders=40, awkward=60)
    warehouse = tmp_path / "warehouse.duckdb"
    pipeline = demo_pipeline(mysql_source, fresh_database, tmp_path, DuckDBTarget(str(warehouse)))
    run(pipeline, spark)
    _drift(root, fresh_database)
    checkpoint = CheckpointDir(pipeline.checkpoint_dir)
    name = f"{fresh_database}.awkward"
    request(checkpoint, name)
    stop = threading.Event()
    first: list = []

    def stop_after_three(report) -> None:
        if report.kind == "recopy":
            first.append(report)
            if len(first) == 4:  # the marker and three chunks
                stop.set()

    result = run(pipeline, spark, chunk_rows=7, stop=stop, on_report=stop_after_three)
    assert result.stopped
    state = checkpoint.load_start()
    assert state.recopies == [name] and state.chunks_applied[name] == 3
    state.chunks_applied[name] = 2  # "died" before chunk 2's progress was saved
    checkpoint.save_start(state)

    second: list = []
    run(pipeline, spark, chunk_rows=7, on_report=second.append)
    again = [r for r in second if r.kind == "recopy"]
    assert again[0].batch_id == first[3].batch_id  # chunk 2 once more: found applied
    assert again[0].tables[0].skipped and not any(r.tables[0].skipped for r in again[1:])
    assert again[1].batch_id == first[3].batch_id - 1  # then chunk 3, 4, ...
    with duckdb.connect(str(warehouse), read_only=True) as target:
        assert_target_equals_source(pipeline, root, target)
    assert checkpoint.load_start().recopies == []
    root.close()


def test_a_condition_copies_only_the_rows_it_selects_and_removes_nothing(
        spark, mariadb, mysql_source, fresh_database, tmp_path):
    """`snapshot --where` (Debezium's additional-conditions): the drifted rows the condition
    selects are rewritten, the others keep their drift, and no row is removed."""
    import duckdb

    root = mariadb.root_connection(fresh_database)
    create_schema(root, fresh_database)
    seed(root, fresh_database, customers=10, orders=40, awkward=60)
    warehouse = tmp_path / "warehouse.duckdb"
    pipeline = demo_pipeline(mysql_source, fresh_database, tmp_path, DuckDBTarget(str(warehouse)))
    run(pipeline, spark)
    _drift(root, fresh_database)
    checkpoint = CheckpointDir(pipeline.checkpoint_dir)
    request(checkpoint, f"{fresh_database}.awkward", "id <= 30 OR id >= 505")
    notices: list[str] = []
    run(pipeline, spark, chunk_rows=7, on_notice=notices.append)
    assert any(f"re-copy of {fresh_database}.awkward done:" in n and
               "the rows where id <= 30 OR id >= 505 upserted, none removed" in n
               for n in notices), notices
    with root.cursor() as cursor:
        cursor.execute("SELECT id, note FROM awkward")
        source = dict(cursor.fetchall())
    with duckdb.connect(str(warehouse), read_only=True) as target:
        copied = dict(target.execute('SELECT "ID", "NOTE" FROM main."AWKWARD"').fetchall())
    selected = [i for i in source if i <= 30 or i >= 505]
    assert all(copied[i] == source[i] for i in selected)  # rewritten, drift and new rows
    assert all(copied[i] != source[i] for i in source  # the others keep their drift
               if 30 < i < 500 and i % 3 == 0)
    assert not any(500 <= i < 505 for i in copied)  # new rows outside it are not read
    # Deleted behind the binlog's back: still in the target, inside the condition too.
    assert {5, 10, 15, 20, 25, 30} <= set(copied) - set(source)
    state = checkpoint.load_start()
    assert state.recopies == [] and state.recopy_where == {}
    root.close()
