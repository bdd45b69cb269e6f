"""The incremental re-copy of one table (engine.recopy) survives SIGKILL anywhere inside it.

A real run (`python -m replicator run --chunk-rows 20`, a subprocess) streams the demo tables
into DuckDB while `orders` (200 rows, drifted behind the binlog's back: rows deleted and
changed with `sql_log_bin = 0`) is copied again in about 10 chunks, and a writer changes
`orders`, `customers` and `awkward` throughout. A failpoint holds the run at one place of the
copy and the test kills it there (the suite runs the cases parametrized below; the others,
``recopy.inside_chunk``, chunk 0's transaction open, and ``recopy.removed`` with hard deletes,
passed when written):

- ``recopy.chunk_committed``: chunk 0 committed (its state row written), its progress not
  saved in the checkpoint: the resumed run applies it again, finds it in the state table;
- ``recopy.before_removal``: every chunk saved, the rows MySQL no longer has not removed;
- ``recopy.removed``: those rows removed (committed), the copy not saved as done: the resumed
  run removes again (hard deletes: `delete_not_rewritten`; soft deletes: the absent-row
  batch, found in the state table).

What the kill left is checked first (the window was really hit), then `replicator run
--until-caught-up` (without `--chunk-rows`: the copy keeps the chunks it planned) finishes the
copy: the target equals MySQL row by row, the drifted deletes are gone, every chunk and the
markers (begun, done) are recorded exactly once, no key twice, and the checkpoint holds no
copy in progress.

The same after a hand-written table swap under `schema_changes: {rename_table: recopy}`,
whose re-copy is queued by the stream (the RENAME) rather than by `replicator snapshot`,
with the swap's batch replayed by the resumed run (killed after its sink commit, before
Spark's), which must go on with the copy under way rather than start it over.
"""

from __future__ import annotations

import contextlib
import os
import threading
import time
from pathlib import Path
from typing import Any

import pytest

from replicator.config import load_pipeline
from replicator.demo.workload import apply_changes, create_schema, seed
from replicator.engine.recopy import ABSENT, MARKER, request
from replicator.engine.state.checkpoint import COPY_DONE, COPY_SPAN, EPOCH_SPAN, CheckpointDir
from tests.integration.e2e_support import (
    assert_target_equals_source,
    demo_pipeline_yaml,
    kill_at_failpoint,
    ok,
    replicator,
    run,
)

pytestmark = [pytest.mark.mysql, pytest.mark.spark, pytest.mark.slow]

ORDERS = 200
CHUNK_ROWS = 20  # about 10 chunks of orders
# The indexes, within a copy's chunk numbers, of its marker, of its absent-row delete and of
# its done marker (written once the copy is finished)
MARKER_INDEX, ABSENT_INDEX = COPY_SPAN - MARKER, COPY_SPAN - ABSENT
DONE_INDEX = COPY_SPAN - COPY_DONE


def _pipeline_file(tmp_path: Path, database: str, extra: str = "", deletes: str = "hard"
                   ) -> Path:
    path = tmp_path / "recopy-kill.yaml"
    text = demo_pipeline_yaml("recopy-kill", database,
                              batching="{max_rows: 300, max_delay: 200ms}") + extra
    orders = f"  - source: {database}.orders\n"
    path.write_text(text.replace(orders, f"{orders}    deletes: {deletes}\n"))
    return path


def _environment(mysql_source: Any, tmp_path: Path) -> dict[str, str]:
    return {**os.environ, "MYSQL_HOST": mysql_source.host, "MYSQL_PORT": str(mysql_source.port),
            "MYSQL_USER": mysql_source.user, "MYSQL_PASSWORD": mysql_source.password or "",
            "WORKDIR": str(tmp_path), "NO_COLOR": "1"}


def _reader(tmp_path: Path) -> Any:
    import duckdb

    return contextlib.closing(duckdb.connect(str(tmp_path / "warehouse.duckdb"), read_only=True))


def _rows(tmp_path: Path, sql: str) -> list[tuple]:
    with _reader(tmp_path) as target:
        return target.execute(sql).fetchall()


def _recopied_chunks(tmp_path: Path, epoch: int) -> list[int]:
    """The chunk indexes of the re-copy (copy 1 of `orders`) the state table records, the
    marker's as MARKER_INDEX; a chunk recorded twice is listed twice."""
    ids = [batch_id for (batch_id,) in _rows(
        tmp_path, 'SELECT "BATCH_ID" FROM main."_REPLICATOR_STATE" '
                  "WHERE upper(\"TABLE\") LIKE '%ORDERS' AND \"BATCH_ID\" < 0")]
    numbers = [-batch_id - 1 - epoch * EPOCH_SPAN for batch_id in ids]
    return sorted(n - COPY_SPAN for n in numbers if COPY_SPAN <= n < 2 * COPY_SPAN)


