"""``replicator validate`` must not load the heavy libraries, and must start fast.

It runs in CI without Java or database drivers; ``cli/main.py`` imports every command
module, so this also guards the other commands' module-level imports.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
HEAVY = ["pyspark", "duckdb", "snowflake", "pymysqlreplication", "pymysql", "pyarrow", "pandas",
         "fakesnow", "py4j", "numpy"]
SCRIPT = """
import json, sys, time
path, heavy_names, command = sys.argv[1], set(json.loads(sys.argv[2])), sys.argv[3:]
started = time.perf_counter()
import replicator.cli.main as cli
imported = time.perf_counter()
sys.argv = ["replicator", *command, path]
try:
    cli.main()
except SystemExit as exc:
    code = exc.code
finished = time.perf_counter()
heavy = sorted({name.split(".")[0] for name in sys.modules} & heavy_names)
ours = sorted(name for name in ("replicator.source.snapshot", "replicator.plan.pushdown",
                                "replicator.plan.expressions.checker") if name in sys.modules)
print(json.dumps({"code": code, "heavy": heavy, "ours": ours, "rich": "rich" in sys.modules,
                  "import_s": imported - started,
                  "total_s": finished - started}), file=sys.stderr)
"""


def test_validate_loads_no_heavy_library_and_is_fast() -> None:
    path = ROOT / "pipelines" / "trips.yaml"
    process = subprocess.run(
        [sys.executable, "-c", SCRIPT, str(path), json.dumps(HEAVY), "validate"],
        capture_output=True, text=True, cwd=ROOT, timeout=60,
        env={"PATH": "/usr/bin:/bin", "NO_COLOR": "1"},
    )
    report = json.loads(process.stderr.strip().splitlines()[-1])
    print(f"\nimport replicator.cli.main: {report['import_s']:.3f}s, "
          f"validate one file in total: {report['total_s']:.3f}s")
    assert report["code"] == 0, process.stdout
    assert report["heavy"] == [], f"validate imported {report['heavy']}"
    # Nor our own heavy modules: the snapshot's chunk SELECT brings the expression checker
    # (~35 ms), which a file without filters or computed columns never needs.
    assert report["ours"] == [], f"validate imported {report['ours']}"
    # Plain output (CI, a pipe) is written without rich: ~25 ms of start-up (bench startup).
    assert report["rich"] is False
    # Generous: the point is "no Spark/driver start-up", not a benchmark (~0.2 s measured).
    assert report["total_s"] < 5


def test_an_offline_plan_loads_no_heavy_library() -> None:
    """`plan --offline` prints the snapshot's SELECT and the staging SQL; it imports those
    modules (``source.snapshot``, ``transform.stage``), never the libraries that run them."""
    process = subprocess.run(
        [sys.executable, "-c", SCRIPT, str(ROOT / "pipelines" / "awkward_types.yaml"),
         json.dumps(HEAVY), "plan", "--offline"],
        capture_output=True, text=True, cwd=ROOT, timeout=60,
        env={"PATH": "/usr/bin:/bin", "NO_COLOR": "1"},
    )
    report = json.loads(process.stderr.strip().splitlines()[-1])
    assert report["code"] == 0, process.stdout
    assert report["heavy"] == [], f"plan --offline imported {report['heavy']}"
