"""``replicator run FILE``: snapshot if needed, then stream the binlog into the target.

Runs forever by default (Ctrl-C / SIGTERM finish the current batch and stop); with
``--until-caught-up`` it stops once the binlog head seen at start is applied (cron, CI,
tests). Per-batch metrics go to stderr as structured lines (``--log-format text|json``).
"""

from __future__ import annotations

import contextlib
import enum
import sys
import time
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path
from typing import Annotated, Any

import typer

from replicator.cli import render
from replicator.config import load_pipeline
from replicator.engine.apply.metrics import format_json, format_text
from replicator.errors import ReplicatorError, UsageError
from replicator.model.changes import BinlogPosition
from replicator.source.positions import current_position
from replicator.source.progress import RETENTION_WARNING_S, lag_behind, retention, row_estimates

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


def _lag(pipeline: Any, report: Any) -> tuple[int | None, float | None]:
    """Bytes of binlog behind the head after a batch, and seconds since the commit of the
    newest change applied (0 once at the head): for the live display and ``run.json``."""
    if not report.end_offset:
        return None, None

    try:
        position = BinlogPosition.from_offset(report.end_offset)
        lag = lag_behind(pipeline.source, position, current_position(pipeline.source))
    except ReplicatorError:
        return None, None
    if lag.bytes == 0:
        return 0, 0.0
    seconds = max(0.0, time.time() - report.last_ts_ms / 1000) if report.last_ts_ms else None
    return lag.bytes, seconds


# How often a streaming run looks at how long the server keeps the binlog it needs.
RETENTION_CHECK_S = 600.0


def _retention_warning(pipeline: Any, report: Any) -> str | None:
    """A warning when the binlog the run still needs may be purged within
    ``source.progress.RETENTION_WARNING_S`` (the run is too far behind, or the expiry short)."""
    if not report.end_offset:
        return None
    try:
        kept = retention(pipeline.source, BinlogPosition.from_offset(report.end_offset),
                         server_id=pipeline.server_id)
    except ReplicatorError:
        return None  # the run itself reports a source that cannot be read
    left = kept.seconds_left(time.time())
    if left is None or left >= RETENTION_WARNING_S:
        return None
    return (f"the binlog this pipeline still needs ({kept.describe(time.time())}): catch up "
            "before then (more executors, decode_partitions, larger batches) or raise the "
            "server's binlog_expire_logs_seconds, or the pipeline must re-snapshot")


def _lag_text(lag_bytes: int | None, lag_seconds: float | None) -> str:
    seconds = "?" if lag_seconds is None else f"{lag_seconds:.0f} s"
    return f"{seconds} / {'?' if lag_bytes is None else lag_bytes} bytes"


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
    take_over: Annotated[
        bool, typer.Option("--take-over", help="Take the pipeline's lease in the target from "
                           "the run holding it (that run's next batch rolls back and it stops).")
    ] = False,
    chunk_rows: Annotated[
        int | None, typer.Option("--chunk-rows", min=1,
                                 help="Rows per key-range chunk of a snapshot or a re-copy "
                                 "(default 20000); a copy under way keeps its chunks.")
    ] = None,
) -> None:
    """Its length is typer's option declarations; what it does is a few lines: a cluster
    master hands the run to spark-submit (``_submit``), a local one runs it here (``_run``)."""
    import os

    # Off every command's start-up (cli/main imports every command module): zipfile, ~3 ms.
    from replicator.engine.job.launch import SUBMITTED_ENV, master_kind
    from replicator.engine.job.session import prefer_system_allocator

    prefer_system_allocator()  # before anything imports pyarrow (engine.job.session says why)
    # Set first: a bad pipeline file is reported as a JSON error line too.
    render.settings.json_lines = log_format is LogFormat.json
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
            run_args = _run_args(until_caught_up=until_caught_up, snapshot=snapshot,
                                 log_format=log_format, decode_partitions=decode_partitions,
                                 metrics_file=metrics_file, metrics_port=metrics_port,
                                 take_over=take_over, conf=conf or [],
                                 chunk_rows=chunk_rows)
            _submit(file, pipeline, spark_master, spark_conf, run_args, dry_run=dry_run)
            return
        if dry_run:
            render.info(f"{spark_master} runs Spark inside this process: there is no "
                        "spark-submit command (use a cluster master: spark://, yarn, k8s://)")
            return
        _run(pipeline, until_caught_up=until_caught_up, snapshot=snapshot, master=master,
             spark_conf=spark_conf, log_format=log_format, take_over=take_over,
             chunk_rows=chunk_rows, metrics=_metrics(pipeline, metrics_file, metrics_port))
    finally:
        os.umask(previous_umask)


