"""`replicator plan` / `check` of an outbox against the live MySQL schema: the outbox table
must exist with its type and payload columns; route columns come from the YAML."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.mysql
ROOT = Path(__file__).resolve().parents[2]


def _pipeline(tmp_path: Path, mysql_source, database: str) -> Path:
    path = tmp_path / "outbox.yaml"
    path.write_text(
        f"""version: 1
name: live-outbox
source:
  mysql:
    host: {mysql_source.host}
    port: {mysql_source.port}
    user: {mysql_source.user}
    password: ${{LIVE_PASSWORD:-}}
target:
  duckdb: {{path: ./w.duckdb}}
tables:
  - source: {database}.outbox
    mode: outbox
    outbox:
      type_column: aggregate_type
      payload_column: payload
      routes:
        order:
          target: ORDERS
          key: [order_id]
          columns:
            order_id: {{path: $.id, type: "NUMBER(20,0)"}}
            lines: {{path: $.lines, type: VARIANT}}
""",
        encoding="utf-8",
    )
    return path


def _plan(path: Path, mysql_source) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "replicator", "plan", str(path), "--dialect", "snowflake"],
        capture_output=True, text=True, cwd=ROOT, timeout=60,
        env={**os.environ, "LIVE_PASSWORD": mysql_source.password or "", "NO_COLOR": "1"},
    )


def test_live_plan_of_an_outbox(mariadb, mysql_source, fresh_database, tmp_path):
    with mariadb.root_connection(fresh_database) as connection, connection.cursor() as cursor:
        cursor.execute("CREATE TABLE outbox (id BIGINT AUTO_INCREMENT PRIMARY KEY, "
                       "aggregate_type VARCHAR(64), payload JSON)")
    done = _plan(_pipeline(tmp_path, mysql_source, fresh_database), mysql_source)
    assert done.returncode == 0, done.stderr
    assert done.stdout.startswith(f"-- {fresh_database}.outbox[order] -> ")
    assert '"ORDER_ID" NUMBER(20,0) NOT NULL' in done.stdout
    assert '"LINES" VARIANT' in done.stdout
    assert "columns from the payload (payload): order_id <- $.id, lines <- $.lines" in done.stderr


def test_live_plan_refuses_an_outbox_without_its_columns(mariadb, mysql_source, fresh_database,
                                                         tmp_path):
    with mariadb.root_connection(fresh_database) as connection, connection.cursor() as cursor:
        cursor.execute("CREATE TABLE outbox (id BIGINT PRIMARY KEY, aggregate_type DATETIME, "
                       "body JSON)")
    done = _plan(_pipeline(tmp_path, mysql_source, fresh_database), mysql_source)
    assert done.returncode != 0
    assert "Traceback" not in done.stderr
    assert "outbox type_column 'aggregate_type' is datetime, not a string or integer type" \
        in done.stderr
    assert "outbox payload_column 'payload' is not a column of the table in MySQL" in done.stderr
    assert "id, aggregate_type, body" in done.stderr  # the hint lists the real columns
