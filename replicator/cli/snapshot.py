"""``replicator snapshot FILE --table db.t``: copy one table again while the others stream.

The request is a file in the pipeline's checkpoint directory; the running run takes it within
a second and copies the table chunk by chunk between its stream batches, the next run does if
none is running (``engine.recopy``). Rows the source no longer has are removed when the copy
ends. Progress shows in the run's log, ``replicator status`` and the metrics.
"""

from __future__ import annotations

import enum
import json
import sys
from pathlib import Path
from typing import Annotated

import typer

from replicator.cli import render
from replicator.errors import ConfigError

COMMAND_SETTINGS = {"help": "Copy one table again while the others stream (a running run "
                    "takes the request at once, else the next run)."}


class OutputFormat(enum.StrEnum):
    text = "text"
    json = "json"


def command(
    file: Annotated[Path, typer.Argument(help="The pipeline file.", show_default=False)],
    tables: Annotated[
        list[str], typer.Option("--table", "-t", help="A source table (db.table) of the "
                                "pipeline; repeat for several.", show_default=False)
    ],
    output_format: Annotated[
        OutputFormat, typer.Option("--format", "-f", help="text or json.")
    ] = OutputFormat.text,
) -> None:
    from replicator.context import Context
    from replicator.engine.checkpoint import CheckpointDir
    from replicator.engine.recopy import request
    from replicator.engine.runstate import lock_holder

    context = Context.load(file)
    pipeline = context.pipeline
    # The live plan names the tables (a `sources:` selection's too) as the run will see them.
    planned = {name.lower(): name for name in context.plan.source_names()}
    unknown = [name for name in tables if name.lower() not in planned]
    if unknown:
        raise ConfigError(
            f"{', '.join(unknown)}: not a source table of pipeline {pipeline.name}",
            hint="name it as db.table; the pipeline's tables are: "
            + ", ".join(sorted(planned.values())),
        )
    outbox = sorted({t.source_name for t in context.plan.tables if t.outbox is not None})
    refused = [name for name in tables if name.lower() in {o.lower() for o in outbox}]
    if refused:
        raise ConfigError(
            f"{', '.join(refused)} feeds outbox routes: copying it again would emit its rows "
            "as events again", hint="an outbox table is not re-copied")
    checkpoint = CheckpointDir(pipeline.checkpoint_dir)
    names = [planned[name.lower()] for name in tables]
    for name in names:
        request(checkpoint, name)
    holder = lock_holder(checkpoint.path)
    if output_format is OutputFormat.json:
        sys.stdout.write(json.dumps({"pipeline": pipeline.name, "tables": names,
                                     "running_pid": holder}) + "\n")
        return
    when = (f"the running run (PID {holder}) copies it" if holder is not None
            else "the next `replicator run` copies it")
    for name in names:
        render.print_text(f"{name}: re-copy requested; {when} chunk by chunk while the other "
                          "tables stream")
