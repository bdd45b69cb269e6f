"""Fault: `kill -9` of `replicator run` (the whole process group: Python driver and Spark's
JVM) at random points, 10 times over one workload that keeps changing; then one clean
`--until-caught-up` run and `verify` must find the target equal to the source.

The kill points are drawn from a seeded RNG: during start-up, or a random fraction of a
second after the run's n-th applied batch (snapshot chunk or stream batch, n in 1..6); each
kill is recorded with the number of batches the target had recorded (printed with -s).
"""

from __future__ import annotations

import os
import random
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from replicator.config import load_pipeline
from replicator.demo.workload import apply_changes, create_schema, seed
from replicator.verify import verify_pipeline
from tests.integration.e2e_support import run

pytestmark = [pytest.mark.mysql, pytest.mark.spark, pytest.mark.slow]

ROOT = Path(__file__).resolve().parents[2]
KILLS = 10
SEED = 7

PIPELINE_YAML = """\
version: 1
name: faults-kill
source:
  mysql:
    host: 127.0.0.1
    port: ${MYSQL_PORT}
    user: ${MYSQL_USER}
    password: ${MYSQL_PASSWORD}
target:
  duckdb: {path: "${WORKDIR}/warehouse.duckdb"}
batching: {max_rows: 60, max_delay: 200ms}
engine:
  master: local[1]
  checkpoint: ${WORKDIR}/checkpoint
  conf: {spark.sql.shuffle.partitions: "1", spark.ui.enabled: "false"}
tables:
  - source: DB.customers
    columns: {email: {mask: sha256}}
  - source: DB.orders
    deletes: soft
  - source: DB.awkward
"""


def _applied_batches(warehouse: Path) -> int:
    """State rows in the target (read after the kill: the writer is gone)."""
    import duckdb

    if not warehouse.exists():
        return 0
    try:
        with duckdb.connect(str(warehouse), read_only=True) as target:
            return int(target.execute('SELECT COUNT(*) FROM main."_REPLICATOR_STATE"').fetchone()[0])
    except duckdb.Error:
        return 0  # killed before the state table was created


def _batch_lines(log: Path) -> int:
    return sum(1 for line in log.read_text(errors="replace").splitlines()
               if line.startswith('{"kind"'))


def _wait_for_batches(process: subprocess.Popen, log: Path, count: int) -> bool:
    """Until the run has logged ``count`` applied batches; False if it ended first."""
    deadline = time.monotonic() + 240
    while _batch_lines(log) < count:
        if process.poll() is not None:
            return False
        assert time.monotonic() < deadline, log.read_text()[-3000:]
        time.sleep(0.05)
    return True


def test_ten_sigkills_then_verify_equal(spark, mariadb, fresh_database, tmp_path):
    rng = random.Random(SEED)
    root = mariadb.root_connection()
    create_schema(root, fresh_database)
    seed(root, fresh_database, customers=60, orders=1500, awkward=80)
    path = tmp_path / "faults.yaml"
    path.write_text(PIPELINE_YAML.replace("DB.", f"{fresh_database}."))
    env = {**os.environ, **mariadb.environment(), "WORKDIR": str(tmp_path), "NO_COLOR": "1"}
    warehouse = tmp_path / "warehouse.duckdb"
    kills: list[tuple[int, float, int]] = []
    finished = 0
    attempt = 0
    while len(kills) < KILLS:
        attempt += 1
        assert attempt <= KILLS + 6, f"runs kept finishing before the kill point: {kills}"
        apply_changes(root, fresh_database, rounds=25, seed_value=attempt,
                      first_new_id=200_000 + 1000 * attempt)
        log = tmp_path / f"run{attempt}.log"
        with open(log, "wb") as output:
            process = subprocess.Popen(
                [sys.executable, "-m", "replicator", "run", str(path), "--until-caught-up",
                 "--log-format", "json"],
                env=env, cwd=ROOT, stdout=output, stderr=subprocess.STDOUT,
                start_new_session=True,
            )
        # The kill point: during start-up (n = 0), or just after the n-th batch this run
        # applied (snapshot chunks and stream batches alike), plus a random slice of the next.
        # A bounded run's start-up is 2-4 s here (the stream runs as Spark jobs, the JVM
        # without Spark SQL): a later start-up kill mostly met a run that had finished.
        after_batches = rng.randint(0, 6)
        extra = rng.uniform(0.0, 1.5) if after_batches else rng.uniform(0.5, 3.0)
        reached = _wait_for_batches(process, log, after_batches)
        if reached:
            time.sleep(extra)
        if reached and process.poll() is None:
            os.killpg(process.pid, signal.SIGKILL)  # driver and JVM at once, mid-whatever
            process.wait(timeout=30)
            kills.append((after_batches, round(extra, 1), _applied_batches(warehouse)))
            continue
        process.wait(timeout=120)
        assert process.returncode == 0, log.read_text()[-3000:]
        finished += 1
    time.sleep(0.5)

    apply_changes(root, fresh_database, rounds=10, seed_value=999, first_new_id=900_000)
    pipeline = load_pipeline(path, environ=env)
    final = run(pipeline, spark)
    report = verify_pipeline(pipeline)
    print(f"\nSIGKILL seed {SEED}: {len(kills)} kills (after n batches of the run, +s, state rows in the target): {kills}; "
          f"{finished} run(s) finished before their kill point; final run: "
          f"{final.batches} batches, {final.changes} changes; verify: "
          + "; ".join(f"{t.source_table.split('.')[-1]} {t.source_rows} rows" for t in report.tables))
    assert report.equal, "\n".join(report.describe())
    # The kills landed at different stages: before anything was applied and after.
    assert sum(1 for n, _, _ in kills if n == 0) >= 1, kills  # during start-up
    assert sum(1 for n, _, _ in kills if n > 0) >= 5, kills  # mid-snapshot or mid-stream
    assert len({applied for _, _, applied in kills}) >= 4, kills
    root.close()
