"""Fault: one huge transaction replicates with a small driver heap, and survives `kill -9`
in the middle of being applied.

A micro-batch never splits a transaction, so a 200k-row ``INSERT ... SELECT`` (~60 MB of
binlog) is one batch. Collected through Spark it needs several times that in the driver JVM:
with ``spark.driver.memory=512m`` the code before the landing zone failed on exactly this
pipeline (``TaskResultLost (result lost from block manager)``: the collected batch did not fit
the driver's memory; at the default 1 GiB a 1M-row one is ``OutOfMemoryError: Java heap
space``, bench/README.md). Now the executor decodes it into Parquet files as it goes
(``engine.landing``: row groups of 100k rows), Spark carries a few manifest rows, and the
driver stages the files in slices of 50k changes inside one DuckDB transaction. Small
transactions before and after it take the same path (the batch before shares the big one's
range; the ones after are their own batches).

The table also keeps a log table: after the kill and the resume every change is in it
exactly once (the state table makes the replayed batch all-or-nothing).
"""

from __future__ import annotations

import os
import signal
import sys
import time
from pathlib import Path

import pytest

from bench.procmon import MonitoredProcess
from replicator.config import load_pipeline
from replicator.model.changes import BinlogPosition
from tests.integration.e2e_support import assert_target_equals_source

pytestmark = [pytest.mark.mysql, pytest.mark.spark, pytest.mark.slow]

ROOT = Path(__file__).resolve().parents[2]
ROWS = 200_000
NOTICE = "applying them in slices of"

PIPELINE_YAML = """\
version: 1
name: bigtxn
source:
  mysql:
    host: 127.0.0.1
    port: ${{MYSQL_PORT}}
    user: ${{MYSQL_USER}}
    password: ${{MYSQL_PASSWORD}}
    start: {{file: {file}, pos: {pos}}}
target:
  duckdb: {{path: "${{WORKDIR}}/warehouse.duckdb"}}
batching: {{max_rows: 50000, max_delay: 500ms}}
engine:
  master: local[1]
  checkpoint: ${{WORKDIR}}/checkpoint
  conf: {{spark.driver.memory: 512m, spark.sql.shuffle.partitions: "1"}}
tables:
  - source: {database}.items
    log_table: true
"""

ITEMS = """CREATE TABLE items (
  id BIGINT PRIMARY KEY, grp INT NOT NULL, amount DECIMAL(12,2), note VARCHAR(400),
  created DATETIME(6)
) CHARACTER SET utf8mb4"""

# ~300 bytes of binlog a row; every value computed by the server.
BIG_INSERT = """INSERT INTO items (id, grp, amount, note, created)
SELECT seq, seq MOD 1000, IF(seq MOD 7 = 0, NULL, (seq * 7919 MOD 100000000) / 100),
  CONCAT(REPEAT('x', 220), ' ', seq, ' O''Brien 🚀'),
  TIMESTAMP('2024-01-01') + INTERVAL seq SECOND + INTERVAL (seq * 37 MOD 1000000) MICROSECOND
FROM seq_1_to_{rows}"""


def _head(cursor) -> BinlogPosition:
    cursor.execute("SHOW MASTER STATUS")
    file, pos = cursor.fetchone()[:2]
    return BinlogPosition(str(file), int(pos))


def _write_source(mariadb, database: str) -> BinlogPosition:
    """Small transactions, the big one, then small ones again; the position before them all."""
    connection = mariadb.root_connection(database)
    with connection.cursor() as cursor:
        cursor.execute(ITEMS)
        start = _head(cursor)
        for n in range(1, 4):  # before the big one: same micro-batch, read by the driver too
            cursor.execute("INSERT INTO items VALUES (%s, 1, 1.50, 'before', NOW(6))",
                           (ROWS + n,))
        cursor.execute("BEGIN")
        cursor.execute(BIG_INSERT.format(rows=ROWS))
        cursor.execute("COMMIT")
        # After it: through Spark, in later batches.
        cursor.execute("UPDATE items SET note = 'changed after' WHERE id IN (1, 500, 199999)")
        cursor.execute("DELETE FROM items WHERE id IN (2, 3, 200001)")
        cursor.execute("UPDATE items SET id = 900000 WHERE id = 4")  # a key change
    connection.close()
    return start


