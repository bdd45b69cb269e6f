"""``replicator run --until-caught-up`` over the workload's range, as a user runs it.

The run is a subprocess with ``--log-format json``: every applied batch writes one JSON line
(``replicator/engine/apply/metrics.py``: changes, rows, seconds, and per table seconds_decode /
seconds_transform / seconds_stage / seconds_merge). Lines are timestamped as they arrive, so
the wall time splits into:

- ``startup``: launch -> the first batch starts (interpreter, catalog, plan, sink prepare,
  JVM and Spark session, the first batch's cut);
- ``spark_read``: inside a batch but outside the measured phases: the batch's Spark job (its
  tasks decode and land the range on the Python workers and return the manifest rows), plus
  reading the landed files back;
- ``decode``: the driver turning the JSON row images back into typed values;
- ``transform``: compaction to the last change per key; ``stage``: Arrow staging and load;
  ``merge``: the MERGE + state row transaction;
- ``between_batches``: cutting the next micro-batch (paging the binlog for a boundary after
  max_rows changes, unless the look-ahead found it) and the batch log;
- ``shutdown``: last batch -> process exit.

The fakesnow run is the same command against fakesnow's HTTP server in a process of its own
(``bench.fakesnow_run``), reached by the real connector through a ``connections.toml``: the
sink's PUT uploads and COPY loads cross HTTP as they would to Snowflake. The server's CPU is
reported apart (``warehouse_cpu_seconds``), like the MySQL server's.
"""

from __future__ import annotations

import contextlib
from pathlib import Path
from typing import Any

from bench.context import BenchContext, replicator_command
from bench.pipelines import SNOWFLAKE_DATABASE, SNOWFLAKE_SCHEMA, write_pipeline
from bench.procmon import RunOutcome, cpu_seconds, run_monitored
from bench.tables import TABLES
from bench.workload import WorkloadResult

PHASES = ("decode", "transform", "stage", "merge")
RUN_TIMEOUT_S = 3600.0


def batch_reports(outcome: RunOutcome, kind: str | None = None) -> list[tuple[float, dict[str, Any]]]:
    """(arrival time, report) of the run's batch report lines, optionally of one kind."""
    return [
        (line.at, line.data)
        for line in outcome.json_lines()
        if line.data is not None and "batch_id" in line.data
        and (kind is None or line.data.get("kind") == kind)
    ]


def notices(outcome: RunOutcome) -> list[tuple[float, str]]:
    return [(line.at, str(line.data["notice"])) for line in outcome.json_lines()
            if line.data is not None and "notice" in line.data]


def phase_split(outcome: RunOutcome, kind: str = "stream") -> dict[str, Any]:
    """Changes, rows and the wall time split into phases (see the module docstring)."""
    reports = batch_reports(outcome, kind)
    summary: dict[str, Any] = {
        "batches": len(reports),
        "changes": sum(int(r["changes"]) for _, r in reports),
        "rows": sum(int(r["rows"]) for _, r in reports),
        "skipped_tables": sum(1 for _, r in reports for t in r["tables"] if t.get("skipped")),
        # the driver's CPU applying the batches, its Spark read excluded (bench/cpu_budget.py)
        "apply_cpu_seconds": round(sum(float(r.get("cpu_seconds", 0.0)) for _, r in reports), 3),
    }
    phases = {name: 0.0 for name in PHASES}
    in_batches = 0.0
    for _, report in reports:
        in_batches += float(report["seconds"])
        for table in report["tables"]:
            for name in PHASES:
                phases[name] += float(table.get(f"seconds_{name}", 0.0))
    if reports:
        first_at, first = reports[0]
        last_at = reports[-1][0]
        first_started = first_at - float(first["seconds"])
        streaming = last_at - first_started
        split = {
            "startup": first_started - outcome.started_at,
            "spark_read": in_batches - sum(phases.values()),
            **phases,
            "between_batches": streaming - in_batches,
            "shutdown": outcome.started_at + outcome.wall_seconds - last_at,
        }
        summary["streaming_seconds"] = round(streaming, 3)
        # Issue 15's "driver CPU per change": the stream's CPU, start-up and shutdown left out.
        window = outcome.usage.cpu_between(first_started, last_at)
        summary["streaming_cpu_seconds_by_role"] = window
        if sum(window.values()) > 0:
            summary["driver_cpu_share_streaming"] = round(
                window.get("driver", 0.0) / sum(window.values()), 3)
    else:
        split = {"startup": outcome.wall_seconds}
        summary["streaming_seconds"] = 0.0
    summary["phases_seconds"] = {k: round(max(0.0, v), 3) for k, v in split.items()}
    return summary


