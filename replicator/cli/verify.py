"""``replicator verify FILE``: source vs target, row counts and per-key comparison.

Exit 0: every table equal; 1: differences (listed key by key); 2: could not compare
(unreadable file, unreachable source or target, a table not replicated yet).
"""

from __future__ import annotations

import enum
import json
import sys
from pathlib import Path
from typing import Annotated

import typer

from replicator.cli import render
from replicator.config import load_pipeline
from replicator.config.diagnostics import format_text
from replicator.errors import ConfigError, ReplicatorError

COMMAND_SETTINGS = {"help": "Compare source and target: row counts and rows per key range."}


class OutputFormat(enum.StrEnum):
    text = "text"
    json = "json"


def command(
    file: Annotated[Path, typer.Argument(help="The pipeline file.", show_default=False)],
    table: Annotated[
        list[str] | None,
        typer.Option("--table", "-t", help="Only this table (source db.table or target name); "
                     "repeatable."),
    ] = None,
    output_format: Annotated[
        OutputFormat, typer.Option("--format", "-f", help="text or json.")
    ] = OutputFormat.text,
    wait: Annotated[
        float, typer.Option("--wait", min=0, help="Re-check differing keys for up to this many "
                            "seconds before reporting (replication may be live).")
    ] = 0.0,
) -> None:
    # verify brings the snapshot reader and the expression compiler (~110 ms): off every
    # command's start-up (cli/main imports every command module).
    from replicator.verify import VerifyError, verify_pipeline

    try:
        pipeline = load_pipeline(file)
        report = verify_pipeline(pipeline, tables=table or None, wait_s=wait)
    except ConfigError as exc:
        for diagnostic in exc.diagnostics:
            sys.stderr.write(format_text(diagnostic) + "\n")
        raise VerifyError(exc.message, hint=exc.hint or "`replicator validate FILE` explains "
                          "each problem") from exc
    except VerifyError:
        raise
    except ReplicatorError as exc:
        # Whatever stopped the comparison, verify could not run: exit 2, not "different".
        raise VerifyError(exc.message, hint=exc.hint) from exc
    if output_format is OutputFormat.json:
        sys.stdout.write(json.dumps(report.to_dict(), indent=2) + "\n")
    else:
        for line in report.describe():
            render.print_text(line)
        render.print_text("equal" if report.equal else "DIFFERENT")
    if not report.equal:
        raise typer.Exit(1)