def _setup(mariadb, database: str, tmp_path: Path) -> tuple[Path, dict[str, str]]:
    start = _write_source(mariadb, database)
    path = tmp_path / "bigtxn.yaml"
    path.write_text(PIPELINE_YAML.format(file=start.file, pos=start.pos, database=database))
    env = {**os.environ, **mariadb.environment(), "WORKDIR": str(tmp_path), "NO_COLOR": "1",
           "PYTHONPATH": os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")])}
    return path, env


def _run(path: Path, env: dict[str, str], on_line=None) -> MonitoredProcess:
    return MonitoredProcess(
        [sys.executable, "-m", "replicator", "run", str(path), "--until-caught-up",
         "--log-format", "json"], env=env, cwd=str(ROOT), on_line=on_line)


def _check_target(mariadb, path: Path, env: dict[str, str], database: str) -> None:
    import duckdb

    pipeline = load_pipeline(path, environ=env)
    source = mariadb.root_connection(database)
    with duckdb.connect(str(Path(env["WORKDIR"]) / "warehouse.duckdb"), read_only=True) as target:
        assert_target_equals_source(pipeline, source, target)
        # Every change exactly once in the log table: the inserts (3 + ROWS), 3 updates
        # and 3 deletes, and the key change (logged as a delete and an insert).
        logged = target.execute(
            'SELECT COUNT(*), COUNT(DISTINCT ("_BINLOG_FILE", "_BINLOG_POS", '
            '"_TRANSACTION_ORDER", "_OP")) FROM main."ITEMS_LOG"').fetchone()
        assert logged[0] == logged[1], "a change was logged twice"
        assert logged[0] == ROWS + 3 + 3 + 3 + 2, logged
        state = target.execute(
            'SELECT COUNT(*), COUNT(DISTINCT "BATCH_ID") FROM main."_REPLICATOR_STATE"'
        ).fetchone()
        assert state[0] == state[1]
    source.close()


def test_a_200k_row_transaction_replicates_with_a_512m_driver_heap(mariadb, fresh_database,
                                                                    tmp_path):
    path, env = _setup(mariadb, fresh_database, tmp_path)
    outcome = _run(path, env).wait(timeout=600)
    text = "\n".join(line.text for line in outcome.lines)
    assert outcome.returncode == 0, text[-4000:]
    assert NOTICE in text, text[-4000:]  # the big batch was staged in slices
    peak = outcome.usage.peak_rss_bytes
    print(f"\nbig transaction of {ROWS} rows: {outcome.wall_seconds:.1f} s, peak RSS of the "
          f"process tree {peak / 2**20:.0f} MiB")
    assert peak < 3 * 2**30, outcome.usage.to_json()
    _check_target(mariadb, path, env, fresh_database)


def test_sigkill_while_the_big_batch_is_applied_then_resume(mariadb, fresh_database, tmp_path):
    """The kill lands inside the sink transaction: a failpoint holds the run after the first
    50k-row slice is staged (a kill timed from outside came after the commit once the batch
    took under 1.5 s to apply)."""
    path, env = _setup(mariadb, fresh_database, tmp_path)
    held = "failpoint apply.between_slices"
    noticed: list[str] = []
    first = _run(path, {**env, "REPLICATOR_FAILPOINTS": "apply.between_slices=sleep(120)"},
                 on_line=lambda line: noticed.append(line.text)
                 if NOTICE in line.text or held in line.text else None)
    deadline = time.monotonic() + 300
    while not any(held in text for text in noticed):
        assert first.process.poll() is None, "\n".join(x.text for x in first.lines)[-4000:]
        assert time.monotonic() < deadline
        time.sleep(0.05)
    assert any(NOTICE in text for text in noticed)  # the batch is the big one, in slices
    first.process.send_signal(signal.SIGKILL)  # the driver: Python, where the sink runs
    first.wait(timeout=60)
    time.sleep(1)  # the JVM exits when its Python parent's pipe closes

    import duckdb

    with duckdb.connect(str(tmp_path / "warehouse.duckdb"), read_only=True) as target:
        counts = target.execute('SELECT (SELECT COUNT(*) FROM main."ITEMS"), '
                                '(SELECT COUNT(*) FROM main."ITEMS_LOG")').fetchone()
    assert counts == (0, 0), f"the kill came after the batch committed: {counts}"

    resumed = _run(path, env).wait(timeout=600)
    assert resumed.returncode == 0, "\n".join(x.text for x in resumed.lines)[-4000:]
    _check_target(mariadb, path, env, fresh_database)
