"""The driver's apply into DuckDB alone, on a real run's micro-batches: CPU per change, per statement.

    python -m bench.apply_duckdb land DIR --changes 300000     # throwaway MariaDB, once
    PYTHONPATH=<checkout> python bench/apply_duckdb.py apply DIR --rounds 1 [--statements] [--duckdb threads=1]

``land``: the bench workload (``bench.workload``, 3 tables) run once by ``replicator run`` into
a throwaway target, its landing zone kept (``engine.landing``: DIR/landing) with the batch
ends of its log: each micro-batch's files, as the executors landed them. ``apply``: in a
fresh process (the checkout on PYTHONPATH is the one measured: an A/B of two checkouts runs
the same files through each), a fresh DuckDB target, the setup program, then every batch
applied as the engine applies a stream batch of landed files (``Applier.apply_files``'
warehouse road: the facts of the files, the transform step's statement, ``sink.apply`` with
the files: one transaction per table). ``--rounds`` repeats the whole sequence under new batch
ids (the first round grows the target from empty, as the e2e run does; the later ones merge
into the filled target). Prints the CPU (the process's, every thread: DuckDB's too) and wall
per change of each round, the CPU of the close (DuckDB's last checkpoint), and with
``--statements`` the seconds (wall/CPU) of each statement of the last round (the session's
cursors timed). No Spark: this is the e2e run's "driver's apply" part
(docs/decisions/duckdb-apply-last-change.md).
"""

from __future__ import annotations

import argparse
import json
import shutil
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

MANIFEST = "manifest.json"
PIPELINE = "apply.yaml"
TARGET = "apply.duckdb"


def land(directory: Path, changes: int) -> None:
    """The bench workload run once by ``replicator run`` (the real micro-batches: the
    planner's batch ends, one file per table and decode task), its landing zone kept: each
    batch's manifest rows are its task directories' files."""
    import pyarrow.parquet as pq

    from bench import workload
    from bench.context import BenchContext, Sizes, replicator_command
    from bench.pipelines import write_pipeline
    from bench.run import SERVER_ARGS
    from replicator.source.throwaway import ThrowawayMariaDB

    directory.mkdir(parents=True, exist_ok=True)
    landing = directory / "landing"
    with ThrowawayMariaDB(extra_args=SERVER_ARGS) as server:
        ctx = BenchContext(server, directory, Sizes(changes=changes))
        generated = workload.generate(server.socket, "bench", changes)
        pipeline = write_pipeline(directory / PIPELINE, name="apply", database="bench",
                                  target="duckdb", start=generated.start,
                                  server_id=ctx.next_server_id(), landing=str(landing))
        run = subprocess.run([*replicator_command(), "run", str(pipeline), "--until-caught-up",
                              "--log-format", "json"], env=ctx.environment(),
                             cwd=str(directory), capture_output=True, text=True, check=True)
    ends = [line["end_offset"] for line in map(_json_line, run.stdout.splitlines()
                                               + run.stderr.splitlines())
            if line and line.get("kind") == "stream"]
    tasks = sorted((path for path in landing.glob("stream/epoch=*/*") if path.is_dir()),
                   key=lambda path: int(path.name.split("-mysql-bin")[0].rsplit("_", 1)[1]))
    batches: list[list[dict[str, Any]]] = [[] for _ in ends]
    for task in tasks:
        task_end = int(task.name.rsplit("_", 1)[1])
        number = next(n for n, end in enumerate(ends) if task_end <= int(end["pos"]))
        for path in sorted(task.glob("*.parquet")):
            table = path.stem.split("-", 1)[1]
            batches[number].append({"kind": "rows", "table": table, "path": str(path),
                                    "rows": pq.read_metadata(path).num_rows})
    for path in directory.glob("apply.duckdb*"):
        path.unlink()
    (directory / MANIFEST).write_text(json.dumps(
        {"changes": generated.changes, "ends": ends, "batches": batches}, indent=1) + "\n")
    print(f"landed {generated.changes} changes in {len(batches)} batches: {directory}",
          file=sys.stderr)


def _json_line(text: str) -> dict[str, Any] | None:
    try:
        line = json.loads(text)
    except ValueError:
        return None
    return line if isinstance(line, dict) else None


