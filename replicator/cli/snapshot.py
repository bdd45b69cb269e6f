"""``replicator snapshot FILE --table db.t``: copy one table again while the others stream.

The request is a file in the pipeline's checkpoint directory; the running run takes it within
a second and copies the table chunk by chunk between its stream batches, the next run does if
none is running (``engine.recopy``). Rows the source no longer has are removed when the copy
ends; with ``--where`` only the rows the condition selects are copied, and none is removed
(Debezium's incremental snapshot with ``additional-conditions`` does the same). Progress shows in the run's log, ``replicator status`` and the metrics.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Annotated, Any

import typer

from replicator.cli import render
from replicator.cli.options import OutputFormat, TextOrJson
from replicator.context import Context
from replicator.errors import ConfigError
from replicator.source.conditions import condition_sql

COMMAND_SETTINGS = {"help": "Copy one table again while the others stream (a running run "
                    "takes the request at once, else the next run)."}


def command(
    file: Annotated[Path, typer.Argument(help="The pipeline file.", show_default=False)],
    tables: Annotated[
        list[str], typer.Option("--table", "-t", help="A source table (db.table) of the "
                                "pipeline; repeat for several.", show_default=False)
    ],
    where: Annotated[
        str | None, typer.Option("--where", help="Copy only the rows this MySQL condition "
                                 "over the table's columns selects (upserts; nothing is "
                                 "removed), e.g. \"id BETWEEN 1000 AND 2000\".",
                                 show_default=False)
    ] = None,
    output_format: TextOrJson = OutputFormat.text,
) -> None:
    # The engine's recopy (the snapshot reader, the expression compiler, ~85 ms) and pickle
    # stay off every command's start-up (cli/main imports every command module).
    from replicator.engine.recopy import request
    from replicator.engine.state.checkpoint import CheckpointDir
    from replicator.engine.state.runstate import lock_holder

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
    conditions = {name: _condition(context, name, where) for name in names}
    for name in names:
        request(checkpoint, name, conditions[name])
    holder = lock_holder(checkpoint.path)
    if output_format is OutputFormat.json:
        sys.stdout.write(json.dumps({"pipeline": pipeline.name, "tables": names,
                                     "where": where, "running_pid": holder}) + "\n")
        return
    when = (f"the running run (PID {holder}) copies it" if holder is not None
            else "the next `replicator run` copies it")
    for name in names:
        rows = f" (the rows where {conditions[name]}; none removed)" if where else ""
        render.print_text(f"{name}: re-copy requested{rows}; {when} chunk by chunk while the "
                          "other tables stream")


def _condition(context: Any, table: str, where: str | None) -> str | None:
    """``--where`` checked against the table's live columns (``source.conditions``)."""
    if where is None:
        return None

    database, name = table.split(".", 1)
    source = context.catalog.table(database, name)
    if source is None:
        raise ConfigError(f"{table}: not found in MySQL", hint="create it, or check the name")
    return condition_sql(where, source)
