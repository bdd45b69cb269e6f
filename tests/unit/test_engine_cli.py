"""`replicator run` / `status` at the command line: usage errors exit 2 before anything heavy
starts, and loading the commands imports no engine dependency."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
HEAVY = ("pyspark", "duckdb", "snowflake", "pymysql", "pymysqlreplication", "pyarrow")

PROBE = """
import sys
sys.argv = ["replicator"] + {args!r}
from replicator.cli.main import main
try:
    main()
except SystemExit as exc:
    code = exc.code
heavy = sorted(m for m in {heavy!r} if m in sys.modules)
sys.stderr.write("EXIT=" + str(code) + " HEAVY=" + ",".join(heavy) + "\\n")
"""


def replicator(*args: str) -> subprocess.CompletedProcess:
    code = PROBE.format(args=list(args), heavy=HEAVY)
    return subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          cwd=ROOT, timeout=60)


def test_help_of_run_and_status_imports_nothing_heavy():
    for command in ("run", "status"):
        done = replicator(command, "--help")
        assert "EXIT=0 HEAVY=\n" in done.stderr, done.stderr
        assert "--until-caught-up" in done.stdout or "--format" in done.stdout


def test_a_missing_pipeline_file_is_a_usage_error(tmp_path):
    done = replicator("run", str(tmp_path / "nope.yaml"), "--until-caught-up")
    assert "EXIT=2" in done.stderr and "error:" in done.stderr


def test_a_bad_conf_pair_is_a_usage_error_naming_the_form():
    done = replicator("run", str(ROOT / "pipelines" / "quickstart.yaml"), "--conf", "oops")
    assert "EXIT=2" in done.stderr and "KEY=VALUE" in done.stderr
    assert "HEAVY=\n" in done.stderr  # rejected before Spark or a driver was loaded


def test_bad_snapshot_mode_is_rejected_by_the_command_line():
    done = replicator("run", str(ROOT / "pipelines" / "quickstart.yaml"), "--snapshot", "sometimes")
    assert "EXIT=2" in done.stderr
