"""``replicator run FILE``: snapshot if needed, then stream the binlog into the target.

Runs forever by default (Ctrl-C / SIGTERM finish the current batch and stop); with
``--until-caught-up`` it stops once the binlog head seen at start is applied (cron, CI,
tests). Per-batch metrics go to stderr as structured lines (``--log-format text|json``).
"""

from __future__ import annotations

import enum
import sys
from dataclasses import replace
from pathlib import Path
from typing import Annotated, Any

import typer

from replicator.cli import render
from replicator.errors import UsageError

COMMAND_SETTINGS = {"help": "Replicate: snapshot if needed, then stream the binlog."}


class SnapshotOption(enum.StrEnum):
    auto = "auto"
    never = "never"
    always = "always"


class LogFormat(enum.StrEnum):
    text = "text"
    json = "json"


def parse_conf(pairs: list[str]) -> dict[str, str]:
    conf: dict[str, str] = {}
    for pair in pairs:
        key, sep, value = pair.partition("=")
        if not sep or not key.strip():
            raise UsageError(f"--conf {pair!r} is not KEY=VALUE",
                             hint="for example --conf spark.driver.memory=4g")
        conf[key.strip()] = value
    return conf


def _lag_text(pipeline: Any, report: Any) -> str | None:
    """Bytes behind the binlog head after a batch (for the live display only)."""
    if not report.end_offset:
        return None
    from replicator.engine.progress import lag_behind
    from replicator.errors import ReplicatorError
    from replicator.model.changes import BinlogPosition
    from replicator.source.positions import current_position

    try:
        position = BinlogPosition.from_offset(report.end_offset)
        lag = lag_behind(pipeline.source, position, current_position(pipeline.source))
    except ReplicatorError:
        return None
    return f"{lag.bytes if lag.bytes is not None else '?'} bytes"


def command(
    file: Annotated[Path, typer.Argument(help="The pipeline file.", show_default=False)],
    until_caught_up: Annotated[
        bool, typer.Option("--until-caught-up",
                           help="Stop once the binlog head seen at start is applied.")
    ] = False,
    snapshot: Annotated[
        SnapshotOption,
        typer.Option("--snapshot", help="auto: copy the tables when starting fresh (start: "
                     "initial); never: stream only; always: copy again now and start over."),
    ] = SnapshotOption.auto,
    master: Annotated[
        str | None, typer.Option("--master", help="Spark master URL (default: engine.master, "
                                 "local[*]).")
    ] = None,
    conf: Annotated[
        list[str] | None, typer.Option("--conf", help="Spark setting KEY=VALUE (repeatable).")
    ] = None,
    log_format: Annotated[
        LogFormat, typer.Option("--log-format", help="Per-batch log lines: text or json.")
    ] = LogFormat.text,
    decode_partitions: Annotated[
        int | None, typer.Option("--decode-partitions", min=1,
                                 help="Spark tasks decoding one micro-batch (default: "
                                 "engine.decode_partitions).")
    ] = None,
    dry_run: Annotated[
        bool, typer.Option("--dry-run", help="Print the spark-submit command a cluster master "
                           "runs (and build the code zip it ships), then exit.")
    ] = False,
    metrics_file: Annotated[
        Path | None, typer.Option("--metrics-file", help="Write Prometheus metrics to this file "
                                  "after every batch (textfile collector format).")
    ] = None,
    metrics_port: Annotated[
        int | None, typer.Option("--metrics-port", min=0, max=65535,
                                 help="Serve Prometheus metrics on http://127.0.0.1:PORT/metrics.")
    ] = None,
) -> None:
    import os

    from replicator.config import load_pipeline
    from replicator.engine.launch import SUBMITTED_ENV, master_kind

    spark_conf = parse_conf(conf or [])
    pipeline = load_pipeline(file)
    # Everything this run creates (checkpoint, Spark's logs and temp files, the metrics file,
    # a new DuckDB warehouse) is its user's only: it holds positions and copies of source
    # rows that MySQL shows only to granted users. docs/running.md, files and permissions.
    # (Restored afterwards for callers that run the command in-process, like the tests.)
    previous_umask = os.umask(0o077)
    try:
        if decode_partitions is not None:
            pipeline = replace(pipeline, engine=replace(pipeline.engine,
                                                        decode_partitions=decode_partitions))
        spark_master = master or pipeline.engine.master
        kind = master_kind(spark_master)
        if kind != "local" and not os.environ.get(SUBMITTED_ENV):
            run_args = [*(["--until-caught-up"] if until_caught_up else []),
                        "--snapshot", snapshot.value, "--log-format", log_format.value,
                        *(["--decode-partitions", str(decode_partitions)]
                          if decode_partitions else []),
                        *(["--metrics-file", str(metrics_file)] if metrics_file else []),
                        *(["--metrics-port", str(metrics_port)]
                          if metrics_port is not None else []),
                        *(arg for pair in conf or [] for arg in ("--conf", pair))]
            _submit(file, pipeline, spark_master, spark_conf, run_args, dry_run=dry_run)
            return
        if dry_run:
            render.info(f"{spark_master} runs Spark inside this process: there is no "
                        "spark-submit command (use a cluster master: spark://, yarn, k8s://)")
            return
        _run(pipeline, until_caught_up=until_caught_up, snapshot=snapshot, master=master,
             spark_conf=spark_conf, log_format=log_format,
             metrics=_metrics(pipeline, metrics_file, metrics_port))
    finally:
        os.umask(previous_umask)


