"""Bad pipeline files given to the commands that *act* (run, plan, check, status, verify).

``tests/unit/test_validate_fuzz.py`` covers ``validate``; here the same kind of broken files
(and a corpus of hostile ones: binary junk, a 50 MB file, ten thousand nested brackets, a
"billion laughs" alias bomb, unset ``${VARS}``) go to every command that would connect,
start Spark or write. Each must: exit 1 or 2, print where the problem is (``file:line:col``),
never a traceback, start no process (Java is a subprocess of py4j), and write nothing (no
checkpoint directory, no DuckDB file) next to the pipeline.

Runs in-process through ``replicator.cli.main.main`` (what the console script calls) for
speed; one subprocess test checks that no engine library is even imported.
"""

from __future__ import annotations

import contextlib
import io
import os
import re
import subprocess
import sys
import time
import tracemalloc
from pathlib import Path
from unittest import mock

import pytest
from hypothesis import HealthCheck, assume, given, settings

from replicator.cli import render
from replicator.cli.main import main
from replicator.config import check_document
from replicator.config.loader import MAX_FILE_BYTES
from tests.unit.test_validate_fuzz import mutated

ROOT = Path(__file__).resolve().parents[2]
COMMANDS = {
    "run": ["run", "{file}", "--until-caught-up"],
    "plan": ["plan", "{file}"],
    "check": ["check", "{file}"],
    "status": ["status", "{file}"],
    "verify": ["verify", "{file}"],
}
HEAVY = ("pyspark", "py4j", "duckdb", "snowflake", "pymysql", "pymysqlreplication", "pyarrow")
_WHERE = re.compile(r"bad\.yaml:\d+:\d+: ")

GOOD = """\
version: 1
name: bad_input
source:
  mysql: {host: 127.0.0.1, port: 1, user: nobody, password: "${HARDENING_PW:-}"}
target:
  duckdb: {path: ./warehouse.duckdb}
batching: {max_rows: 1000, max_delay: 1s}
tables:
  - source: shop.orders
    key: [id]
"""


def _bomb() -> str:
    lines = [GOOD.rstrip("\n"), "x-a0: &a0 [lol, lol, lol, lol, lol, lol, lol, lol, lol, lol]"]
    lines += [f"x-a{i}: &a{i} [{', '.join([f'*a{i - 1}'] * 10)}]" for i in range(1, 10)]
    return "\n".join(lines).replace("tables:\n  - source: shop.orders\n    key: [id]\n", "") + \
        "\nextra: *a9\n"


CORPUS: dict[str, bytes] = {
    "wrong_type": GOOD.replace("max_rows: 1000", "max_rows: '1000'").encode(),
    "missing_tables": GOOD.split("tables:")[0].encode(),
    "missing_source": GOOD.replace("source:\n  mysql", "sorce:\n  mysql").encode(),
    "unknown_key": GOOD.replace("    key: [id]", "    key: [id]\n    kee: [id]").encode(),
    "broken_indentation": GOOD.replace("    key: [id]", "       key: [id]").encode(),
    "tab_indentation": GOOD.replace("  duckdb:", "\tduckdb:").encode(),
    "binary_junk": bytes(range(256)) * 8,
    "junk_in_the_middle": GOOD.encode().replace(b"target:", b"tar\x00\x07get:"),
    "utf16": GOOD.encode("utf-16"),
    "empty": b"",
    "only_comments": b"# nothing here\n",
    "list_at_top": b"- version: 1\n",
    "scalar_at_top": b"just words\n",
    "deep_flow_nesting": b"version: 1\nx: " + b"[" * 20000 + b"]" * 20000 + b"\n",
    "deep_block_nesting": b"".join(b" " * i + b"k:\n" for i in range(200)),
    "alias_bomb": _bomb().encode(),
    "merge_bomb": (GOOD + "x-a: &a {k: v}\n" + "".join(
        f"x-{i}: &m{i} {{<<: [{', '.join(['*a' if i == 0 else f'*m{i - 1}'] * 20)}]}}\n"
        for i in range(8))).encode(),
    "unset_variable": GOOD.replace('"${HARDENING_PW:-}"', "${HARDENING_UNSET_PW}").encode(),
    "malformed_variable": GOOD.replace('"${HARDENING_PW:-}"', '"${HARDENING_PW"').encode(),
    "duplicate_key": GOOD.replace("name: bad_input", "name: bad_input\nname: again").encode(),
    "two_documents": (GOOD + "---\n" + GOOD).encode(),
    "bad_identifier": GOOD.replace("source: shop.orders", "source: shop").encode(),
}


@contextlib.contextmanager
def _in(directory: Path):
    before = os.getcwd()
    os.chdir(directory)
    try:
        yield
    finally:
        os.chdir(before)


def _no_process(*args, **kwargs):
    raise AssertionError(f"a process was started for an invalid pipeline: {args[:1]}")


def invoke(command: str, content: bytes, directory: Path) -> tuple[int, str, str]:
    """Run one command in-process on ``bad.yaml`` in ``directory``; (exit code, out, err)."""
    (directory / "bad.yaml").write_bytes(content)
    return invoke_existing(command, directory)


