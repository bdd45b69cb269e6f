"""`replicator plan` against the live MySQL schema: columns not declared in the YAML come from
information_schema, and the output says which came from where."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.mysql
ROOT = Path(__file__).resolve().parents[2]


def test_live_plan_reads_undeclared_columns(mariadb, mysql_source, fresh_database, tmp_path):
    with mariadb.root_connection(fresh_database) as connection, connection.cursor() as cursor:
        cursor.execute(
            "CREATE TABLE `Order_Items` (id BIGINT UNSIGNED PRIMARY KEY, `select` VARCHAR(10),"
            " `Mixed Case` DECIMAL(38,10), happened DATETIME(6), dur TIME(3))"
        )
    pipeline_file = tmp_path / "live.yaml"
    pipeline_file.write_text(
        f"""version: 1
name: live
source:
  mysql:
    host: {mysql_source.host}
    port: {mysql_source.port}
    user: {mysql_source.user}
    password: ${{LIVE_PASSWORD:-}}
target:
  duckdb: {{path: ./w.duckdb}}
tables:
  - source: {fresh_database}.Order_Items
    columns:
      dur: {{source_type: time(3)}}
      happened: {{source_type: datetime(3)}}
""",
        encoding="utf-8",
    )
    done = subprocess.run(
        [sys.executable, "-m", "replicator", "plan", str(pipeline_file), "--dialect", "snowflake"],
        capture_output=True, text=True, cwd=ROOT, timeout=60,
        env={**os.environ, "LIVE_PASSWORD": mysql_source.password or ""},
    )
    assert done.returncode == 0, done.stderr
    assert "from the live MySQL schema: id, select, Mixed Case" in done.stderr
    assert "declared in the YAML (checked live): happened, dur" in done.stderr
    assert "declared source_type 'datetime(3)' but MySQL says datetime(6)" in done.stderr
    assert '"ID" NUMBER(20,0) NOT NULL' in done.stdout
    assert '"MIXED CASE" NUMBER(38,10)' in done.stdout
    assert '"HAPPENED" TIMESTAMP_NTZ(6)' in done.stdout
    assert "offline: columns and types come from the YAML" not in done.stderr
