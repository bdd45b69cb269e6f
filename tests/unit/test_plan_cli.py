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


MIXED_ROADS = """
version: 1
name: mixed-roads
source:
  mysql: {host: 127.0.0.1, user: replicator}
target:
  snowflake: {account: acme, database: ANALYTICS, schema: RAW, stage: ANALYTICS.RAW.LANDING}
engine: {landing: "s3://acme/landing"}
tables:
  - source: shop.people
    key: [id]
    columns:
      id: {source_type: int}
      nick: {source_type: varchar(20)}
  - source: shop.notes
    key: [id]
    on_error: dead_letter
    columns:
      id: {source_type: int}
      body: {source_type: longblob}
  - source: shop.outbox
    mode: outbox
    columns:
      id: {source_type: bigint}
      kind: {source_type: varchar(20)}
      payload: {source_type: json}
    outbox:
      type_column: kind
      payload_column: payload
      routes:
        order:
          target: ORDERS
          key: [order_id]
          columns:
            order_id: {path: $.id, type: "NUMBER(20,0)"}
"""


def test_plan_prints_which_road_each_table_takes_under_an_external_stage(tmp_path):
    """target.snowflake.stage with tables it cannot render (dead letters, an outbox route):
    the plan succeeds, warns R312 at each deciding setting, prints the driver's program
    (PUT of staged rows) for those and the stage's COPY for the other, and the atomic
    batch holds both."""
    path = tmp_path / "mixed.yaml"
    path.write_text(MIXED_ROADS)
    done = run_plan(path)
    assert done.returncode == 0, done.stderr
    lines = MIXED_ROADS.split("\n")
    warned = [line for line in done.stderr.splitlines() if "warning[R312]" in line]
    assert len(warned) == 2 and "error[" not in done.stderr, done.stderr
    at = {w.split(": warning", 1)[0].rsplit(":", 2)[1]: w for w in warned}
    assert lines[int(next(k for k, w in at.items() if "shop.notes" in w)) - 1].strip() \
        == "on_error: dead_letter"
    # (a mapping's position is its first key's)
    assert lines[int(next(k for k, w in at.items() if "outbox[order]" in w)) - 2].strip() \
        == "outbox:"
    tables, atomic = done.stdout.split("-- target.atomic: ", 1)
    scripts = ("\n" + tables).split("\n-- shop.")
    people, notes, orders = (next(s for s in scripts if s.startswith(name))
                             for name in ("people ", "notes ", "outbox[order] "))
    assert "COPY INTO" in people and "FROM @ANALYTICS.RAW.LANDING" in people
    assert "by the driver (R312)" not in people
    for script, why in ((notes, "on_error: dead_letter"), (orders, "an outbox route")):
        driver = script.split("by the driver (R312)", 1)[1]
        assert why in script.split("by the driver (R312)", 1)[0].rsplit("\n", 1)[-1] + driver
        assert "PUT 'file://" in driver and "_REPLICATOR_RAW_" not in script
    assert "FROM @ANALYTICS.RAW.LANDING" in atomic and "PUT 'file://" in atomic
    assert atomic.count("COMMIT;") == 2  # the loads', then the batch's: one transaction

    document = json.loads(run_plan(path, "--format", "json").stdout)
    roads = {t["target"]: (t["stage_road"], t["driver_reasons"]) for t in document["tables"]}
    assert roads == {"ANALYTICS.RAW.PEOPLE": ("stage", []),
                     "ANALYTICS.RAW.NOTES": ("driver", ["on_error: dead_letter"]),
                     "ANALYTICS.RAW.ORDERS": ("driver", ["an outbox route"])}
    assert [w["code"] for w in document["warnings"]] == ["R312", "R312"]
