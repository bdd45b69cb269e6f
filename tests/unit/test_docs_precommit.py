""".pre-commit-hooks.yaml: the hook parses, its entry is a real command, its file pattern
selects pipeline files, and the command it runs passes good files and fails bad ones."""

from __future__ import annotations

import re
import shutil
import tomllib
from pathlib import Path

import yaml
from typer.testing import CliRunner

from replicator.cli.main import app

ROOT = Path(__file__).resolve().parents[2]
HOOKS = yaml.safe_load((ROOT / ".pre-commit-hooks.yaml").read_text())
HOOK = next(hook for hook in HOOKS if hook["id"] == "replicator-validate")
runner = CliRunner()


def test_hook_declares_what_pre_commit_needs() -> None:
    assert isinstance(HOOKS, list)
    for hook in HOOKS:  # pre-commit's required keys
        assert {"id", "name", "entry", "language"} <= set(hook)
    assert HOOK["language"] == "python"  # pre-commit pip-installs this repository
    assert HOOK["pass_filenames"] is True


def test_entry_is_the_installed_script_and_a_registered_command() -> None:
    program, subcommand = HOOK["entry"].split()
    scripts = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["scripts"]
    assert program in scripts
    assert scripts[program] == "replicator.cli.main:main"
    registered = {command.name for command in app.registered_commands}
    assert subcommand in registered


def test_file_pattern_selects_pipeline_files_only() -> None:
    pattern = re.compile(HOOK["files"])
    for path in ["pipelines/trips.yaml", "pipelines/shop.yml"]:
        assert pattern.search(path), path
    for path in ["tests/examples/invalid/R101_unknown_key.yaml", "docker-compose.yml",
                 "pipelines/README.md", "pipelines.yaml"]:
        assert not pattern.search(path), path
    selected = [p for p in ROOT.glob("pipelines/*") if pattern.search(f"pipelines/{p.name}")]
    assert len(selected) == len(list(ROOT.glob("pipelines/*.y*ml"))) > 0


def _hook(*files: Path):
    """What pre-commit runs: the entry's arguments, then the selected file names."""
    _, subcommand = HOOK["entry"].split()
    return runner.invoke(app, [subcommand, *map(str, files)], env={"NO_COLOR": "1"})


def test_hook_passes_the_repository_pipelines() -> None:
    pattern = re.compile(HOOK["files"])
    files = sorted(p for p in ROOT.glob("pipelines/*") if pattern.search(f"pipelines/{p.name}"))
    result = _hook(*files)
    assert result.exit_code == 0, result.output


def test_hook_fails_a_bad_pipeline_with_a_located_error(tmp_path: Path) -> None:
    bad = tmp_path / "pipelines" / "orders.yaml"
    bad.parent.mkdir()
    shutil.copy(ROOT / "pipelines" / "trips.yaml", bad)
    bad.write_text(bad.read_text().replace("max_rows: 50000", "max_rows: '5000'"))
    assert "'5000'" in bad.read_text()
    result = _hook(bad)
    assert result.exit_code == 1
    assert re.search(r"orders\.yaml:\d+:\d+: error\[R102\]", result.stdout), result.stdout
