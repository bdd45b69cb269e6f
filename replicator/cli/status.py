"""``replicator status FILE``: is the pipeline healthy? Running or not, where, how far
behind, last batch and its age, snapshot progress, last error.

The exit code is a health verdict, so the command works as a container health check or a
Nagios-style probe (docs/running.md, "Health checks"):

- 0 healthy: a run holds the pipeline's lock, its heartbeat is fresh, no error is being
  retried and the lag is under ``--max-lag`` (with ``--stopped-ok``: the last run ended
  cleanly, for pipelines run by cron with ``--until-caught-up``); or a run on another host
  holds the target's lease (``engine.state.lease``) and renews it, and the lag is under the limit;
- 1 degraded: running, but retrying an error, stuck (no heartbeat for a minute), behind by
  more than ``--max-lag`` seconds, or the source cannot be read from here (so the lag is
  unknown); the target's health is the run's own record (a DuckDB file is busy while its
  one writer runs);
- 2 down: no run holds the lock here nor the lease anywhere (never started, stopped, failed
  or killed).

It also lists the pipeline file's stale entries (``config.stale``: columns renamed, dropped,
retyped or added in MySQL since the YAML was written), each with its edit; they do not change
the health (the run follows MySQL).
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Annotated, Any

import typer

from replicator.cli import render
from replicator.cli.options import OutputFormat, TextOrJson
from replicator.config import load_pipeline
from replicator.config.stale import stale_entries
from replicator.context import Context
from replicator.engine.state.lease import describe as describe_lease
from replicator.errors import ReplicatorError
from replicator.source.positions import current_position
from replicator.source.progress import RETENTION_WARNING_S, lag_behind, retention

COMMAND_SETTINGS = {"help": "Is the pipeline healthy? Running, lag, last batch, snapshot "
                    "progress, last error; exit 0 healthy / 1 degraded / 2 down."}

HEALTHY, DEGRADED, DOWN = 0, 1, 2
HEALTH_NAMES = {HEALTHY: "healthy", DEGRADED: "degraded", DOWN: "down"}


def collect_status(pipeline: Any, *, max_lag_s: float = 300.0, stopped_ok: bool = False,
                   clock: Any = None) -> dict[str, Any]:
    """Everything ``status`` shows, as plain data; parts that cannot be read say why."""
    import time

    from replicator.engine.recopy import requested

    # The engine's recopy (the snapshot reader, the expression compiler, ~85 ms) and pickle
    # stay off every command's start-up (cli/main imports every command module).
    from replicator.engine.state.checkpoint import CheckpointDir
    from replicator.engine.state.runstate import JVM_LOG, lock_holder, read_run_state

    now = (clock or time.time)()
    checkpoint = CheckpointDir(pipeline.checkpoint_dir)
    state = checkpoint.load_start()
    committed = checkpoint.committed()
    position = committed[1] if committed else (state.position if state else None)
    holder = lock_holder(checkpoint.path)
    run = read_run_state(checkpoint.path) or {}
    # run.json of the run holding the lock, or the record of how the last run ended.
    current = bool(run) and holder is not None and run.get("pid") == holder
    status: dict[str, Any] = {
        "pipeline": pipeline.name,
        "checkpoint_dir": str(checkpoint.path),
        "health": None,
        "reasons": [],
        "running": holder is not None,
        "pid": holder,
        "host": run.get("host") if current or holder is None else None,
        "state": _run_state(holder, run, current),
        "heartbeat_age_s": round(now - run["updated_at"], 1) if current else None,
        "run_started_at": run.get("started_at"),
        "run_ended_at": run.get("ended_at") if holder is None else None,
        "spark_log": str(checkpoint.path / JVM_LOG),
        "last_batch": _last_batch(run, now),
        "last_error": run.get("last_error"),
        "started": state is not None,
        "start_position": str(state.position) if state else None,
        "snapshot": state.snapshot if state else None,
        "epoch": state.epoch if state else None,
        "spark_batch": committed[0] if committed else None,
        "position": str(position) if position else None,
        "head": None,
        "lag_bytes": None,
        "lag_files": None,
        "lag_seconds": None,
        "snapshot_tables": _snapshot_progress(checkpoint, state, run),
        # Re-copies asked for (replicator snapshot --table) that no run has taken yet.
        "recopy_requested": requested(checkpoint),
        # Rows the run read but applied nowhere: outbox events no route takes. (A row the
        # target refuses fails its batch instead: it is the last error, never dropped.)
        "unrouted_events": {name: counts.get("unrouted", 0)
                            for name, counts in (run.get("tables") or {}).items()
                            if counts.get("unrouted")},
        "tables": [],
        # The target's lease (engine.state.lease): which run, on which host, applies batches now.
        "lease": None,
        # When the server may purge the binlog the pipeline still needs (source.progress).
        "retention": None,
        # Entries of the YAML that no longer match the live schema, with their edits.
        "stale_entries": [],
        "problems": [],
    }
    context = Context(pipeline)  # its catalog is read once, for the stale entries and the plan
    _read_source(pipeline, status, position, run, now)
    _read_stale(context, status)
    _read_target(context, status)
    status["health"], status["reasons"] = _health(status, max_lag_s=max_lag_s,
                                                  stopped_ok=stopped_ok)
    return status


def _read_source(pipeline: Any, status: dict[str, Any], position: Any, run: dict[str, Any],
                 now: float) -> None:
    """The binlog head, how far behind it the pipeline is, and how long the server keeps what
    it still needs, into ``status``; a source that cannot be read is a problem."""
    try:
        head = current_position(pipeline.source)
        status["head"] = str(head)
        if position is not None:
            lag = lag_behind(pipeline.source, position, head)
            status["lag_bytes"], status["lag_files"] = lag.bytes, lag.files
            if lag.bytes == 0 and not lag.files:
                status["lag_seconds"] = 0.0
            elif run.get("last_change_ts_ms"):
                # At most this old: the newest change applied was committed then.
                status["lag_seconds"] = round(max(0.0, now - run["last_change_ts_ms"] / 1000), 1)
            kept = retention(pipeline.source, position, server_id=pipeline.server_id)
            left = kept.seconds_left(now)
            status["retention"] = {"file": kept.file, "expire_s": kept.expire_s,
                                   "seconds_left": None if left is None else round(left),
                                   "text": kept.describe(now)}
    except ReplicatorError as exc:
        status["problems"].append(f"source: {exc.message}")


def _read_stale(context: Context, status: dict[str, Any]) -> None:
    """The pipeline file's stale entries (``config.stale``) into ``status``; a source that
    cannot be read is already a problem of ``_read_source``."""
    try:
        status["stale_entries"] = [entry.as_dict() for entry in stale_entries(context)]
    except ReplicatorError as exc:
        if not any(problem.startswith("source:") for problem in status["problems"]):
            status["problems"].append(f"stale entries: {exc.message}")


def _read_target(context: Context, status: dict[str, Any]) -> None:
    """Each table's last applied batch and dead letters, and the target's lease, into
    ``status``; a target that cannot be read is a problem."""
    pipeline = context.pipeline
    try:
        plan = context.plan
        sink = context.open_sink()
        try:
            if context.ignore_missing_columns(sink, record=False):
                plan = context.plan
            for table in plan.tables:
                last = sink.last_applied(table)
                status["tables"].append({
                    "source": table.source_name,
                    "target": ".".join(table.target_parts),
                    "batch_id": last["batch_id"] if last else None,
                    "end_offset": last["end_offset"] if last else None,
                    "applied_at": str(last["applied_at"]) if last else None,
                    # Rows the target refused, set aside (on_error: dead_letter).
                    "dead_letters": sink.dead_letters(table),
                    # Added in MySQL and left out (`schema_changes.add_column: ignore`).
                    "ignored_columns": list(table.ignored),
                })
            status["lease"] = describe_lease(sink.lease_statement("read", [pipeline.name]))
        finally:
            sink.close()
    except ReplicatorError as exc:
        status["problems"].append(f"target: {exc.message}"
                                  + (f" ({exc.hint})" if exc.hint else ""))


def _run_state(holder: int | None, run: dict[str, Any], current: bool) -> str:
    """running (+ phase) | caught_up | stopped | failed | died | never started."""
    if holder is not None:
        return f"running ({run.get('phase', 'starting')})" if current else "running (starting)"
    if not run:
        return "never started"
    phase = run.get("phase")
    if phase in ("caught_up", "stopped", "failed"):
        return str(phase)
    # The file says a run was under way, but no process holds the lock: it was killed.
    return "died"


def _last_batch(run: dict[str, Any], now: float) -> dict[str, Any] | None:
    last = run.get("last_batch")
    if not last:
        return None
    return {**last, "age_s": round(max(0.0, now - last["at"]), 1)}


def _snapshot_progress(checkpoint: Any, state: Any, run: dict[str, Any]) -> list[dict[str, Any]]:
    """Per table of a snapshot: chunks applied of planned (from the checkpoint, so also
    after a crash) and rows copied by the last run of the estimated total."""
    if state is None:
        return []
    copied = run.get("snapshot") or {}
    names = list(dict.fromkeys([*state.chunks_applied, *copied]))
    tables = []
    for name in names:
        try:
            chunks = checkpoint.load_chunks(name)
        except Exception:  # a chunk plan written by another version: progress is a report
            chunks = None
        entry = copied.get(name) or {}
        done = state.chunks_applied.get(name, 0)
        recopy = name.lower() in {t.lower() for t in state.recopies}
        tables.append({
            "table": name,
            # Copied again while the others stream (replicator snapshot --table).
            "recopy": recopy,
            "chunks_applied": done,
            "chunks": len(chunks) if chunks is not None else None,
            "done": (state.snapshot == "done" and not recopy)
            or (chunks is not None and done >= len(chunks)),
            "rows_copied": entry.get("rows"),
            "rows_estimate": entry.get("estimate"),
        })
    return tables


def _health(status: dict[str, Any], *, max_lag_s: float, stopped_ok: bool,
            ) -> tuple[int, list[str]]:
    """The exit code and why: 0 healthy, 1 degraded, 2 down (module docstring)."""
    # pickle (~5 ms) off every command's start-up, as in collect_status.
    from replicator.engine.state.runstate import STALE_S

    reasons: list[str] = []
    state = status["state"]
    error = status["last_error"] or {}
    # Not running here, but a run elsewhere holds the target's lease and renews it: that run
    # is the pipeline's (its heartbeat is on its host; the lag below still counts).
    elsewhere = not status["running"] and bool((status.get("lease") or {}).get("held"))
    if not status["running"] and not elsewhere:
        if state == "failed":
            return DOWN, [f"the last run failed: {error.get('message', '?')}"]
        if state == "died":
            return DOWN, ["the last run ended without a word (killed?): see "
                          f"{status['spark_log']} and the system log"]
        if not stopped_ok or state == "never started":
            return DOWN, [f"not running (last run: {state})"]
    elif status["running"]:
        if state.endswith("(retrying)"):
            reasons.append(f"retrying: {error.get('message', '?')}")
        age = status["heartbeat_age_s"]
        if age is not None and age > STALE_S:
            reasons.append(f"no heartbeat for {age:.0f} s: the run may be stuck")
    left = (status.get("retention") or {}).get("seconds_left")
    if left is not None and left < RETENTION_WARNING_S:
        reasons.append(f"the binlog this pipeline needs may be purged in {left / 3600:.1f} h: "
                       "catch up before, or it must re-snapshot")
    lag = status["lag_seconds"]
    if lag is not None and lag > max_lag_s:
        reasons.append(f"{lag:.0f} s behind the source (more than --max-lag {max_lag_s:g})")
    # The source read from here decides the lag; the target's health is the run's own record
    # (it retries or fails on target errors), and a DuckDB file is busy while its one writer
    # runs: target problems are shown, not counted.
    reasons.extend(p for p in status["problems"] if p.startswith("source:"))
    return (DEGRADED, reasons) if reasons else (HEALTHY, [])


def _offset_text(offset: Any) -> str:
    if isinstance(offset, str):
        try:
            offset = json.loads(offset)
        except ValueError:
            return offset
    if isinstance(offset, dict) and "file" in offset:
        return f"{offset['file']}:{offset['pos']}"
    return "-" if offset is None else str(offset)


def _age(seconds: float | None) -> str:
    return "-" if seconds is None else f"{seconds:.0f} s ago"


def _text_lines(status: dict[str, Any]) -> list[str]:
    """The text report's lines above the tables' table (``status`` as ``collect_status``
    returns it, ``health`` already a name)."""
    lag = "-"
    if status["lag_bytes"] is not None or status["lag_files"]:
        lag = f"{status['lag_bytes'] if status['lag_bytes'] is not None else '?'} bytes"
        if status["lag_files"]:
            lag += f" across {status['lag_files']} binlog file(s)"
        if status["lag_seconds"] is not None:
            lag = f"{status['lag_seconds']:.0f} s, {lag}"
    running = status["state"]
    if status["running"]:
        running += f", PID {status['pid']}" + (f" on {status['host']}" if status["host"] else "")
        running += f", heartbeat {_age(status['heartbeat_age_s'])}"
    lease = status["lease"]
    if lease and lease["holder"] and (lease["held"] or status["running"]):
        held = (f"held by {lease['holder']} since {lease['since']}, generation "
                f"{lease['generation']}, renewed {_age(lease['renewed_s_ago'])}")
        running = (running + f"; lease {held}" if status["running"]
                   else f"running elsewhere: lease {held}")
    last = status["last_batch"]
    lines = [
        f"health:      {status['health']}" + (f" ({'; '.join(status['reasons'])})"
                                               if status["reasons"] else ""),
        f"pipeline:    {status['pipeline']}",
        f"run:         {running}",
        f"checkpoint:  {status['checkpoint_dir']}"
        + ("" if status["started"] else "  (not started: `replicator run` starts it)"),
        f"snapshot:    {status['snapshot'] or '-'}",
        f"position:    {status['position'] or '-'}",
        f"binlog head: {status['head'] or '-'}",
        f"lag:         {lag}",
        f"retention:   {status['retention']['text'] if status['retention'] else '-'}",
        "last batch:  " + ("-" if last is None else
                           f"{last['kind']} {last['batch_id']}, {last['changes']} change(s), "
                           f"{last['rows']} row(s), {_age(last['age_s'])}"),
    ]
    for table in status["snapshot_tables"]:
        chunks = (f"{table['chunks_applied']}/{table['chunks']} chunks"
                  if table["chunks"] is not None else f"{table['chunks_applied']} chunks")
        rows = ""
        if table["rows_copied"] is not None:
            rows = f", {table['rows_copied']:,} rows copied by the last run"
            if table["rows_estimate"]:
                rows += f" of ~{table['rows_estimate']:,}"
        what = "re-copy" if table["recopy"] else "snapshot"
        lines.append(f"  {what} {table['table']}: {'done' if table['done'] else chunks}{rows}")
    for name in status["recopy_requested"]:
        lines.append(f"  re-copy {name}: requested, not started")
    for name, count in status["unrouted_events"].items():
        lines.append(f"  unrouted outbox events {name}: {count}")
    error = status["last_error"]
    if error:
        lines.append(f"last error:  [{error['code']}] {error['message']}"
                     + (f" (hint: {error['hint']})" if error.get("hint") else ""))
    for entry in status.get("stale_entries") or ():
        lines.append(f"stale:       {entry['text']}")
    return lines


def _print_text(status: dict[str, Any]) -> None:
    for line in _text_lines(status):
        render.print_text(line)
    if status["tables"]:
        render.print_table(
            None,
            ["source", "target", "last batch", "end offset", "applied at", "dead letters"],
            [[t["source"], t["target"], t["batch_id"], _offset_text(t["end_offset"]),
              t["applied_at"], t.get("dead_letters", 0)] for t in status["tables"]],
        )
    for table in status["tables"]:
        if table.get("ignored_columns"):
            render.print_text(f"{table['source']}: column(s) {', '.join(table['ignored_columns'])}"
                              " ignored (schema_changes.add_column: ignore)")
    for problem in status["problems"]:
        render.warning(problem)


def command(
    file: Annotated[Path, typer.Argument(help="The pipeline file.", show_default=False)],
    output_format: TextOrJson = OutputFormat.text,
    max_lag: Annotated[
        float, typer.Option("--max-lag", min=0, help="Seconds behind the source above which "
                            "a running pipeline is degraded (exit 1).")
    ] = 300.0,
    stopped_ok: Annotated[
        bool, typer.Option("--stopped-ok", help="A pipeline whose last run ended cleanly is "
                           "healthy (cron runs with --until-caught-up); failed is still down.")
    ] = False,
) -> None:
    """The report of ``collect_status`` as text or JSON; its health is the exit code."""
    pipeline = load_pipeline(file)
    status = collect_status(pipeline, max_lag_s=max_lag, stopped_ok=stopped_ok)
    status["health"] = HEALTH_NAMES[code := status["health"]]
    if output_format is OutputFormat.json:
        sys.stdout.write(json.dumps(status, indent=2, default=str) + "\n")
        sys.exit(code)
    _print_text(status)
    sys.exit(code)