def _kill_at(failpoint: str, pipeline_file: Path, env: dict[str, str], tmp_path: Path,
             also: str = "") -> str:
    """Run (forever, as in production) until ``failpoint`` fires, then SIGKILL the run; its
    output."""
    return kill_at_failpoint(pipeline_file, env, tmp_path / f"{failpoint}.log", failpoint,
                             also=also, args=("--chunk-rows", str(CHUNK_ROWS)))[0]


@contextlib.contextmanager
def _writing(mariadb: Any, database: str):
    """A writer changing orders, customers and awkward (inserts, updates, deletes, a key
    change) until the block ends."""
    stop, errors = threading.Event(), []

    def write() -> None:
        connection = mariadb.root_connection(database)
        try:
            round_ = 0
            while not stop.is_set():
                apply_changes(connection, database, rounds=2, seed_value=round_,
                              first_new_id=300_000 + 10 * round_)
                round_ += 1
                time.sleep(0.05)
        except BaseException as exc:  # reported below
            errors.append(exc)
        finally:
            connection.close()

    thread = threading.Thread(target=write, daemon=True)
    thread.start()
    try:
        yield
    finally:
        stop.set()
        thread.join(60)
    assert not errors, errors


def _check_resumed(pipeline: Any, root: Any, tmp_path: Path, name: str, epoch: int,
                   recorded: list[int]) -> None:
    """The copy finished after the kill: equal row by row, each chunk and the markers recorded
    once, no batch and no key twice, nothing left in progress."""
    with _reader(tmp_path) as target:
        assert_target_equals_source(pipeline, root, target)
    assert _recopied_chunks(tmp_path, epoch) == recorded
    assert _rows(tmp_path, 'SELECT count(*) FROM (SELECT "TABLE", "BATCH_ID" FROM '
                           'main."_REPLICATOR_STATE" GROUP BY 1, 2 HAVING count(*) > 1)'
                 ) == [(0,)]
    assert _rows(tmp_path, 'SELECT count(*) - count(DISTINCT "ID") FROM main."ORDERS"') == [(0,)]
    state = CheckpointDir(pipeline.checkpoint_dir).load_start()
    assert state.recopies == [] and name not in state.chunks_applied
    assert state.copies[name] == 2  # the first snapshot's copy, then this one


# Each case costs three JVM starts: the kill points that differ in what a restart must do.
# (recopy.inside_chunk, an open transaction rolled back, and recopy.removed with hard
# deletes, one statement run again, were run and pass; left out of the suite for its time.)
@pytest.mark.parametrize(("failpoint", "deletes"), [
    ("recopy.chunk_committed", "hard"), ("recopy.before_removal", "hard"),
    ("recopy.removed", "soft")])