def invoke_existing(command: str, directory: Path) -> tuple[int, str, str]:
    """Like ``invoke`` on the ``bad.yaml`` already in ``directory``."""
    args = [a.format(file=str(directory / "bad.yaml")) for a in COMMANDS[command]]
    out, err = io.StringIO(), io.StringIO()
    code: int | str | None = 0
    saved = (render.settings.verbosity, render.settings.color, render.settings.debug)
    with (_in(directory), mock.patch.object(sys, "argv", ["replicator", *args]),
          mock.patch("subprocess.Popen", _no_process), mock.patch("os.fork", _no_process),
          mock.patch.dict(os.environ, {"NO_COLOR": "1"}),
          contextlib.redirect_stdout(out), contextlib.redirect_stderr(err)):
        os.environ.pop("HARDENING_UNSET_PW", None)
        try:
            main()
        except SystemExit as exc:
            code = exc.code
        finally:
            (render.settings.verbosity, render.settings.color,
             render.settings.debug) = saved
    return (code if isinstance(code, int) else 1), out.getvalue(), err.getvalue()


def assert_rejected(command: str, content: bytes, directory: Path) -> str:
    code, out, err = invoke(command, content, directory)
    output = out + err
    assert code in (1, 2), f"{command}: exit {code}\n{output}"
    assert "Traceback" not in output, output
    assert _WHERE.search(err), f"{command}: no file:line:col in\n{err}"
    assert "error" in err
    left = sorted(str(p.relative_to(directory)) for p in directory.rglob("*"))
    assert left == ["bad.yaml"], f"{command} wrote {left} for an invalid file"
    return err


@pytest.mark.parametrize("command", sorted(COMMANDS))
@pytest.mark.parametrize("case", sorted(CORPUS))
def test_every_command_rejects_a_bad_file_cleanly(tmp_path, case, command):
    document = check_document("bad.yaml", environ={}, content=CORPUS[case])
    assert any(d.is_error for d in document.diagnostics), f"{case} is not bad"
    assert_rejected(command, CORPUS[case], tmp_path)


def test_the_error_names_the_first_problem_and_how_many_more(tmp_path):
    content = GOOD.replace("max_rows: 1000", "max_rows: '1000'").replace(
        "    key: [id]", "    key: [id]\n    kee: 1").encode()
    err = assert_rejected("run", content, tmp_path)
    assert "bad.yaml:7:" in err and "(and 1 more)" in err
    assert "replicator validate" in err  # the hint says where every problem is listed


@settings(max_examples=60, deadline=None,
          suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much])
@given(mutated())
def test_mutated_example_pipelines_are_rejected_by_every_command(tmp_path_factory, content):
    assume(any(d.is_error for d in check_document("bad.yaml", environ={},
                                                  content=content).diagnostics))
    directory = tmp_path_factory.mktemp("mutated")
    for command in COMMANDS:
        assert_rejected(command, content, directory)


def test_a_50_mb_file_fails_fast_without_reading_it_into_memory(tmp_path):
    huge = tmp_path / "bad.yaml"
    with huge.open("wb") as handle:
        handle.write(GOOD.encode())
        line = b"# " + b"x" * 1021 + b"\n"
        for _ in range(50 * 1024):
            handle.write(line)
    assert huge.stat().st_size > 50 * 1024 * 1024
    tracemalloc.start()
    started = time.perf_counter()
    try:
        for command in ("run", "plan"):
            code, _, err = invoke_existing(command, tmp_path)
            assert code == 1, err
            assert "R007" in err or "larger than 4 MiB" in err
            assert "bad.yaml:1:1: " in err
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    seconds = time.perf_counter() - started
    # ~0.1 s: the file is never parsed. Not a speed target (the memory bound below is the
    # proof); only a guard against the >60 s parse of a 50 MB file this replaced.
    assert seconds < 60, seconds
    assert peak < 3 * MAX_FILE_BYTES, peak  # the 50 MB were never held
    assert sorted(p.name for p in tmp_path.iterdir()) == ["bad.yaml"]


def test_reading_stops_at_the_limit_for_endless_files(tmp_path):
    # /dev/zero never ends: the loader reads one byte past the limit and stops.
    document = check_document("/dev/zero")
    assert [d.code for d in document.diagnostics] == ["R007"]


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


@pytest.mark.parametrize("command", sorted(COMMANDS))
def test_an_invalid_file_loads_no_engine_library(tmp_path, command):
    path = tmp_path / "bad.yaml"
    path.write_bytes(CORPUS["alias_bomb"])
    args = [a.format(file=str(path)) for a in COMMANDS[command]]
    done = subprocess.run([sys.executable, "-c", PROBE.format(args=args, heavy=HEAVY)],
                          capture_output=True, text=True, cwd=tmp_path, timeout=60)
    assert re.search(r"EXIT=[12] HEAVY=\n", done.stderr), done.stderr
    assert "Traceback" not in done.stderr
    assert sorted(p.name for p in tmp_path.iterdir()) == ["bad.yaml"]