def _metrics(pipeline: Any, path: Path | None, port: int | None) -> Any:
    """Prometheus metrics of this run, or None when neither a file nor a port was asked for."""
    if path is None and port is None:
        return None
    from replicator.engine.progress import lag_behind
    from replicator.engine.prometheus import PipelineMetrics
    from replicator.source.positions import current_position

    metrics = PipelineMetrics(
        pipeline.name,
        head=lambda: current_position(pipeline.source),
        lag_bytes=lambda position, head: lag_behind(pipeline.source, position, head).bytes,
    )
    metrics.file = path
    if port is not None:
        server = metrics.serve(port)
        render.info(f"metrics on http://127.0.0.1:{server.server_address[1]}/metrics")
    return metrics


def _submit(file: Path, pipeline: Any, master: str, spark_conf: dict[str, str],
            run_args: list[str], *, dry_run: bool) -> None:
    """Hand the run to spark-submit (replacing this process), or print the command."""
    from replicator.engine.launch import package_zip, run_submit, submit_command

    code_zip = package_zip(Path(pipeline.checkpoint_dir) / "package")
    command = submit_command(master, {**pipeline.engine.conf, **spark_conf}, run_args,
                             code_zip=code_zip.resolve(), pipeline_file=file,
                             app_name=f"replicator-{pipeline.name}")
    if dry_run:
        print(command.shell())
        return
    sys.exit(run_submit(command))


def _run(pipeline: Any, *, until_caught_up: bool, snapshot: SnapshotOption, master: str | None,
         spark_conf: dict[str, str], log_format: LogFormat, metrics: Any = None) -> None:
    from replicator.engine.metrics import BatchReport, format_json, format_text
    from replicator.engine.runner import RunOptions, run_pipeline

    formatter = format_json if log_format is LogFormat.json else format_text
    display = render.run_display(pipeline.name) if log_format is LogFormat.text else None

    def on_report(report: BatchReport) -> None:
        if metrics is not None:
            metrics.observe(report)
            if metrics.file is not None:
                metrics.write_file(metrics.file)
        if display is not None and display.live:
            display.update(report, lag=_lag_text(pipeline, report))
        else:
            render.log_line(formatter(report))

    def on_notice(message: str) -> None:
        if metrics is not None and message.startswith("transient error"):
            metrics.error("transient")
        if display is not None and display.live and message.startswith("transient error"):
            display.error(message)
        if log_format is LogFormat.json:
            import json

            render.log_line(json.dumps({"notice": message}))
        else:
            render.info(message)

    options = RunOptions(
        until_caught_up=until_caught_up,
        snapshot=snapshot.value,
        master=master,
        conf=spark_conf,
        on_report=on_report,
        on_notice=on_notice,
        debug=render.settings.debug,
    )
    with display if display is not None else render.nothing():
        result = run_pipeline(pipeline, options)
    summary = (
        f"{pipeline.name}: {result.batches} batch(es), {result.changes} change(s), "
        f"{result.rows} row(s) applied, {result.snapshot_rows} snapshot row(s); "
        f"at {result.end or '-'}"
    )
    on_notice(summary + (" (stopped)" if result.stopped else ""))
    if result.stopped:
        sys.exit(130)