def _run_args(*, until_caught_up: bool, snapshot: SnapshotOption, log_format: LogFormat,
              decode_partitions: int | None, metrics_file: Path | None,
              metrics_port: int | None, take_over: bool, conf: list[str],
              chunk_rows: int | None = None) -> list[str]:
    """The options of this ``run`` again, for the ``replicator run`` spark-submit starts on
    the cluster's driver."""
    return [*(["--until-caught-up"] if until_caught_up else []),
            "--snapshot", snapshot.value, "--log-format", log_format.value,
            *(["--decode-partitions", str(decode_partitions)] if decode_partitions else []),
            *(["--metrics-file", str(metrics_file)] if metrics_file else []),
            *(["--metrics-port", str(metrics_port)] if metrics_port is not None else []),
            *(["--take-over"] if take_over else []),
            *(["--chunk-rows", str(chunk_rows)] if chunk_rows else []),
            *(arg for pair in conf for arg in ("--conf", pair))]


def _metrics(pipeline: Any, path: Path | None, port: int | None) -> Any:
    """Prometheus metrics of this run, or None when neither a file nor a port was asked for."""
    if path is None and port is None:
        return None
    # prometheus_client (~30 ms, and http.server, ssl, email) only when metrics are asked for.
    from replicator.engine.apply.prometheus import PipelineMetrics

    metrics = PipelineMetrics(
        pipeline.name,
        head=lambda: current_position(pipeline.source),
        lag_bytes=lambda position, head: lag_behind(pipeline.source, position, head).bytes,
        retention_left=lambda position: retention(
            pipeline.source, position, server_id=pipeline.server_id).seconds_left(time.time()),
    )
    metrics.file = path
    if port is not None:
        server = metrics.serve(port)
        render.info(f"metrics on http://127.0.0.1:{server.server_address[1]}/metrics")
    return metrics


def _submit(file: Path, pipeline: Any, master: str, spark_conf: dict[str, str],
            run_args: list[str], *, dry_run: bool) -> None:
    """Hand the run to spark-submit (replacing this process), or print the command."""
    # Off every command's start-up (see command()).
    from replicator.engine.job.launch import package_zip, run_submit, submit_command

    code_zip = package_zip(Path(pipeline.checkpoint_dir) / "package")
    command = submit_command(master, {**pipeline.engine.conf, **spark_conf}, run_args,
                             code_zip=code_zip.resolve(), pipeline_file=file,
                             app_name=f"replicator-{pipeline.name}")
    if dry_run:
        print(command.shell())
        return
    sys.exit(run_submit(command))


