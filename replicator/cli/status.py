"""``replicator status FILE``: where the pipeline is, how far behind, last batch per table."""

from __future__ import annotations

import enum
import json
import sys
from pathlib import Path
from typing import Annotated, Any

import typer

from replicator.cli import render
from replicator.errors import ReplicatorError

COMMAND_SETTINGS = {"help": "Checkpoint position, binlog head, lag and last batch per table."}


class OutputFormat(enum.StrEnum):
    text = "text"
    json = "json"


def collect_status(pipeline: Any) -> dict[str, Any]:
    """Everything ``status`` shows, as plain data; parts that cannot be read say why."""
    from replicator.engine.checkpoint import CheckpointDir

    checkpoint = CheckpointDir(pipeline.checkpoint_dir)
    state = checkpoint.load_start()
    committed = checkpoint.committed()
    position = committed[1] if committed else (state.position if state else None)
    status: dict[str, Any] = {
        "pipeline": pipeline.name,
        "checkpoint_dir": str(checkpoint.path),
        "started": state is not None,
        "start_position": str(state.position) if state else None,
        "snapshot": state.snapshot if state else None,
        "epoch": state.epoch if state else None,
        "spark_batch": committed[0] if committed else None,
        "position": str(position) if position else None,
        "head": None,
        "lag_bytes": None,
        "lag_files": None,
        "tables": [],
        "problems": [],
    }
    try:
        from replicator.engine.progress import lag_behind
        from replicator.source.positions import current_position

        head = current_position(pipeline.source)
        status["head"] = str(head)
        if position is not None:
            lag = lag_behind(pipeline.source, position, head)
            status["lag_bytes"], status["lag_files"] = lag.bytes, lag.files
    except ReplicatorError as exc:
        status["problems"].append(f"source: {exc.message}")
    try:
        from replicator.engine.runner import load_plan
        from replicator.sink import open_sink

        _, plan = load_plan(pipeline)
        sink = open_sink(pipeline, plan)
        try:
            for table in plan.tables:
                last = sink.last_applied(table)
                status["tables"].append({
                    "source": table.source_name,
                    "target": ".".join(table.target_parts),
                    "batch_id": last["batch_id"] if last else None,
                    "end_offset": last["end_offset"] if last else None,
                    "applied_at": str(last["applied_at"]) if last else None,
                })
        finally:
            sink.close()
    except ReplicatorError as exc:
        status["problems"].append(f"target: {exc.message}"
                                  + (f" ({exc.hint})" if exc.hint else ""))
    return status


def _offset_text(offset: Any) -> str:
    if isinstance(offset, str):
        try:
            offset = json.loads(offset)
        except ValueError:
            return offset
    if isinstance(offset, dict) and "file" in offset:
        return f"{offset['file']}:{offset['pos']}"
    return "-" if offset is None else str(offset)


def command(
    file: Annotated[Path, typer.Argument(help="The pipeline file.", show_default=False)],
    output_format: Annotated[
        OutputFormat, typer.Option("--format", "-f", help="text or json.")
    ] = OutputFormat.text,
) -> None:
    from replicator.config import load_pipeline

    pipeline = load_pipeline(file)
    status = collect_status(pipeline)
    if output_format is OutputFormat.json:
        sys.stdout.write(json.dumps(status, indent=2, default=str) + "\n")
        return
    lag = "-"
    if status["lag_bytes"] is not None or status["lag_files"]:
        lag = f"{status['lag_bytes'] if status['lag_bytes'] is not None else '?'} bytes"
        if status["lag_files"]:
            lag += f" across {status['lag_files']} binlog file(s)"
    lines = [
        f"pipeline:    {status['pipeline']}",
        f"checkpoint:  {status['checkpoint_dir']}"
        + ("" if status["started"] else "  (not started: `replicator run` starts it)"),
        f"snapshot:    {status['snapshot'] or '-'}",
        f"position:    {status['position'] or '-'}",
        f"binlog head: {status['head'] or '-'}",
        f"lag:         {lag}",
    ]
    for line in lines:
        render.print_text(line)
    if status["tables"]:
        render.print_table(
            None,
            ["source", "target", "last batch", "end offset", "applied at"],
            [[t["source"], t["target"], t["batch_id"], _offset_text(t["end_offset"]),
              t["applied_at"]] for t in status["tables"]],
        )
    for problem in status["problems"]:
        render.warning(problem)
