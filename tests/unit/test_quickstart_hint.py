"""The query the quickstart suggests at the end runs with what the set-up installed (the
venv's Python and its duckdb module; no duckdb CLI), through a real shell."""

from __future__ import annotations

import subprocess

import pytest

from replicator.demo.quickstart import query_command


def test_the_suggested_query_command_runs_in_a_shell(tmp_path):
    duckdb = pytest.importorskip("duckdb")
    warehouse = tmp_path / "it's a dir" / "warehouse.duckdb"  # a quote and a space in the path
    warehouse.parent.mkdir()
    with duckdb.connect(str(warehouse)) as connection:
        connection.execute('CREATE TABLE main."AWKWARD" (ID INT, TITLE VARCHAR)')
        connection.execute("INSERT INTO main.\"AWKWARD\" VALUES (1, 'emoji 🐬 and O''Brien')")
    command = query_command(warehouse, "SELECT * FROM main.AWKWARD LIMIT 3")
    assert not command.startswith("duckdb ")
    done = subprocess.run(["bash", "-c", command], capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    assert "emoji 🐬 and O'Brien" in done.stdout
