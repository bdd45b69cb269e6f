"""The commands the README and docs/*.md show for CI use must work as written.

Every line of a fenced code block in README.md and docs/*.md that runs ``replicator
validate``, ``replicator plan ... --offline`` or ``replicator schema`` (also as a GitHub Actions
``run:`` step) is run from the repository root and must exit 0. These are the commands that
need no server, warehouse or Java; the others (``run``, ``check``, ``status``, ``verify``) are
exercised by the end-to-end tests. Lines that use shell variables, pipes or redirection are
left out (they are templates, not commands); globs are expanded as the shell would.
"""

from __future__ import annotations

import glob
import re
import shlex
from dataclasses import dataclass
from pathlib import Path

import pytest
from typer.testing import CliRunner

from replicator.cli.main import app

ROOT = Path(__file__).resolve().parents[2]
DOCUMENTS = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
FENCE = re.compile(r"^\s*(```|~~~)")
# What may stand before the command on its line: a prompt, a YAML list item, a `run:` key.
PREFIX = re.compile(r"^\s*(?:\$\s+|-\s+)?(?:run:\s*)?")
SHELL_SYNTAX = re.compile(r"[$|;&<>`]")
RUNNABLE = {"validate", "schema", "plan"}


@dataclass(frozen=True)
class DocCommand:
    document: str
    line: int
    text: str

    @property
    def argv(self) -> list[str]:
        words = shlex.split(self.text, comments=True)[1:]
        expanded: list[str] = []
        for word in words:
            matches = sorted(glob.glob(word, root_dir=ROOT)) if "*" in word else []
            expanded.extend(matches or [word])
        return expanded

    def __str__(self) -> str:
        return f"{self.document}:{self.line}: {self.text}"


def runnable_command(line: str) -> str | None:
    """The ``replicator ...`` command on a code line, if it is one this test can run here."""
    text = PREFIX.sub("", line, count=1).strip()
    if not text.startswith("replicator "):
        return None
    try:
        words = shlex.split(text, comments=True)
    except ValueError:  # continued on the next line (a trailing \) or an open quote
        return None
    if len(words) < 2 or words[1] not in RUNNABLE:
        return None
    if words[1] == "plan" and "--offline" not in words:
        return None  # a live plan needs MySQL
    if words[1] != "schema" and all(word.startswith("-") for word in words[2:]):
        return None  # the command named in prose ("`replicator validate` reports ..."), no file
    command = shlex.join(words)
    if SHELL_SYNTAX.search(command) or any(
        word.isupper() or "..." in word or word.startswith("[") for word in words
    ):
        return None  # a template (FILE, [--offline], $pipeline, > out.sql), not a command
    return text


INLINE = re.compile(r"`(replicator [^`]+)`")


def doc_commands(documents: list[Path]) -> list[DocCommand]:
    """Commands on the lines of fenced code blocks, and in inline code spans elsewhere."""
    found: list[DocCommand] = []
    for document in documents:
        name = str(document.relative_to(ROOT) if document.is_relative_to(ROOT) else document)
        inside, pending, first = False, "", 0
        for number, line in enumerate(document.read_text(encoding="utf-8").splitlines(), 1):
            if FENCE.match(line):
                inside, pending = not inside, ""
                continue
            if inside and line.rstrip().endswith("\\"):  # a command continued on the next line
                first = first if pending else number
                pending += line.rstrip()[:-1] + " "
                continue
            if pending:
                line, number, pending = pending + line.strip(), first, ""
            candidates = [line] if inside else INLINE.findall(line)
            for candidate in candidates:
                if command := runnable_command(candidate):
                    found.append(DocCommand(name, number, command))
    return found


COMMANDS = doc_commands(DOCUMENTS)


def test_the_extractor_finds_commands_and_skips_templates() -> None:
    assert runnable_command("replicator validate pipelines/  # lint") == "replicator validate pipelines/  # lint"
    assert runnable_command("      - run: replicator validate --format github pipelines/")
    assert runnable_command("$ replicator schema") == "replicator schema"
    assert runnable_command("replicator plan pipelines/trips.yaml") is None  # live plan
    assert runnable_command('replicator plan "$pipeline" --offline') is None
    assert runnable_command("replicator plan FILE --offline") is None
    assert runnable_command("replicator run pipelines/trips.yaml") is None
    assert runnable_command("replicator schema > pipeline.schema.json") is None
    assert runnable_command("replicator plan --offline") is None  # named in prose, no file
    assert runnable_command("replicator validate \\") is None  # continued on the next line
    # the documents do show such commands: CI use in the README and docs/ci.md at least
    documents = {command.document for command in COMMANDS}
    assert {"README.md", "docs/ci.md"} <= documents, documents
    assert any("--offline" in command.text for command in COMMANDS)


def test_a_command_continued_over_lines_is_one_command(tmp_path: Path) -> None:
    page = tmp_path / "page.md"
    page.write_text("```bash\nreplicator plan pipelines/trips.yaml \\\n    --offline\n```\n"
                    "Run `replicator validate pipelines/` first.\n")
    found = doc_commands([page])
    assert [(c.line, c.argv) for c in found] == [
        (2, ["plan", "pipelines/trips.yaml", "--offline"]),
        (5, ["validate", "pipelines/"]),
    ]


@pytest.mark.parametrize("command", COMMANDS, ids=[str(c) for c in COMMANDS])
def test_documented_command_exits_0(command: DocCommand, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(ROOT)
    result = CliRunner().invoke(app, command.argv, env={"NO_COLOR": "1"})
    assert result.exception is None or isinstance(result.exception, SystemExit), (
        f"{command}\n{result.output}"
    )
    assert result.exit_code == 0, f"{command} exited {result.exit_code}:\n{result.output}"
    assert result.stdout.strip() or command.argv[0] == "validate", f"{command} printed nothing"
