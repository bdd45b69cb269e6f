"""``replicator plan`` reports plan problems like ``validate``: codes, YAML positions, formats."""

from __future__ import annotations

import ast
import json
import subprocess
import sys
from pathlib import Path

from replicator.config.diagnostics import CODES
from replicator.plan.problems import PLAN_CODES

ROOT = Path(__file__).resolve().parents[2]

PIPELINE = """\
version: 1
name: probe
source:
  mysql: {host: 127.0.0.1, user: replicator}
target:
  duckdb: {path: ./w.duckdb}
tables:
  - source: shop.orders
    columns:
      id: {source_type: bigint}
  - source: shop.customers
    columns:
      id: {source_type: bigint}
      name: {}
  - source: shop.items
"""


def _plan(tmp_path: Path, output_format: str) -> subprocess.CompletedProcess[str]:
    path = tmp_path / "probe.yaml"
    path.write_text(PIPELINE)
    return subprocess.run(
        [sys.executable, "-m", "replicator", "plan", str(path), "--offline", "--format",
         output_format],
        capture_output=True, text=True, cwd=tmp_path, timeout=120,
        env={"PATH": "/usr/bin:/bin", "NO_COLOR": "1", "PYTHONPATH": str(ROOT)},
    )


def test_plan_problems_point_at_the_yaml_setting(tmp_path: Path) -> None:
    process = _plan(tmp_path, "json")
    assert process.returncode == 1, process.stderr
    found = [(d["code"], d["line"], d["col"]) for d in json.loads(process.stdout)["diagnostics"]]
    # `name: {}` has no source_type (line 14, the value after the key); shop.items declares
    # no columns at all (its entry, line 15).
    assert found == [("R309", 14, 13), ("R309", 15, 5)]


def test_plan_problems_as_github_annotations(tmp_path: Path) -> None:
    process = _plan(tmp_path, "github")
    assert process.returncode == 1
    lines = process.stdout.splitlines()
    assert lines[0].startswith("::error file=") and ",line=14,col=13,title=R309::" in lines[0]
    assert len(lines) == 2


def test_plan_problems_as_text_on_stderr(tmp_path: Path) -> None:
    process = _plan(tmp_path, "sql")
    assert process.returncode == 1
    assert process.stdout == ""
    assert ":14:13: error[R309]: shop.customers: no source_type declared for 'name'" in process.stderr
    assert "1 file, 2 errors, 0 warnings" in process.stderr


def test_every_code_the_plan_reports_is_registered_and_documented() -> None:
    docs = (ROOT / "docs" / "diagnostics.md").read_text()
    used = set()
    for path in (ROOT / "replicator" / "plan").glob("*.py"):
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.keyword) and node.arg == "code" and isinstance(
                    node.value, ast.Constant):
                used.add(node.value.value)
    assert used, "no codes found: the test no longer sees the plan's problems.add calls"
    unknown = sorted(used - set(PLAN_CODES) - set(CODES))
    assert not unknown, f"codes used by the plan but not registered: {unknown}"
    for code in PLAN_CODES:
        assert f"| {code} |" in docs, f"{code} is missing from docs/diagnostics.md"