def source_counts(ctx: BenchContext, database: str, tables: list[str]) -> dict[str, int]:
    with ctx.server.root_connection(database) as connection, connection.cursor() as cursor:
        counts = {}
        for table in tables:
            cursor.execute(f"SELECT COUNT(*) FROM `{table}`")
            counts[table] = int(cursor.fetchone()[0])
        return counts


def duckdb_counts(path: Path, tables: list[str]) -> dict[str, int]:
    """Rows per target table, read-only (the writer has exited)."""
    import duckdb

    connection = duckdb.connect(str(path), read_only=True)
    try:
        found = connection.execute(
            "SELECT table_schema, table_name FROM information_schema.tables"
        ).fetchall()
        counts = {}
        for table in tables:
            match = next(((s, n) for s, n in found if n.lower() == table.lower()), None)
            if match is not None:
                schema, name = match
                quoted = '"' + schema.replace('"', '""') + '"."' + name.replace('"', '""') + '"'
                counts[table] = int(connection.execute(f"SELECT COUNT(*) FROM {quoted}").fetchone()[0])
        return counts
    finally:
        connection.close()


def run_e2e(ctx: BenchContext, workload: WorkloadResult, target: str,
            library_rate: float | None, *, decode_partitions: int | str = "auto",
            atomic: bool | None = None, max_rows: int | None = None,
            suffix: str = "", tables: tuple[str, ...] | None = None,
            transforms: dict[str, Any] | None = None,
            conf: tuple[str, ...] = (), stage: bool = False,
            duckdb_settings: dict[str, str] | None = None) -> dict[str, Any]:
    """One ``replicator run --until-caught-up`` of the workload range into ``target``
    (``atomic``: target.atomic, None its default; ``max_rows``: batching.max_rows;
    ``suffix``: a pipeline of its own, when the same settings run again; ``tables``: only
    these of the workload's tables; ``transforms``: ``pipeline_yaml``'s, per table;
    ``conf``: Spark settings KEY=VALUE, ``replicator run --conf``; ``stage``: Snowflake through
    an internal stage the executors PUT the landed files to, the driver only COPYs:
    ``bench.stage``; ``duckdb_settings``: target.duckdb.settings)."""
    name = (f"bench-e2e-{target}" + (f"-p{decode_partitions}" if decode_partitions != "auto" else "")
            + ("" if atomic is None else f"-atomic-{str(atomic).lower()}")
            + ("" if max_rows is None else f"-{max_rows}") + suffix)
    pipeline = write_pipeline(
        ctx.workdir / f"{name}.yaml", name=name, database=workload.database, target=target,
        start=workload.start, server_id=ctx.next_server_id(),
        decode_partitions=decode_partitions, atomic=atomic,
        **({} if max_rows is None else {"max_rows": max_rows}),
        **({} if tables is None else {"tables": [t for t in TABLES if t.name in tables]}),
        transforms=transforms, stage=STAGE if stage else None,
        **({"duckdb_settings": duckdb_settings} if duckdb_settings else {}),
    )
    env = ctx.environment()
    with contextlib.ExitStack() as stack:
        warehouse_pid = None
        if target != "duckdb":
            from bench.fakesnow_run import fakesnow_server

            extra, warehouse_pid = stack.enter_context(fakesnow_server(ctx.workdir))
            env.update(extra)
            if stage:
                create_stage(extra)
        server_cpu = cpu_seconds(ctx.server.pid or 0)
        warehouse_cpu = cpu_seconds(warehouse_pid) if warehouse_pid else 0.0
        outcome = run_monitored(
            [*replicator_command(), "run", str(pipeline), "--until-caught-up",
             "--log-format", "json", *(arg for pair in conf for arg in ("--conf", pair))],
            env=env, cwd=str(ctx.workdir), timeout=RUN_TIMEOUT_S,
        )
        server_cpu = cpu_seconds(ctx.server.pid or 0) - server_cpu
        if warehouse_pid:
            warehouse_cpu = cpu_seconds(warehouse_pid) - warehouse_cpu
    result: dict[str, Any] = {"target": target, "decode_partitions": decode_partitions,
                              **({} if atomic is None else {"atomic": atomic}),
                              **({} if max_rows is None else {"max_rows": max_rows}),
                              "returncode": outcome.returncode,
                              "wall_seconds": round(outcome.wall_seconds, 3)}
    if outcome.returncode != 0:
        result["error"] = outcome.tail()
        result["error_lines"] = outcome.error_lines()
        return result
    split = phase_split(outcome)
    result.update(split)
    changes = split["changes"]
    result["expected_changes"] = workload.changes
    result["changes_per_s"] = round(changes / outcome.wall_seconds, 1) if changes else 0.0
    streaming = split["streaming_seconds"]
    result["changes_per_s_streaming"] = round(changes / streaming, 1) if streaming else 0.0
    if library_rate:
        result["ratio_to_library_decode"] = round(result["changes_per_s"] / library_rate, 3)
        result["ratio_to_library_decode_streaming"] = round(
            result["changes_per_s_streaming"] / library_rate, 3)
    result["usage"] = outcome.usage.to_json()
    result["cpu_s_per_1k_changes"] = (
        round(1000 * outcome.usage.cpu_seconds / changes, 3) if changes else None)
    result["server_cpu_seconds"] = round(server_cpu, 2)
    if target != "duckdb":
        result["warehouse_cpu_seconds"] = round(warehouse_cpu, 2)
    table_names = [spec.name for spec in TABLES if tables is None or spec.name in tables]
    source = source_counts(ctx, workload.database, table_names)
    result["source_rows"] = source
    if target == "duckdb":
        target_rows = duckdb_counts(ctx.workdir / f"{name}.duckdb", table_names)
        result["target_rows"] = target_rows
        result["target_matches_source"] = target_rows == source
    return result


