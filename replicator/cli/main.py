"""The ``replicator`` command: global options, command registration, one error handler.

Command modules import only what their command needs at import time; heavy libraries
(pyspark, duckdb, snowflake, pymysqlreplication) are imported inside the functions that use
them, so ``validate`` and ``plan --offline`` start fast and run without Java.
"""

from __future__ import annotations

import importlib
import sys
from typing import Annotated

import typer

from replicator import __version__
from replicator.cli import render
from replicator.errors import ReplicatorError

app = typer.Typer(
    name="replicator",
    help="Replicate MySQL tables into Snowflake (or DuckDB) by change data capture, on Spark.",
    no_args_is_help=True,
    add_completion=True,
    # Locals of a failing frame may hold credentials: never print them.
    pretty_exceptions_show_locals=False,
    rich_markup_mode=None,
)

# One module per command under replicator/cli/, each exposing ``command`` (a typer
# command function). The order is the order of ``replicator --help``.
COMMANDS = ["init", "validate", "check", "plan", "run", "snapshot", "status", "verify", "schema",
            "package"]


def _version(value: bool) -> None:
    if value:
        print(f"replicator {__version__}")
        raise typer.Exit()


@app.callback()
def _global_options(
    version: Annotated[
        bool,
        typer.Option("--version", callback=_version, is_eager=True, help="Print the version."),
    ] = False,
    verbose: Annotated[int, typer.Option("--verbose", "-v", count=True, help="More output.")] = 0,
    quiet: Annotated[bool, typer.Option("--quiet", "-q", help="Only errors.")] = False,
    no_color: Annotated[
        bool, typer.Option("--no-color", help="No colour (also: NO_COLOR in the environment).")
    ] = False,
    debug: Annotated[bool, typer.Option("--debug", help="Show tracebacks of errors.")] = False,
) -> None:
    render.settings.verbosity = -1 if quiet else verbose
    render.settings.json_lines = False  # `run --log-format json` turns it on
    render.settings.color = not no_color
    render.settings.debug = debug


def _register() -> None:
    for name in COMMANDS:
        try:
            module = importlib.import_module(f"replicator.cli.{name}")
        except ModuleNotFoundError as exc:
            if exc.name == f"replicator.cli.{name}":
                continue  # command not built yet
            raise
        app.command(name=name, **getattr(module, "COMMAND_SETTINGS", {}))(module.command)


_register()


# Global switches without a value, accepted after the command as well: hints say "run again
# with --debug", and users type it at the end (`replicator run p.yaml --debug`).
_ANYWHERE = ("--debug", "--no-color")


def global_switches_first(argv: list[str]) -> list[str]:
    """``argv`` with the value-less global switches moved before the command, up to a ``--``
    (after which every word is an argument)."""
    end = argv.index("--") if "--" in argv else len(argv)
    moved = [word for word in argv[:end] if word in _ANYWHERE]
    kept = [word for word in argv[:end] if word not in _ANYWHERE]
    return moved + kept + argv[end:]


def main() -> None:
    """Entry point: known errors print one red line and a hint; bugs print a traceback.

    typer/click handle usage errors themselves (exit 2, with the command's usage line).
    """
    try:
        app(args=global_switches_first(sys.argv[1:]))
    except ReplicatorError as exc:
        if render.settings.debug:
            raise
        render.error(exc.message, exc.hint, code=type(exc).__name__)
        sys.exit(exc.exit_code)
    except KeyboardInterrupt:
        render.error("interrupted", code="Interrupted")
        sys.exit(130)


if __name__ == "__main__":
    main()