def apply(directory: Path, rounds: int, statements: bool,
          settings: dict[str, str] | None = None) -> dict[str, Any]:
    import duckdb
    import pyarrow  # noqa: F401  (imported before the clocks start)

    from replicator.context import Context
    from replicator.engine.job.landing import file_facts
    from replicator.plan.dialects import DUCKDB
    from replicator.sink.duckdb import DuckDBSink, default_settings
    from replicator.transform import file_staging

    landed = json.loads((directory / MANIFEST).read_text())
    target = directory / TARGET
    for path in (target, Path(f"{target}.wal")):
        path.unlink(missing_ok=True)
    environ = {"MYSQL_PORT": "3306", "MYSQL_PASSWORD": "unused"}
    given = ", ".join(f"{name}: {json.dumps(value)}" for name, value in (settings or {}).items())
    text = (directory / PIPELINE).read_text().replace(
        json.dumps(str(directory / "apply.duckdb")),
        json.dumps(str(target)) + (f", settings: {{{given}}}" if given else ""))
    (directory / "run.yaml").write_text(text)
    context = Context.load(directory / "run.yaml", environ=environ, offline=True)
    plan = context.plan
    # Opened as DuckDBSink opens it (its default settings under the user's), then timed.
    config = {**default_settings(str(target), dict(settings or {})), **(settings or {})}
    timing = _TimedConnection(duckdb.connect(str(target), config=config))
    sink = DuckDBSink(context.pipeline, plan, connection=timing)
    sink.prepare()
    runs = []
    for number in range(rounds):
        timing.timed = statements and number == rounds - 1
        cpu, wall = time.process_time(), time.perf_counter()
        for batch_number, (files, end) in enumerate(zip(landed["batches"], landed["ends"],
                                                        strict=True)):
            for table_plan in plan.tables:
                paths = [row["path"] for row in files if table_plan.reads(row["table"].lower())]
                facts = file_facts(paths)
                assert facts is not None
                try:  # what the engine's stream road asks in a checkout before this flag went
                    query = file_staging(table_plan, facts.schemas, DUCKDB, snapshot=False)
                except TypeError:
                    query = file_staging(table_plan, facts.schemas, DUCKDB)
                assert query is not None, "the warehouse road: DuckDB stages the files"
                sink.apply(table_plan, number * 1000 + batch_number, end, paths, query=query)
        cpu, wall = time.process_time() - cpu, time.perf_counter() - wall
        runs.append({"cpu_us_per_change": round(cpu / landed["changes"] * 1e6, 2),
                     "wall_us_per_change": round(wall / landed["changes"] * 1e6, 2)})
        print(json.dumps(runs[-1]), file=sys.stderr, flush=True)
    later = runs[1:] or runs
    result = {
        "changes": landed["changes"], "rounds": rounds, "runs": runs,
        "first_cpu_us_per_change": runs[0]["cpu_us_per_change"],
        "later_cpu_us_per_change_median": statistics.median(r["cpu_us_per_change"] for r in later),
        "later_wall_us_per_change_median": statistics.median(r["wall_us_per_change"] for r in later),
        "threads": sink.connection.execute("SELECT current_setting('threads')").fetchone()[0],
    }
    if statements:
        result["statement_seconds_wall_cpu"] = {
            name: [f"{wall:.4f}/{cpu:.4f}" for wall, cpu in seconds]
            for name, seconds in timing.seconds.items()}
    cpu, wall = time.process_time(), time.perf_counter()
    sink.close()  # DuckDB checkpoints what the WAL still holds: the run's shutdown
    result["close_cpu_us_per_change"] = round((time.process_time() - cpu) / landed["changes"] * 1e6, 2)
    result["close_wall_seconds"] = round(time.perf_counter() - wall, 3)
    return result


class _TimedConnection:
    """A DB-API connection whose cursors time each statement (wall and CPU) once ``timed``,
    keyed by the statement's first words (the table's name is among them)."""

    def __init__(self, inner: Any) -> None:
        self.inner = inner
        self.timed = False
        self.seconds: dict[str, list[tuple[float, float]]] = {}

    def cursor(self) -> Any:
        return _TimedCursor(self.inner.cursor(), self)

    def __getattr__(self, name: str) -> Any:
        return getattr(self.inner, name)


class _TimedCursor:
    def __init__(self, inner: Any, connection: _TimedConnection) -> None:
        self.inner = inner
        self.connection = connection

    def execute(self, sql: str, *args: Any) -> Any:
        if not self.connection.timed:
            return self.inner.execute(sql, *args)
        began, cpu = time.perf_counter(), time.process_time()
        try:
            return self.inner.execute(sql, *args)
        finally:
            key = " ".join(sql.split()[:3])
            self.connection.seconds.setdefault(key, []).append(
                (time.perf_counter() - began, time.process_time() - cpu))

    def __getattr__(self, name: str) -> Any:
        return getattr(self.inner, name)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="bench/apply_duckdb.py", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("step", choices=("land", "apply"))
    parser.add_argument("directory", type=Path)
    parser.add_argument("--changes", type=int, default=300_000)
    parser.add_argument("--rounds", type=int, default=1)
    parser.add_argument("--statements", action="store_true")
    parser.add_argument("--duckdb", action="append", default=[], metavar="KEY=VALUE",
                        help="a setting of the target (target.duckdb.settings); repeatable")
    args = parser.parse_args(argv)
    if args.step == "land":
        if args.directory.exists():
            shutil.rmtree(args.directory)
        land(args.directory.resolve(), args.changes)
        return 0
    print(json.dumps(apply(args.directory.resolve(), args.rounds, args.statements,
                           dict(item.split("=", 1) for item in args.duckdb)), indent=1))
    return 0


if __name__ == "__main__":
    if __package__ in (None, ""):
        # Run as a file (the checkout on PYTHONPATH is measured): bench/ itself is not a
        # place to import from (its profile.py would shadow the standard library's).
        sys.path[:] = [p for p in sys.path if Path(p).resolve() != Path(__file__).parent]
    raise SystemExit(main())
