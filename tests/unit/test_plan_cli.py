"""`replicator plan --offline`: no server, no heavy imports, fast; output per format."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
PIPELINES = sorted((ROOT / "pipelines").glob("*.yaml"))
HEAVY = ("pyspark", "duckdb", "snowflake", "pymysql", "pymysqlreplication", "pyarrow", "pandas")

PROBE = """
import sys
sys.argv = ["replicator", "plan", {path!r}, "--offline"] + {extra!r}
from replicator.cli.main import main
try:
    main()
except SystemExit as exc:
    assert not exc.code, exc.code
heavy = sorted(m for m in {heavy!r} if m in sys.modules)
sys.stderr.write("HEAVY=" + ",".join(heavy) + "\\n")
"""


def run_plan(path: Path, *extra: str) -> subprocess.CompletedProcess:
    code = PROBE.format(path=str(path), extra=list(extra), heavy=HEAVY)
    return subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          cwd=ROOT, timeout=60)


@pytest.mark.parametrize("pipeline_file", PIPELINES, ids=lambda p: p.stem)
def test_offline_plan_imports_nothing_heavy(pipeline_file):
    # Its start-up time is measured by `bench/run --only startup`, not asserted here: a timed
    # assertion failed at load ~20 with the code unchanged (issue 21: timing changes speed,
    # never results). What decides the speed, and can fail, is the heavy imports.
    done = run_plan(pipeline_file)
    assert done.returncode == 0, done.stderr
    assert "HEAVY=\n" in done.stderr, done.stderr
    assert "MERGE INTO" in done.stdout and "offline" in done.stderr


def test_json_format_and_dialect_override():
    done = run_plan(PIPELINES[0], "--format", "json", "--dialect", "snowflake")
    assert done.returncode == 0, done.stderr
    document = json.loads(done.stdout)
    assert document["dialect"] == "snowflake" and document["offline"] is True
    table = document["tables"][0]
    assert {s["purpose"] for s in table["statements"]} >= {"merge staged changes"}
    assert all(c["target_type"] for c in table["columns"])


def test_unknown_table_is_a_usage_error():
    done = subprocess.run(
        [sys.executable, "-m", "replicator", "plan", str(PIPELINES[0]), "--offline",
         "--table", "no.such"],
        capture_output=True, text=True, cwd=ROOT, timeout=60,
    )
    assert done.returncode == 2 and "hint:" in done.stderr


def test_the_atomic_batch_program_is_printed_as_one_transaction(tmp_path):
    """target.atomic: after the tables' own scripts, the one transaction of a batch that
    changed several tables: every table's lookup, load and MERGE, one fence, one COMMIT."""
    modes = ROOT / "pipelines" / "modes.yaml"
    done = run_plan(modes, "--dialect", "duckdb")
    assert done.returncode == 0, done.stderr
    atomic = done.stdout.split("-- target.atomic: ", 1)[1]
    tables = done.stdout.count("-- each batch:")
    assert tables > 1
    assert atomic.count("BEGIN TRANSACTION;") == 1 and atomic.count("COMMIT;") == 1
    assert atomic.count("MERGE INTO") >= 1 and atomic.count("-- record the batch") == tables
    assert atomic.count("left out") == tables and atomic.count("-- renew the run's lease") == 1
    document = json.loads(run_plan(modes, "--format", "json").stdout)
    assert document["atomic"] is True
    purposes = [s["purpose"] for s in document["atomic_batch"]]
    assert purposes.count("record the batch") == tables and purposes[-1] == "commit the batch"

    per_table = tmp_path / "per_table.yaml"
    per_table.write_text(modes.read_text().replace("target:\n", "target:\n  atomic: false\n", 1))
    done = run_plan(per_table)
    assert done.returncode == 0, done.stderr
    assert "-- target.atomic" not in done.stdout and done.stdout.count("-- each batch:") == tables
    assert json.loads(run_plan(per_table, "--format", "json").stdout)["atomic_batch"] == []


PUSHDOWN = """
version: 1
name: pushdown
source:
  mysql: {host: 127.0.0.1, user: replicator}
target:
  duckdb: {path: ./w.duckdb}
tables:
  - source: shop.orders
    key: [id]
    filter: "amount >= 10 AND lower(note) <> 'test'"
    columns:
      id: {source_type: bigint}
      amount: {source_type: "decimal(12,2)"}
      note: {source_type: varchar(20)}
"""


def test_plan_prints_the_snapshot_select_with_the_pushed_down_filter(tmp_path):
    path = tmp_path / "pushdown.yaml"
    path.write_text(PUSHDOWN)
    done = run_plan(path, "--format", "json")
    assert done.returncode == 0, done.stderr
    table = json.loads(done.stdout)["tables"][0]
    assert table["snapshot_pushdown"] == "(`amount` >= 10)"
    assert table["snapshot_select"] == (
        "SELECT `id`, CAST(`amount` AS CHAR) AS `amount`, `note` FROM `shop`.`orders`"
        " WHERE ((`amount` >= 10))")
    done = run_plan(path)
    assert done.returncode == 0, done.stderr
    assert (f"--   {table['snapshot_select']}\n--   (the filter as far as MySQL decides it "
            "exactly as Spark does is pushed down: (`amount` >= 10);") in done.stdout
