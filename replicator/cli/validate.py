"""``replicator validate FILE...``: lint pipeline files, locally or in CI.

Exit codes: 0 valid, 1 findings (errors; warnings too with ``--strict``), 2 usage or a file
that cannot be read. A directory argument validates every ``*.yaml``/``*.yml`` in it (globs
are the shell's job). Imports nothing heavy: it runs in CI without Java or drivers.
"""

from __future__ import annotations

import enum
import sys
from pathlib import Path
from typing import Annotated

import typer

from replicator.cli import render
from replicator.config import validate_file
from replicator.config.diagnostics import REPORTERS, Diagnostic
from replicator.errors import UsageError

COMMAND_SETTINGS = {"help": "Check pipeline files: every problem with file:line:col and a hint."}


class OutputFormat(enum.StrEnum):
    text = "text"
    json = "json"
    github = "github"


def expand_paths(arguments: list[Path]) -> tuple[list[Path], list[UsageError]]:
    """Files to validate, directories expanded; problems with the arguments themselves."""
    files: list[Path] = []
    problems: list[UsageError] = []
    for argument in arguments:
        if argument.is_dir():
            found = sorted([*argument.glob("*.yaml"), *argument.glob("*.yml")])
            if not found:
                problems.append(UsageError(f"{argument}: no .yaml or .yml files in this directory"))
            files.extend(found)
        else:
            files.append(argument)
    return files, problems


def command(
    files: Annotated[
        list[Path],
        typer.Argument(help="Pipeline files, or directories of them.", show_default=False),
    ],
    output_format: Annotated[
        OutputFormat,
        typer.Option("--format", "-f", help="text, json, or github (Actions annotations)."),
    ] = OutputFormat.text,
    strict: Annotated[bool, typer.Option("--strict", help="Warnings fail too (exit 1).")] = False,
) -> None:
    paths, problems = expand_paths(files)
    diagnostics: list[Diagnostic] = []
    checked = 0
    for path in paths:
        try:
            diagnostics.extend(validate_file(path))
            checked += 1
        except UsageError as exc:
            problems.append(exc)
    for problem in problems:
        render.error(problem.message, problem.hint)

    shown = diagnostics
    if output_format is OutputFormat.text and render.settings.verbosity < 0:
        shown = [d for d in diagnostics if d.is_error]  # -q: errors only
    report = REPORTERS[output_format.value](shown, files=checked)
    if output_format is OutputFormat.text:
        for line in report.splitlines():
            style = "red" if "error[" in line else "yellow" if "warning[" in line else None
            render.print_text(line, style=style)
    else:
        sys.stdout.write(report)

    if problems:
        raise typer.Exit(2)
    failing = [d for d in diagnostics if d.is_error or strict]
    raise typer.Exit(1 if failing else 0)
