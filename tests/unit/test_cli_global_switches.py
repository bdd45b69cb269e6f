"""Hints say "run again with --debug": the switch works where users type it (issue 29)."""

from __future__ import annotations

import subprocess
import sys

from replicator.cli.main import global_switches_first


def test_value_less_global_switches_move_before_the_command():
    assert global_switches_first(["run", "p.yaml", "--debug"]) == ["--debug", "run", "p.yaml"]
    assert global_switches_first(["--debug", "plan", "p.yaml", "--no-color"]) == [
        "--debug", "--no-color", "plan", "p.yaml"]


def test_words_after_a_double_dash_stay_arguments():
    assert global_switches_first(["run", "p.yaml", "--", "--debug"]) == [
        "run", "p.yaml", "--", "--debug"]


def test_debug_after_the_command_is_accepted_as_typed(tmp_path):
    missing = tmp_path / "missing.yaml"
    done = subprocess.run([sys.executable, "-m", "replicator", "validate", str(missing), "--debug"],
                          capture_output=True, text=True, timeout=60)
    assert "No such option" not in done.stderr
    assert done.returncode in (1, 2), done.stderr
