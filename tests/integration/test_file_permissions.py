"""What a run leaves on disk is readable by its user only, whatever the umask.

The checkpoint directory holds binlog positions, snapshot chunk plans (key values of the
source rows) and Spark's offset/commit logs; the metrics file names tables; the DuckDB
warehouse holds copies of rows that MySQL shows only to granted users. A real
``replicator run --until-caught-up`` (its own process and JVM, started with umask 022 as on
most machines) snapshots a table and streams a change; then every path under the checkpoint
directory, the metrics file and the warehouse (and its WAL, if any) must have no group or
other permission bits (docs/running.md, "Files and permissions").
"""

from __future__ import annotations

import os
import stat
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

pytestmark = [pytest.mark.mysql, pytest.mark.spark, pytest.mark.slow]

ROOT = Path(__file__).resolve().parents[2]


def _run(path: Path, metrics: Path, env: dict[str, str]) -> None:
    done = subprocess.run(
        [sys.executable, "-m", "replicator", "run", str(path), "--until-caught-up",
         "--metrics-file", str(metrics), "--log-format", "json"],
        capture_output=True, text=True, timeout=300, env=env, cwd=path.parent,
        umask=0o022,  # set by the fork itself: preexec_fn runs Python in a forked threaded process
    )
    assert done.returncode == 0, done.stdout + done.stderr


def _loose(paths) -> list[str]:
    return [f"{oct(stat.S_IMODE(p.lstat().st_mode))} {p}" for p in paths
            if stat.S_IMODE(p.lstat().st_mode) & 0o077]


def test_a_real_run_leaves_only_user_only_files(mariadb, fresh_database, tmp_path):
    with mariadb.root_connection(fresh_database) as root, root.cursor() as cursor:
        cursor.execute("CREATE TABLE items (id INT PRIMARY KEY, name VARCHAR(20))")
        cursor.execute("INSERT INTO items VALUES (1, 'a'), (2, 'b'), (3, 'c')")
    checkpoint = tmp_path / "state" / "checkpoint"
    warehouse = tmp_path / "data" / "warehouse.duckdb"
    warehouse.parent.mkdir()
    metrics = tmp_path / "metrics" / "replicator.prom"
    path = tmp_path / "perm.yaml"
    path.write_text(textwrap.dedent(f"""\
        version: 1
        name: perm
        source:
          mysql:
            host: 127.0.0.1
            port: ${{MYSQL_PORT}}
            user: replicator
            password: ${{MYSQL_PASSWORD}}
        target:
          duckdb: {{path: "{warehouse}"}}
        engine:
          checkpoint: "{checkpoint}"
          conf: {{spark.sql.shuffle.partitions: "2"}}
        tables:
          - source: {fresh_database}.items
        """))
    env = {**os.environ, **mariadb.environment(), "PYTHONPATH": str(ROOT),
           "NO_COLOR": "1"}
    _run(path, metrics, env)
    with mariadb.root_connection(fresh_database) as root, root.cursor() as cursor:
        cursor.execute("UPDATE items SET name = 'changed' WHERE id = 2")
        cursor.execute("DELETE FROM items WHERE id = 3")
    _run(path, metrics, env)

    written = sorted(checkpoint.rglob("*"))
    names = {p.relative_to(checkpoint).as_posix() for p in written}
    # What the run wrote: its own files and Spark's streaming logs.
    assert {"start.json", "run.lock", "stream", "stream/offsets", "stream/commits"} <= names
    assert any(n.startswith("stream/offsets/") for n in names)
    assert any(n.startswith("snapshot/") for n in names), names
    assert _loose([checkpoint, *written]) == []
    assert _loose([metrics]) == [] and metrics.read_text().startswith("#")
    # The warehouse is user data, created user-only (docs/running.md says why).
    assert _loose(p for p in warehouse.parent.iterdir()) == []
    assert warehouse.exists()
