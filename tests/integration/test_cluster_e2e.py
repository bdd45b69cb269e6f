"""A pipeline on a real Spark standalone cluster, run the way a user runs it.

``replicator run FILE --master spark://127.0.0.1:PORT`` in a subprocess: it becomes
``spark-submit`` (client mode) with the package zip on ``--py-files``; the binlog is decoded
by executors of the cluster's worker in 2 partitions per micro-batch. The first run streams
and is killed with SIGKILL mid-run (its whole process group: spark-submit's JVM and the
Python driver under it); a second run resumes with ``--until-caught-up``; the target then
equals the source row by row, with no duplicate keys.
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from replicator.config import load_pipeline
from replicator.demo.workload import apply_changes, create_schema, seed
from tests.integration.e2e_support import assert_target_equals_source, demo_pipeline_yaml

pytestmark = [pytest.mark.mysql, pytest.mark.spark, pytest.mark.slow]

ROOT = Path(__file__).resolve().parents[2]

def _pipeline_yaml(database: str) -> str:
    return demo_pipeline_yaml(
        "cluster", database, batching="{max_rows: 60, max_delay: 300ms}",
        engine="checkpoint: ${WORKDIR}/checkpoint\n  decode_partitions: 2\n"
        '  conf: {spark.sql.shuffle.partitions: "2", spark.executor.memory: "1g",\n'
        '         spark.cores.max: "2"}')


def _commits(checkpoint: Path) -> int:
    try:
        return sum(1 for name in os.listdir(checkpoint / "stream" / "commits") if name.isdigit())
    except FileNotFoundError:
        return 0


def _replicator_run(pipeline_file: Path, master: str, env: dict[str, str], log: Path,
                    *extra: str) -> subprocess.Popen[bytes]:
    with open(log, "ab") as output:
        return subprocess.Popen(
            [sys.executable, "-m", "replicator", "run", str(pipeline_file), "--master", master,
             "--log-format", "json", *extra],
            env=env, cwd=ROOT, stdout=output, stderr=subprocess.STDOUT, start_new_session=True,
        )


def _kill_group(process: subprocess.Popen[bytes]) -> None:
    with contextlib.suppress(ProcessLookupError):
        os.killpg(process.pid, signal.SIGKILL)
    process.wait(timeout=30)


def test_cluster_run_with_two_decode_partitions_survives_sigkill(
    spark_cluster, mariadb, mysql_source, fresh_database, tmp_path
):
    master = spark_cluster["master_url"]
    root = mariadb.root_connection()
    create_schema(root, fresh_database)
    seed(root, fresh_database, customers=30, orders=120, awkward=30)
    pipeline_file = tmp_path / "cluster.yaml"
    pipeline_file.write_text(_pipeline_yaml(fresh_database))
    env = {
        **os.environ,
        "MYSQL_HOST": mysql_source.host,
        "MYSQL_PORT": str(mysql_source.port),
        "MYSQL_USER": mysql_source.user,
        "MYSQL_PASSWORD": mysql_source.password or "",
        "WORKDIR": str(tmp_path),
        "SPARK_LOCAL_IP": "127.0.0.1",
    }
    log = tmp_path / "run.log"
    checkpoint = tmp_path / "checkpoint"

    # 1. stream on the cluster; once the stream runs (the run says "streaming from"), write
    #    a bounded workload and SIGKILL the run after a few more micro-batches.
    first = _replicator_run(pipeline_file, master, env, log)
    try:
        deadline = time.monotonic() + 300
        round_number = 0
        while _commits(checkpoint) < 3:
            assert first.poll() is None, log.read_text()[-3000:]
            assert time.monotonic() < deadline, log.read_text()[-3000:]
            if "streaming from" in log.read_text() and round_number < 12:
                apply_changes(root, fresh_database, rounds=2, seed_value=round_number,
                              first_new_id=100_000 + 1000 * round_number)
                round_number += 1
            time.sleep(0.5)
    finally:
        _kill_group(first)
    assert first.returncode == -signal.SIGKILL
    assert '"kind":"stream"' in log.read_text()  # batches with changes ran before the kill

    # 2. more changes, then resume on the cluster until caught up.
    apply_changes(root, fresh_database, rounds=4, seed_value=99, first_new_id=900_000)
    second = _replicator_run(pipeline_file, master, env, log, "--until-caught-up")
    try:
        second.wait(timeout=300)
    finally:
        if second.poll() is None:
            _kill_group(second)
    output = log.read_text()
    assert second.returncode == 0, output[-3000:]

    # The work ran on the cluster: the worker holds executor directories of both runs, and
    # the executors fetched the package zip shipped on --py-files.
    work = Path(spark_cluster["dir"]) / "work"
    apps = sorted(path.name for path in work.iterdir() if path.name.startswith("app-"))
    assert len(apps) >= 2, apps
    assert list(work.glob(f"{apps[-1]}/*/replicator-*.zip")), list(work.glob(f"{apps[-1]}/*/*"))

    import duckdb

    pipeline = load_pipeline(pipeline_file, environ=env)
    with duckdb.connect(str(tmp_path / "warehouse.duckdb"), read_only=True) as target:
        assert_target_equals_source(pipeline, root, target)
        for table in ("CUSTOMERS", "ORDERS", "AWKWARD"):
            total, distinct = target.execute(
                f'SELECT COUNT(*), COUNT(DISTINCT "ID") FROM main."{table}"'
            ).fetchone()
            assert total == distinct, f"{table}: duplicate keys after the restart"
    root.close()
