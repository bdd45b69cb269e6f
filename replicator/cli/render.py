"""All terminal output goes through here: the only module that imports rich.

Colour and live displays only on a terminal; ``NO_COLOR`` (https://no-color.org) and
``--no-color`` turn colour off; plain text otherwise, so CI logs stay readable.
"""

from __future__ import annotations

import os
import sys
from dataclasses import dataclass
from typing import Any

from rich.console import Console


@dataclass
class OutputSettings:
    verbosity: int = 0  # -1 quiet, 0 normal, 1+ verbose
    color: bool = True
    debug: bool = False


settings = OutputSettings()


def _color_wanted() -> bool:
    return settings.color and "NO_COLOR" not in os.environ


def stdout() -> Console:
    return Console(
        file=sys.stdout,
        no_color=not _color_wanted(),
        highlight=False,
        soft_wrap=True,
    )


def stderr() -> Console:
    return Console(
        file=sys.stderr,
        no_color=not _color_wanted(),
        highlight=False,
        soft_wrap=True,
    )


def is_terminal() -> bool:
    return sys.stdout.isatty()


def info(message: str, *args: Any) -> None:
    """A progress line on stderr (silenced by -q)."""
    if settings.verbosity >= 0:
        stderr().print(message % args if args else message, markup=False)


def detail(message: str, *args: Any) -> None:
    """A line shown only with -v."""
    if settings.verbosity >= 1:
        stderr().print(message % args if args else message, markup=False, style="dim")


def error(message: str, hint: str | None = None) -> None:
    console = stderr()
    console.print(f"error: {message}", style="bold red", markup=False)
    if hint:
        console.print(f"  hint: {hint}", style="yellow", markup=False)


def warning(message: str, hint: str | None = None) -> None:
    if settings.verbosity < 0:
        return
    console = stderr()
    console.print(f"warning: {message}", style="yellow", markup=False)
    if hint:
        console.print(f"  hint: {hint}", markup=False)


def print_text(text: str, style: str | None = None) -> None:
    stdout().print(text, style=style, markup=False, highlight=False)


def print_sql(sql: str) -> None:
    """SQL, syntax-highlighted on a colour terminal and plain otherwise."""
    if is_terminal() and _color_wanted():
        from rich.syntax import Syntax

        stdout().print(Syntax(sql, "sql", theme="ansi_dark", word_wrap=True))
    else:
        sys.stdout.write(sql if sql.endswith("\n") else sql + "\n")


def print_table(title: str | None, columns: list[str], rows: list[list[Any]]) -> None:
    from rich.table import Table

    table = Table(title=title, show_lines=False)
    for column in columns:
        table.add_column(column)
    for row in rows:
        table.add_row(*("" if v is None else str(v) for v in row))
    stdout().print(table)
