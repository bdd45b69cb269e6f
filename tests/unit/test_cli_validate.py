"""``replicator validate`` and ``replicator schema`` through the real CLI app."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
from typer.testing import CliRunner

from replicator.cli.main import app

ROOT = Path(__file__).resolve().parents[2]
ACCEPTANCE = ROOT / "tests" / "examples" / "invalid" / "acceptance_five_problems.yaml"
WARNING_ONLY = ROOT / "tests" / "examples" / "invalid" / "R013_literal_password.yaml"
runner = CliRunner()


def run(*args: str):
    return runner.invoke(app, list(args), env={"NO_COLOR": "1"})


def test_example_pipelines_exit_0() -> None:
    result = run("validate", *map(str, sorted((ROOT / "pipelines").glob("*.yaml"))))
    assert result.exit_code == 0, result.output
    assert re.search(r"\d+ files, 0 errors, 0 warnings", result.stdout)


def test_directory_argument_validates_every_yaml_inside() -> None:
    result = run("validate", str(ROOT / "pipelines"))
    count = len(list((ROOT / "pipelines").glob("*.y*ml")))
    assert result.exit_code == 0
    assert f"{count} files, 0 errors" in result.stdout


def test_acceptance_file_exits_1_with_all_five_in_text() -> None:
    result = run("validate", str(ACCEPTANCE))
    assert result.exit_code == 1
    lines = [line for line in result.stdout.splitlines() if ": error[" in line]
    positions = {re.search(r":(\d+:\d+): error\[(R\d+)\]", line).groups() for line in lines}
    assert positions == {("12:3", "R103"), ("16:13", "R102"), ("22:5", "R101"),
                         ("25:21", "R201"), ("31:5", "R005")}
    assert "  hint: remove the quotes: max_rows: 5000" in result.stdout
    assert result.stdout.rstrip().endswith("1 file, 5 errors, 0 warnings")


def test_missing_path_exits_2_with_one_clear_line(tmp_path: Path) -> None:
    result = run("validate", str(tmp_path / "nope.yaml"))
    assert result.exit_code == 2
    assert f"error: {tmp_path / 'nope.yaml'}: no such file" in result.stderr
    assert "Traceback" not in result.output


def test_missing_path_wins_over_findings(tmp_path: Path) -> None:
    result = run("validate", str(ACCEPTANCE), str(tmp_path / "nope.yaml"))
    assert result.exit_code == 2
    assert "5 errors" in result.stdout  # the readable file was still checked


def test_empty_directory_is_a_usage_error(tmp_path: Path) -> None:
    assert run("validate", str(tmp_path)).exit_code == 2


def test_no_arguments_is_a_usage_error() -> None:
    assert run("validate").exit_code == 2


def test_warnings_pass_unless_strict() -> None:
    assert run("validate", str(WARNING_ONLY)).exit_code == 0
    assert run("validate", "--strict", str(WARNING_ONLY)).exit_code == 1


def test_json_format_parses() -> None:
    result = run("validate", "--format", "json", str(ACCEPTANCE), str(WARNING_ONLY))
    assert result.exit_code == 1
    document = json.loads(result.stdout)
    assert document["summary"] == {"files": 2, "errors": 5, "warnings": 1}
    first = document["diagnostics"][0]
    assert set(first) == {"path", "line", "col", "code", "message", "hint", "severity"}


GITHUB = re.compile(
    r"^::(error|warning) file=[^,:]+,line=\d+,col=\d+,title=R\d{3}::[^\n]+$"
)


def test_github_format_lines_are_workflow_commands() -> None:
    result = run("validate", "--format", "github", str(ACCEPTANCE), str(WARNING_ONLY))
    assert result.exit_code == 1
    lines = result.stdout.splitlines()
    assert len(lines) == 6
    for line in lines:
        assert GITHUB.match(line), line
    assert "%0Ahint: " in lines[0]  # the hint travels in the annotation


def test_bad_format_is_a_usage_error() -> None:
    assert run("validate", "--format", "xml", str(ACCEPTANCE)).exit_code == 2


@pytest.mark.parametrize("content", [b"", b"\x00\x01", b"- a\n", b"a: [\n"])
def test_bad_content_exits_1_without_traceback(tmp_path: Path, content: bytes) -> None:
    path = tmp_path / "bad.yaml"
    path.write_bytes(content)
    result = run("validate", str(path))
    assert result.exit_code == 1, result.output
    assert result.exception is None or isinstance(result.exception, SystemExit)
    assert re.search(r"bad\.yaml:\d+:\d+: error\[R00\d\]", result.stdout)


def test_schema_command_prints_the_schema() -> None:
    result = run("schema")
    assert result.exit_code == 0
    assert json.loads(result.stdout) == json.loads(
        (ROOT / "schemas" / "pipeline.schema.json").read_text())


@pytest.mark.parametrize("expression", ["coalesce(en, 'none')", "nvl(en, 0)",
                                        "CASE WHEN id > 1 THEN en ELSE 'small' END"])
def test_expressions_over_columns_of_unknown_type_validate(tmp_path: Path, expression: str) -> None:
    # No source_type and no catalog: validate knows the columns' names only. It traced back
    # with "no cast from string to any" on a literal coerced to an unknown column's type.
    path = tmp_path / "p.yaml"
    path.write_text(
        "version: 1\nname: p\nsource:\n  mysql: {host: 127.0.0.1, user: root}\n"
        "target:\n  duckdb: {path: w.duckdb}\ntables:\n  - source: db.t\n    key: [id]\n"
        f"    columns:\n      label: {{expression: \"{expression}\", type: VARCHAR}}\n")
    result = runner.invoke(app, ["validate", str(path)])
    assert result.exit_code == 0, result.output
    assert "0 errors" in result.output
