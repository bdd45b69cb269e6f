"""``replicator verify FILE``: source vs target, row counts and per-key comparison.

Exit 0: every table equal; 1: differences (listed key by key); 2: could not compare
(unreadable file, unreachable source or target, a table not replicated yet, a ``--where``
the target cannot evaluate alike).

As a scheduled operation: ``--tables``/``--where`` check one slice, ``--max-rows-per-second``
bounds the load on MySQL, ``--metrics-file`` leaves Prometheus gauges for an alert
(docs/verify.md, "Verification as an operation").
"""

from __future__ import annotations

import enum
import json
import sys
import time
from pathlib import Path
from typing import Annotated, Any

import typer

from replicator.cli import render
from replicator.cli.options import OutputFormat, TextOrJson
from replicator.config import load_pipeline
from replicator.config.diagnostics import format_text
from replicator.errors import ConfigError, ReplicatorError, UsageError

COMMAND_SETTINGS = {"help": "Compare source and target: row counts and rows per key range."}


class Method(enum.StrEnum):
    auto = "auto"
    fetch = "fetch"


def command(
    file: Annotated[Path, typer.Argument(help="The pipeline file.", show_default=False)],
    table: Annotated[
        list[str] | None,
        typer.Option("--table", "-t", help="Only this table (source db.table or target name); "
                     "repeatable."),
    ] = None,
    tables: Annotated[
        str | None,
        typer.Option("--tables", help="Only these tables, comma-separated (db.t,db.u); "
                     "adds to --table.", show_default=False),
    ] = None,
    where: Annotated[
        str | None,
        typer.Option("--where", help="Only the rows this MySQL condition selects, on both "
                     "sides (checked as `snapshot --where` checks it; comparisons of "
                     "integer, DECIMAL, date and time columns), e.g. \"id BETWEEN 1 AND "
                     "50000\". Needs --table/--tables.", show_default=False),
    ] = None,
    max_rows_per_second: Annotated[
        float | None,
        typer.Option("--max-rows-per-second", min=1, help="Pace the reads of MySQL to at "
                     "most this many rows per second (checksum queries count the rows they "
                     "cover).", show_default=False),
    ] = None,
    metrics_file: Annotated[
        Path | None,
        typer.Option("--metrics-file", help="Write Prometheus gauges (differences per table "
                     "and kind, last success time) to this file, textfile-collector format; "
                     "not written when verify cannot compare.", show_default=False),
    ] = None,
    output_format: TextOrJson = OutputFormat.text,
    wait: Annotated[
        float, typer.Option("--wait", min=0, help="Re-check differing keys for up to this many "
                            "seconds before reporting (replication may be live).")
    ] = 0.0,
    method: Annotated[
        Method, typer.Option("--method", help="auto: range checksums computed inside MySQL "
                             "and the warehouse where a table allows, else its rows are "
                             "fetched; fetch: fetch every row (the slow, older way).")
    ] = Method.auto,
    repair: Annotated[
        bool, typer.Option("--repair", help="Ask the pipeline to copy the differing rows "
                           "again (a re-copy, as `replicator snapshot --table --where`): the "
                           "running run takes it at once, else the next run.")
    ] = False,
    dry_run: Annotated[
        bool, typer.Option("--dry-run", help="With --repair: print what would be copied, "
                           "ask for nothing.")
    ] = False,
) -> None:
    # verify brings the snapshot reader and the expression compiler (~110 ms): off every
    # command's start-up (cli/main imports every command module).
    from replicator.verify import VerifyError, verify_pipeline
    from replicator.verify.pace import Pacer

    requests: list[Any] = []

    def ask_for_repair(report: Any, plan: Any, catalog: Any) -> None:
        from replicator.verify.repair import repair_requests

        requests.extend(repair_requests(report, plan, catalog))
        if requests and not dry_run:
            _file_requests(report.pipeline, pipeline, requests)

    names = [*(table or []), *(n.strip() for n in (tables or "").split(",") if n.strip())]
    try:
        pipeline = load_pipeline(file)
        with render.VerifyProgress() as progress:
            report = verify_pipeline(
                pipeline, tables=names or None, wait_s=wait, checksums=method is Method.auto,
                on_compared=ask_for_repair if repair else None, where=where,
                pacer=Pacer(max_rows_per_second) if max_rows_per_second else None,
                progress=progress)
    except ConfigError as exc:
        for diagnostic in exc.diagnostics:
            sys.stderr.write(format_text(diagnostic) + "\n")
        raise VerifyError(exc.message, hint=exc.hint or "`replicator validate FILE` explains "
                          "each problem") from exc
    except (VerifyError, UsageError):
        raise
    except ReplicatorError as exc:
        # Whatever stopped the comparison, verify could not run: exit 2, not "different".
        raise VerifyError(exc.message, hint=exc.hint) from exc
    if metrics_file is not None:
        _write_metrics(metrics_file, report)
    if output_format is OutputFormat.json:
        data = report.to_dict()
        if repair:
            data["repair"] = {"dry_run": dry_run, "requests": [r.to_dict() for r in requests]}
        sys.stdout.write(json.dumps(data, indent=2) + "\n")
    else:
        for line in report.describe():
            render.print_text(line)
        for request in requests:
            render.print_text(("would ask: " if dry_run else "asked: ") + request.describe())
        render.print_text("equal" if report.equal else "DIFFERENT")
    if not report.equal:
        raise typer.Exit(1)


def _write_metrics(path: Path, report: Any) -> None:
    """The gauges of ``verify.metrics``, written by ``replicator run``'s own writer."""
    from replicator.engine.apply.prometheus import write_textfile
    from replicator.verify.metrics import verify_registry

    write_textfile(path, verify_registry(report, finished_at=time.time()))


def _file_requests(name: str, pipeline: Any, requests: list[Any]) -> None:
    """The re-copy requests, in the pipeline's checkpoint (``engine.recopy.request``)."""
    from replicator.engine.recopy import request
    from replicator.engine.state.checkpoint import CheckpointDir
    from replicator.engine.state.runstate import lock_holder

    checkpoint = CheckpointDir(pipeline.checkpoint_dir)
    for wanted in requests:
        request(checkpoint, wanted.source_table, wanted.where)
    holder = lock_holder(checkpoint.path)
    sys.stderr.write(f"{name}: {len(requests)} re-copy request(s) filed; "
                     + (f"the running run (PID {holder}) copies them now"
                        if holder is not None else "the next `replicator run` copies them")
                     + "\n")