STAGE = f"{SNOWFLAKE_DATABASE}.{SNOWFLAKE_SCHEMA}.LANDING"


def create_stage(environment: dict[str, str], url: str | None = None) -> None:
    """The user's one-time setup of an internal stage, or of an external one over ``url``
    (docs/snowflake.md; fakesnow needs no storage integration)."""
    from bench.fakesnow_run import connect

    with contextlib.closing(connect(environment, SNOWFLAKE_DATABASE, SNOWFLAKE_SCHEMA)) as c:
        cursor = c.cursor()
        cursor.execute(f"CREATE DATABASE IF NOT EXISTS {SNOWFLAKE_DATABASE}")
        cursor.execute(f"CREATE SCHEMA IF NOT EXISTS {SNOWFLAKE_DATABASE}.{SNOWFLAKE_SCHEMA}")
        cursor.execute(f"CREATE STAGE IF NOT EXISTS {STAGE}"
                       + (f" URL = '{url}'" if url else ""))


def stage_summary(runs: dict[str, Any]) -> dict[str, Any]:
    """Issue 32's figures: the driver's CPU share in the streaming window and the wall time
    against DuckDB's, for the driver's staging into fakesnow and for the stage path."""
    def figure(label: str, key: str) -> Any:
        return (runs.get(label) or {}).get(key)

    out: dict[str, Any] = {}
    duckdb = figure("duckdb", "wall_seconds")
    for label in ("fakesnow", "fakesnow_stage"):
        out[label] = {"driver_cpu_share_streaming": figure(label, "driver_cpu_share_streaming"),
                      "wall_seconds": figure(label, "wall_seconds"),
                      "streaming_seconds": figure(label, "streaming_seconds")}
        wall = figure(label, "wall_seconds")
        if wall and duckdb:
            out[label]["ratio_to_duckdb_wall"] = round(wall / duckdb, 3)
    return out


# issue 17's table: one computed column, one filter, one mask (salted sha256), on orders.
ORDERS_TRANSFORMS = {"orders": {
    "filter": "status <> 'cancelled'",
    "masks": {"note": '{sha256: {salt: "bench-salt"}}'},
    "computed": {"amount_with_tax": ("round(amount * 1.2, 2)", "NUMBER(14,2)")},
}}