class _Reporter:
    """What a run shows and records as it goes, fed by the runner's callbacks: the live
    display or the per-batch log lines, ``run.json`` (``RunStateWriter``), the metrics and
    the warnings about lag and binlog retention."""

    def __init__(self, pipeline: Any, run_state: Any, display: Any, metrics: Any,
                 formatter: Callable[[Any], str]) -> None:
        self.pipeline = pipeline
        self.run_state = run_state
        self.display = display
        self.live = display is not None and display.live
        self.metrics = metrics
        self.formatter = formatter
        self.estimates: dict[str, int] = {}
        self.looked_up: set[str] = set()
        self.streaming = False
        self.retention_checked = float("-inf")  # monotonic time of the last retention check

    def estimate(self, tables: list[str]) -> dict[str, int]:
        """Row estimates of tables not looked up yet (one information_schema query)."""
        new = [name for name in tables if name.lower() not in self.looked_up]
        if new:
            self.looked_up.update(name.lower() for name in new)
            # Only the bars' scale: the copy itself reports a source problem.
            with contextlib.suppress(ReplicatorError):
                self.estimates.update(row_estimates(self.pipeline.source, new))
        return self.estimates

    def on_report(self, report: Any) -> None:
        if self.metrics is not None:
            self.metrics.observe(report)
            if self.metrics.file is not None:
                self.metrics.write_file(self.metrics.file)
        if report.kind == "snapshot":
            known = self.estimate([table.table for table in report.tables])
            self.run_state.batch(report, estimates=known)
            if self.live:
                self.display.snapshot(report, known)
            else:
                render.log_line(self.formatter(report))
            return
        if report.kind == "recopy":  # a chunk of a table copied again (its notices tell)
            self.run_state.batch(report)
            if not self.live:
                render.log_line(self.formatter(report))
            return
        self._on_stream_batch(report)

    def _on_stream_batch(self, report: Any) -> None:
        if not self.streaming:
            self.streaming = True
            if self.live:
                self.display.snapshot_done()
        lag_bytes, lag_seconds = _lag(self.pipeline, report)
        if lag_bytes and time.monotonic() - self.retention_checked >= RETENTION_CHECK_S:
            self.retention_checked = time.monotonic()
            warning = _retention_warning(self.pipeline, report)
            if warning:
                render.warning(warning)
        self.run_state.batch(report)
        self.run_state.update(lag_bytes=lag_bytes, lag_seconds=lag_seconds)
        if self.live:
            self.display.update(report, lag=_lag_text(lag_bytes, lag_seconds))
        else:
            render.log_line(self.formatter(report))

    def on_notice(self, message: str) -> None:
        if self.live and message.startswith("snapshot of "):
            self.display.snapshot_started()
        if message.startswith("transient error"):
            if self.metrics is not None:
                self.metrics.error("transient")
            self.run_state.update(phase="retrying", last_error={
                "code": "transient", "message": message, "hint": None, "transient": True,
                "at": time.time()})
            if self.live:
                self.display.error(message)
        render.info(message)

    def failed(self, exc: BaseException) -> None:
        """The run ended with an error (``ReplicatorError``): ``run.json`` and the metrics
        say so."""
        self.run_state.error(exc, transient=False)
        if self.metrics is not None:
            self.metrics.error("fatal")
            if self.metrics.file is not None:
                self.metrics.write_file(self.metrics.file)


def _run(pipeline: Any, *, until_caught_up: bool, snapshot: SnapshotOption, master: str | None,
         spark_conf: dict[str, str], log_format: LogFormat, metrics: Any = None, take_over: bool = False,
         chunk_rows: int | None = None) -> None:
    # The engine (its snapshot reader, the expression compiler, ~150 ms; pickle) stays off
    # every other command's start-up (cli/main imports every command module).
    from replicator.engine.job.session import route_jvm_output
    from replicator.engine.runner import RunOptions, run_pipeline
    from replicator.engine.state.runstate import JVM_LOG, RunStateWriter

    checkpoint_dir = Path(pipeline.checkpoint_dir)
    # Spark's start-up chatter and its Python workers' output: a file, not the user's stderr.
    route_jvm_output(checkpoint_dir / JVM_LOG)
    render.detail(f"Spark's own log: {checkpoint_dir / JVM_LOG}")
    display = render.run_display(pipeline.name) if log_format is LogFormat.text else None
    run_state = RunStateWriter(checkpoint_dir, pipeline.name)
    reporter = _Reporter(pipeline, run_state, display, metrics,
                         format_json if log_format is LogFormat.json else format_text)
    options = RunOptions(
        until_caught_up=until_caught_up,
        snapshot=snapshot.value,
        master=master,
        conf=spark_conf,
        on_report=reporter.on_report,
        on_notice=reporter.on_notice,
        debug=render.settings.debug,
        take_over=take_over,
        chunk_rows=chunk_rows,
    )
    try:
        with run_state, display if display is not None else render.nothing():
            try:
                result = run_pipeline(pipeline, options)
            finally:
                route_jvm_output(None)  # in-process callers (tests) start no other JVM there
            if reporter.live and not result.stopped:
                display.snapshot_done()  # the bars end at 100%: estimates are estimates
    except ReplicatorError as exc:
        reporter.failed(exc)
        raise
    except KeyboardInterrupt:  # a second Ctrl-C: stopped at once, not failed
        run_state.update(phase="stopped", ended_at=time.time())
        raise
    except BaseException as exc:  # a bug: still say how the run ended
        run_state.error(exc, transient=False)
        raise
    ended = "stopped" if result.stopped or not until_caught_up else "caught_up"
    run_state.update(phase=ended, ended_at=time.time())
    summary = (
        f"{pipeline.name}: {result.batches} batch(es), {result.changes} change(s), "
        f"{result.rows} row(s) applied, {result.snapshot_rows} snapshot row(s); "
        f"at {result.end or '-'}"
    )
    reporter.on_notice(summary + (" (stopped)" if result.stopped else ""))
    if result.stopped:
        sys.exit(130)
