"""``scripts/quickstart``: the whole product on one machine, in one command.

Starts a throwaway MariaDB, creates the demo schema with awkward values and seeds it, runs
``replicator run pipelines/quickstart.yaml --until-caught-up`` (snapshot + stream) into
``.quickstart/warehouse.duckdb``, applies a workload, runs again (stream only), prints the
replicated tables and a source-vs-target comparison, stops the server, and prints the wall
time of each phase.

``replicator run`` is started as a separate process, exactly as a user would run it.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

from replicator.cli import render
from replicator.context import Context
from replicator.demo.compare import compare_table
from replicator.demo.workload import apply_changes, create_schema, seed
from replicator.source.throwaway import ThrowawayMariaDB

ROOT = Path(__file__).resolve().parents[2]
PIPELINE = ROOT / "pipelines" / "quickstart.yaml"
DATABASE = "demo"
SHOWN_COLUMNS = 6


def _run_pipeline(env: dict[str, str], label: str) -> None:
    render.info(f"quickstart: {label}: replicator run {PIPELINE.relative_to(ROOT)} --until-caught-up")
    done = subprocess.run(
        [sys.executable, "-m", "replicator", "run", str(PIPELINE), "--until-caught-up"],
        env=env, cwd=ROOT,
    )
    if done.returncode != 0:
        raise SystemExit(f"quickstart: replicator run failed (exit {done.returncode})")


def _show_tables(warehouse: Path) -> None:
    import duckdb

    with duckdb.connect(str(warehouse), read_only=True) as connection:
        for (name,) in connection.execute(
            "SELECT table_name FROM information_schema.tables WHERE table_schema = 'main' "
            "ORDER BY table_name"
        ).fetchall():
            quoted = '"' + name.replace('"', '""') + '"'
            cursor = connection.execute(f"SELECT * FROM main.{quoted} LIMIT 5")
            # Wide tables are cut to their first columns so they fit a terminal.
            columns = [d[0] for d in cursor.description][:SHOWN_COLUMNS]
            rows = [list(row)[:SHOWN_COLUMNS] for row in cursor.fetchall()]
            counted = connection.execute(f"SELECT COUNT(*) FROM main.{quoted}").fetchone()
            count = counted[0] if counted else 0
            render.print_table(f"{name} ({count} rows, first 5)", columns, rows)


def _compare(server, warehouse: Path, env: dict[str, str]) -> bool:
    import duckdb

    plan = Context.load(PIPELINE, environ=env).plan
    rows = []
    equal = True
    with duckdb.connect(str(warehouse), read_only=True) as target, \
            server.root_connection() as source:
        for table in plan.tables:
            result = compare_table(source, target, table)
            equal = equal and result.equal
            rows.append([table.source_name, ".".join(table.target_parts), result.source_rows,
                         result.target_rows, "identical" if result.equal else result.describe()])
    render.print_table("source vs target (every row, every column)",
                       ["source", "target", "source rows", "target rows", "result"], rows)
    return equal


def main() -> int:
    workdir = Path(os.environ.get("QUICKSTART_DIR", ROOT / ".quickstart")).resolve()
    # The server is new each time, so an old checkpoint would point into a binlog that is gone.
    shutil.rmtree(workdir, ignore_errors=True)
    workdir.mkdir(parents=True)
    warehouse = workdir / "warehouse.duckdb"
    phases = Phases()
    if os.environ.get("QUICKSTART_BOOTSTRAP_MS", "").isdigit():  # scripts/quickstart's
        phases.seconds["bootstrap (scripts/bootstrap)"] = int(os.environ["QUICKSTART_BOOTSTRAP_MS"]) / 1000
    with phases.timed("server start (throwaway MariaDB)"), \
            ThrowawayMariaDB(workdir=str(workdir / "mariadb")) as server:
        phases.end()
        render.info(f"quickstart: MariaDB {server.port} on 127.0.0.1 (throwaway, {workdir / 'mariadb'})")
        with phases.timed("demo load (schema + seed)"), server.root_connection() as root:
            create_schema(root, DATABASE)
            seed(root, DATABASE, customers=200, orders=2000, awkward=300)
        source = server.source()
        env = {
            **os.environ,
            "MYSQL_HOST": source.host,
            "MYSQL_PORT": str(source.port),
            "MYSQL_USER": source.user,
            "MYSQL_PASSWORD": source.password or "",
            "QUICKSTART_DIR": str(workdir),
        }
        with phases.timed("first run (snapshot + stream)"):
            _run_pipeline(env, "1/2 snapshot + stream")
        with phases.timed("changes (the workload)"), server.root_connection() as root:
            changes = apply_changes(root, DATABASE, rounds=200)
        render.info(f"quickstart: applied a workload of ~{changes} row changes")
        with phases.timed("second run (stream the new changes)"):
            _run_pipeline(env, "2/2 stream the new changes")
        with phases.timed("compare (tables + every row)"):
            _show_tables(warehouse)
            equal = _compare(server, warehouse, env)
    render.print_table("where the time went", ["phase", "seconds"],
                       [[name, f"{seconds:.1f}"] for name, seconds in phases.seconds.items()])
    first = phases.seconds["first run (snapshot + stream)"]
    second = phases.seconds["second run (stream the new changes)"]
    render.info(f"quickstart: first run {first:.1f} s, second run {second:.1f} s "
                f"(each includes Spark's start-up); warehouse: {warehouse}")
    if not equal:
        render.error("the target differs from the source")
        return 1
    render.info("quickstart: the target equals the source. Query it: "
                + query_command(warehouse, "SELECT * FROM main.AWKWARD LIMIT 3"))
    return 0


class Phases:
    """Wall seconds of each phase, in order (the newcomer sees where the time goes)."""

    def __init__(self) -> None:
        self.seconds: dict[str, float] = {}
        self._open: tuple[str, float] | None = None

    @contextlib.contextmanager
    def timed(self, name: str) -> Iterator[None]:
        self._open = (name, time.perf_counter())
        try:
            yield
        finally:
            self.end()

    def end(self) -> None:
        """The open phase ends here (a phase may end before its ``with`` block does)."""
        if self._open is not None:
            name, started = self._open
            self.seconds[name] = time.perf_counter() - started
            self._open = None


def query_command(warehouse: Path, sql: str) -> str:
    """A shell command that runs ``sql`` on the warehouse with what the set-up installed:
    the venv's Python and its duckdb module (the set-up installs no duckdb CLI)."""
    import json
    import shlex

    python = os.path.relpath(sys.executable) if Path(sys.executable).is_relative_to(
        Path.cwd()) else sys.executable
    # JSON strings are Python literals: double quotes inside the shell's single quotes.
    code = (f"import duckdb; duckdb.connect({json.dumps(str(warehouse))}, read_only=True)"
            f".sql({json.dumps(sql)}).show()")
    return f"{shlex.quote(python)} -c {shlex.quote(code)}"


if __name__ == "__main__":
    sys.exit(main())