def run_transforms_e2e(ctx: BenchContext, workload: WorkloadResult, *, rounds: int = 2,
                       target: str = "duckdb") -> dict[str, Any]:
    """Issue 17's target end to end: ``replicator run --until-caught-up`` of the workload's
    range replicating the ``orders`` table alone, without transforms (A) and with one computed
    column, one filter and one mask (B), in rounds A B, B A, ... (a machine getting busier or
    quieter weighs on both alike), each a pipeline of its own over the same binlog range.
    Compared, the best and the median of each side: the streaming seconds (first batch start
    -> last batch end; no JVM start-up), the whole wall time, and the apply seconds (stage +
    merge: where DuckDB runs the transform step over the batch's files);
    ``throughput_ratio`` = plain seconds / transformed seconds (1.0: no cost; the target is
    >= 0.85)."""
    import os

    runs: dict[str, list[dict[str, Any]]] = {"plain": [], "transforms": []}
    loads = []
    for number in range(rounds):
        order = (("plain", None), ("transforms", ORDERS_TRANSFORMS))
        for label, transforms in order if number % 2 == 0 else order[::-1]:
            loads.append(round(os.getloadavg()[0], 2))
            runs[label].append(run_e2e(ctx, workload, target, None, tables=("orders",),
                                       transforms=transforms, suffix=f"-{label}-r{number}"))
    summary: dict[str, Any] = {"target": target, "table": "orders", **ORDERS_TRANSFORMS["orders"],
                               "rounds": rounds, "load_average_1m_at_each_run": loads,
                               "runs": runs}
    import statistics

    def apply_seconds(run: dict[str, Any]) -> float:
        return sum(run["phases_seconds"].get(p, 0.0) for p in ("stage", "merge"))

    for key in ("streaming_seconds", "wall_seconds", "apply_seconds"):
        measured = {label: [apply_seconds(r) if key == "apply_seconds" else r[key]
                            for r in found if r.get("returncode") == 0 and r.get("batches")]
                    for label, found in runs.items()}
        summary[key] = {}
        for stat, pick in (("best", min), ("median", statistics.median)):
            values = {label: round(pick(v), 3) if v else None for label, v in measured.items()}
            summary[key][stat] = values
            if values["plain"] and values["transforms"]:
                values["throughput_ratio"] = round(values["plain"] / values["transforms"], 3)
    summary["changes"] = [r.get("changes") for r in runs["plain"] + runs["transforms"]]
    summary["transform_phase_seconds"] = {
        label: [r.get("phases_seconds", {}).get("transform") for r in found]
        for label, found in runs.items()}
    return summary


def run_atomic(ctx: BenchContext, workload: WorkloadResult, *, max_rows: tuple[int, ...],
               targets: tuple[str, ...] = ("duckdb",), rounds: int = 2) -> dict[str, Any]:
    """The cost of ``target.atomic`` (issue 19.6): the e2e run over the same range with it
    on and off, alternating (on, off, off, on, ...), per batch size. The workload's
    transactions change all three tables, so nearly every batch is a multi-table one.
    Compared: the streaming seconds (first batch start -> last batch end: no JVM start-up in
    it) and the seconds the sink spent staging and merging."""
    out: dict[str, Any] = {}
    for target in targets:
        for rows in max_rows:
            runs: dict[str, list[dict[str, Any]]] = {"on": [], "off": []}
            for number in range(rounds):
                # on, off, off, on, ...: a machine getting busier (or quieter) during the
                # section weighs on both settings alike.
                order = (("on", True), ("off", False))
                for label, atomic in order if number % 2 == 0 else order[::-1]:
                    # A new pipeline each round (the same name would find its checkpoint).
                    runs[label].append(run_e2e(ctx, workload, target, None, atomic=atomic,
                                               max_rows=rows, suffix=f"-r{number}"))
            out[f"{target}_{rows}"] = _atomic_cost(runs)
    return out


def _atomic_cost(runs: dict[str, list[dict[str, Any]]]) -> dict[str, Any]:
    def best(label: str, key: str) -> float | None:
        values = [r[key] if key in r else sum(r["phases_seconds"].get(p, 0.0)
                                               for p in ("stage", "merge"))
                  for r in runs[label] if r.get("returncode") == 0 and r.get("batches")]
        return min(values) if values else None

    summary: dict[str, Any] = {"runs": runs}
    for key in ("streaming_seconds", "apply_seconds"):
        on, off = best("on", key), best("off", key)
        summary[key] = {"on": on, "off": off}
        if on is not None and off:
            summary[key]["cost_pct"] = round(100 * (on - off) / off, 1)
    summary["batches"] = [r.get("batches") for r in runs["on"]]
    return summary
