"""Property: whatever is done to a pipeline file, validation reports, it never crashes.

Mutations of the example pipelines: junk bytes, deleted lines, changed indentation, scalars
replaced by values of other types. For each: checking never raises; a file with errors makes
the CLI exit 1 with diagnostics; a file without errors builds a ``Pipeline``.
"""

from __future__ import annotations

import re
from pathlib import Path

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from typer.testing import CliRunner

from replicator.cli.main import app
from replicator.config import check_document
from replicator.config.build import build_pipeline

ROOT = Path(__file__).resolve().parents[2]
SOURCES = [p.read_bytes() for p in sorted((ROOT / "pipelines").glob("*.yaml"))]
_SCALAR = re.compile(rb"(:\s+)([^\s{\[#][^\n#]*)")
WRONG_VALUES = [b"'5000'", b"yes", b"on", b"-1", b"0", b"4294967296", b"null", b"~", b"[]",
                b"{}", b"1.5", b"''", b"'${'", b"${UNSET_FUZZ}", b"2024-01-01", b"&a x",
                b"*nope", b"!!binary aGk=", b"|", b"\"\\x00\"", b"x" * 300]


@st.composite
def mutated(draw: st.DrawFn) -> bytes:
    content = draw(st.sampled_from(SOURCES))
    for _ in range(draw(st.integers(1, 3))):
        lines = content.split(b"\n")
        kind = draw(st.sampled_from(["junk", "delete", "indent", "scalar"]))
        index = draw(st.integers(0, max(len(lines) - 1, 0)))
        if kind == "junk":
            at = draw(st.integers(0, len(content)))
            content = content[:at] + draw(st.binary(min_size=1, max_size=8)) + content[at:]
            continue
        if kind == "delete":
            del lines[index]
        elif kind == "indent":
            shift = draw(st.integers(-4, 4))
            line = lines[index]
            lines[index] = b" " * shift + line if shift >= 0 else line[min(-shift, len(line)):]
        else:
            match = _SCALAR.search(lines[index])
            if match:
                value = draw(st.sampled_from(WRONG_VALUES))
                lines[index] = lines[index][: match.start(2)] + value
        content = b"\n".join(lines)
    return content


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(mutated())
def test_checking_a_mutated_file_never_raises(content: bytes) -> None:
    document = check_document("mutated.yaml", environ={}, content=content)
    errors = [d for d in document.diagnostics if d.is_error]
    for diagnostic in document.diagnostics:
        assert diagnostic.line >= 1 and diagnostic.col >= 1
        assert diagnostic.message
    if not errors:
        build_pipeline(document.data, path="mutated.yaml")  # valid data always builds


@settings(max_examples=40, deadline=None)
@given(mutated())
def test_cli_exits_0_or_1_with_diagnostics(tmp_path_factory, content: bytes) -> None:
    path = tmp_path_factory.mktemp("fuzz") / "mutated.yaml"
    path.write_bytes(content)
    result = CliRunner().invoke(app, ["validate", str(path)], env={"NO_COLOR": "1"})
    assert result.exception is None or isinstance(result.exception, SystemExit), result.output
    assert result.exit_code in (0, 1)
    if result.exit_code == 1:
        assert re.search(r"mutated\.yaml:\d+:\d+: error\[R\d{3}\]", result.stdout)