def test_a_recopy_killed_inside_resumes_exactly_once(
        spark, mariadb, mysql_source, fresh_database, tmp_path, failpoint, deletes):
    """Hard deletes: the rows not rewritten since the marker are deleted in one statement;
    soft deletes: the absent keys are found by comparing and flagged in a batch of their own
    (ABSENT_INDEX), which a kill after its commit must not apply twice."""
    root = mariadb.root_connection(fresh_database)
    try:
        create_schema(root, fresh_database)
        seed(root, fresh_database, customers=10, orders=ORDERS, awkward=10)
        pipeline_file = _pipeline_file(tmp_path, fresh_database, deletes=deletes)
        env = _environment(mysql_source, tmp_path)
        pipeline = load_pipeline(pipeline_file, environ=env)
        run(pipeline, spark)  # the first snapshot, in this process (no JVM to start)
        with root.cursor() as cursor:  # drift behind the binlog's back
            cursor.execute("SET SESSION sql_log_bin = 0")
            cursor.execute("DELETE FROM orders WHERE id % 10 = 0")
            cursor.execute("UPDATE orders SET status = 'drifted' WHERE id % 10 = 1")
            cursor.execute("SET SESSION sql_log_bin = 1")
        drifted = [(i,) for i in range(10, ORDERS + 1, 10)]
        gone = ('SELECT "ID" FROM main."ORDERS" WHERE "ID" % 10 = 0 AND "ID" <= 200'
                + (' AND NOT "_DELETED"' if deletes == "soft" else "") + " ORDER BY 1")
        assert _rows(tmp_path, gone) == drifted  # deleted in MySQL, still in the target
        checkpoint = CheckpointDir(pipeline.checkpoint_dir)
        name = f"{fresh_database}.orders"
        request(checkpoint, name)
        epoch = checkpoint.load_start().epoch

        with _writing(mariadb, fresh_database):
            _kill_at(failpoint, pipeline_file, env, tmp_path)

        # Killed where the failpoint says: the copy under way, at that step.
        state = checkpoint.load_start()
        assert state.recopies == [name]
        # 180 rows left and the writer's: at least 9 chunks of 20 (planned by the killed run)
        chunks = len(checkpoint.load_chunks(name))
        assert chunks >= (ORDERS - ORDERS // 10) // CHUNK_ROWS
        recorded = _recopied_chunks(tmp_path, epoch)
        if failpoint == "recopy.inside_chunk":  # chunk 0 rolled back with the process
            assert (state.chunks_applied[name], recorded) == (0, [MARKER_INDEX])
        elif failpoint == "recopy.chunk_committed":  # committed, its progress not saved
            assert (state.chunks_applied[name], recorded) == (0, [0, MARKER_INDEX])
        else:  # every chunk applied and saved; removed or not yet, the copy not done
            assert state.chunks_applied[name] == chunks
            removing = [ABSENT_INDEX] if deletes == "soft" and failpoint == "recopy.removed" \
                else []
            assert recorded == [*range(chunks), MARKER_INDEX, *removing]
            assert _rows(tmp_path, gone) == ([] if failpoint == "recopy.removed" else drifted)

        ok(replicator("run", str(pipeline_file), "--until-caught-up", env=env))
        _check_resumed(pipeline, root, tmp_path, name, epoch,
                       [*range(chunks), DONE_INDEX, MARKER_INDEX,
                        *([ABSENT_INDEX] if deletes == "soft" else [])])
        assert _rows(tmp_path, gone) == []  # removed: MySQL no longer has them
    finally:
        root.close()


# batch-replayed (the swap's batch held after its sink commit, before the batch log records
# it, while the copy's first chunk was applied) was the suite's case while Structured Streaming
# ran the stream: a re-copy's step then ran beside a batch. The driver's stream loop steps a
# re-copy only between batches, after the log's commit, so that state cannot happen any more;
# what can is the batch recorded, then the copy's chunk, then the kill.
@pytest.mark.parametrize("also", [""], ids=["batch-recorded"])
def test_a_recopy_after_a_table_swap_killed_midway_resumes_exactly_once(
        spark, mariadb, mysql_source, fresh_database, tmp_path, also):
    """`rename_table: recopy`: the stream reads the swap's RENAME and queues the copy itself
    (saved before the batch is applied); the run is killed after one chunk of it committed,
    and the resumed run finishes that copy, not a new one.

    A replayed swap batch used to start the copy over (a new copy number, the chunks planned
    and applied thrown away); the batch's id now marks its own request (see above the test
    for why the replayed case is no longer reachable)."""
    from tests.integration.test_swap_recopy_e2e import _swap

    root = mariadb.root_connection(fresh_database)
    try:
        create_schema(root, fresh_database)
        seed(root, fresh_database, customers=10, orders=ORDERS, awkward=10)
        pipeline_file = _pipeline_file(tmp_path, fresh_database,
                                       "schema_changes: {rename_table: recopy}\n")
        env = _environment(mysql_source, tmp_path)
        pipeline = load_pipeline(pipeline_file, environ=env)
        run(pipeline, spark)
        # Swapped while no run follows: the killed run reads it from the binlog. 80000 is
        # left out of the new table (only the old one had it), 80001 only in it, 80002
        # changed only in it.
        _swap(root, f"`{fresh_database}`")
        checkpoint = CheckpointDir(pipeline.checkpoint_dir)
        name = f"{fresh_database}.orders"
        epoch = checkpoint.load_start().epoch

        with _writing(mariadb, fresh_database):
            log = _kill_at("recopy.chunk_committed", pipeline_file, env, tmp_path, also)
        assert "renamed onto the name: reading on under it and copying it again" in log, log
        state = checkpoint.load_start()
        assert (state.recopies, state.chunks_applied[name]) == ([name], 0)
        assert _recopied_chunks(tmp_path, epoch) == [0, MARKER_INDEX]
        chunks = len(checkpoint.load_chunks(name))
        assert chunks >= ORDERS // CHUNK_ROWS
        # The stream applied the rows before the swap: 80000 is in the target until removed.
        assert _rows(tmp_path, 'SELECT "ID" FROM main."ORDERS" WHERE "ID" = 80000') == [(80000,)]

        ok(replicator("run", str(pipeline_file), "--until-caught-up", env=env))
        _check_resumed(pipeline, root, tmp_path, name, epoch,
                       [*range(chunks), DONE_INDEX, MARKER_INDEX])
        assert _rows(tmp_path, 'SELECT "ID", "STATUS" FROM main."ORDERS" WHERE "ID" BETWEEN '
                               '80000 AND 80002 ORDER BY 1') == [(80001, "only in the copy"),
                                                                 (80002, "changed in the copy")]
    finally:
        root.close()
