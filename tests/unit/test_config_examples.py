"""Every diagnostic code has a failing and a passing example; every shipped pipeline is clean.

Invalid examples carry their expected diagnostics as trailing ``# expect: CODE line:col``
comments (at the end, so they do not move the lines they talk about).
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from replicator.config import load_pipeline, validate_file
from replicator.config.diagnostics import CODES

ROOT = Path(__file__).resolve().parents[2]
EXAMPLES = ROOT / "tests" / "examples"
VALID = sorted((EXAMPLES / "valid").glob("*.yaml"))
INVALID = sorted((EXAMPLES / "invalid").glob("*.yaml"))
PIPELINES = sorted((ROOT / "pipelines").glob("*.yaml"))
# A fixed environment: examples must not depend on the developer's shell.
ENVIRON = {"HOME": "/home/tester"}
_EXPECT = re.compile(r"^# expect: (R\d{3}) (\d+):(\d+)$", re.MULTILINE)


def expected(path: Path) -> list[tuple[str, int, int]]:
    text = path.read_bytes().decode("utf-8", "replace")
    return [(code, int(line), int(col)) for code, line, col in _EXPECT.findall(text)]


@pytest.mark.parametrize("path", INVALID, ids=lambda p: p.stem)
def test_invalid_example_reports_exactly_the_expected_diagnostics(path: Path) -> None:
    want = expected(path)
    assert want, f"{path.name} has no `# expect:` lines"
    found = [(d.code, d.line, d.col) for d in validate_file(path, environ=ENVIRON)]
    assert found == want


@pytest.mark.parametrize("path", VALID, ids=lambda p: p.stem)
def test_valid_example_has_no_findings(path: Path) -> None:
    assert validate_file(path, environ=ENVIRON) == []
    load_pipeline(path, environ=ENVIRON)  # and it builds


@pytest.mark.parametrize("code", sorted(CODES))
def test_every_code_has_a_failing_and_a_passing_example(code: str) -> None:
    failing = [p for p in INVALID if code in {c for c, _, _ in expected(p)}]
    passing = [p for p in VALID if p.name.startswith(f"{code}_")]
    assert failing, f"no tests/examples/invalid file expects {code}"
    assert passing, f"no tests/examples/valid/{code}_*.yaml"


def test_every_reported_code_is_documented() -> None:
    reported = {c for p in INVALID for c, _, _ in expected(p)}
    assert reported <= set(CODES)
    docs = (ROOT / "docs" / "diagnostics.md").read_text()
    for code in CODES:
        assert f"| {code} |" in docs, f"{code} is missing from docs/diagnostics.md"


def test_acceptance_file_gets_all_five_problems() -> None:
    # Issue 2: wrong type, unknown key, missing required key, a key column that does not
    # exist and a duplicate key, each at its line and column.
    path = EXAMPLES / "invalid" / "acceptance_five_problems.yaml"
    found = {(d.code, d.line, d.col) for d in validate_file(path, environ=ENVIRON)}
    assert found == {
        ("R103", 12, 3),  # target.snowflake without schema
        ("R102", 16, 13),  # max_rows: '5000'
        ("R101", 22, 5),  # colums
        ("R201", 25, 21),  # key column `line`
        ("R005", 31, 5),  # target twice
    }


def test_there_are_example_pipelines() -> None:
    names = {p.name for p in PIPELINES}
    assert {"trips.yaml", "hr_regions.yaml", "shop_orders.yaml", "awkward_types.yaml"} <= names


@pytest.mark.parametrize("path", PIPELINES, ids=lambda p: p.name)
def test_pipeline_validates_without_findings(path: Path) -> None:
    # With and without the variables set: every reference in the examples has a default.
    assert validate_file(path, environ={}) == []
    assert validate_file(path, environ={"MYSQL_PASSWORD": "s3cret", "MYSQL_PORT": "3307"}) == []


OWN_PIPELINES = [p for p in PIPELINES if p.name != "quickstart.yaml"]  # the engine team's


@pytest.mark.parametrize("path", OWN_PIPELINES, ids=lambda p: p.name)
def test_pipeline_declares_source_type_for_every_column(path: Path) -> None:
    # plan --offline builds the source catalog from the declared types.
    pipeline = load_pipeline(path, environ={})
    for table in pipeline.tables:
        assert table.columns, f"{table.source_name} declares no columns"
        for column in table.columns:
            if column.computed:
                continue  # not a source column: no MySQL type
            assert column.source_type, f"{table.source_name}.{column.source_column}"
