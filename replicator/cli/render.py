"""All terminal output goes through here: the only module that imports rich.

Colour and live displays only on a terminal; ``NO_COLOR`` (https://no-color.org) and
``--no-color`` turn colour off; plain text otherwise, so CI logs stay readable.

rich is imported only when it draws something: styled lines on a terminal, tables, SQL
highlighting, the live display. Plain lines (a pipe, a file, CI logs) are written directly,
which keeps ``replicator validate`` in CI ~25 ms faster to start (rich.console's import).
"""

from __future__ import annotations

import os
import sys
from dataclasses import dataclass
from typing import IO, TYPE_CHECKING, Any

if TYPE_CHECKING:
    from rich.console import Console


@dataclass
class OutputSettings:
    verbosity: int = 0  # -1 quiet, 0 normal, 1+ verbose
    color: bool = True
    debug: bool = False
    # `run --log-format json`: notices and the final error are JSON lines too, so a log
    # shipper parses every line of the run's stderr.
    json_lines: bool = False


settings = OutputSettings()


def _color_wanted() -> bool:
    return settings.color and "NO_COLOR" not in os.environ


def stdout() -> Console:
    from rich.console import Console

    return Console(
        file=sys.stdout,
        no_color=not _color_wanted(),
        highlight=False,
        soft_wrap=True,
    )


def stderr() -> Console:
    from rich.console import Console

    return Console(
        file=sys.stderr,
        no_color=not _color_wanted(),
        highlight=False,
        soft_wrap=True,
    )


def is_terminal() -> bool:
    return sys.stdout.isatty()


def _plain(stream: IO[str]) -> bool:
    """Nothing to style: not a terminal (rich would print the text as it is)."""
    try:
        return not stream.isatty()
    except (AttributeError, ValueError):  # a closed or unusual stream
        return True


def _line(stream: IO[str], text: str, style: str | None = None) -> None:
    if _plain(stream):
        stream.write(text + "\n")
        return
    console = stdout() if stream is sys.stdout else stderr()
    console.print(text, style=style, markup=False, highlight=False, emoji=False)


def _json_line(**fields: Any) -> None:
    import json

    log_line(json.dumps(fields, separators=(",", ":"), default=str))


def info(message: str, *args: Any) -> None:
    """A progress line on stderr (silenced by -q)."""
    if settings.verbosity >= 0:
        text = message % args if args else message
        if settings.json_lines:
            _json_line(notice=text)
        else:
            _line(sys.stderr, text)


def detail(message: str, *args: Any) -> None:
    """A line shown only with -v."""
    if settings.verbosity >= 1:
        text = message % args if args else message
        if settings.json_lines:
            _json_line(detail=text)
        else:
            _line(sys.stderr, text, style="dim")


def error(message: str, hint: str | None = None, code: str | None = None) -> None:
    """The one error line (and its hint); ``code`` names the kind (``BinlogGoneError``)."""
    if settings.json_lines:
        _json_line(error={"code": code or "error", "message": message, "hint": hint})
        return
    _line(sys.stderr, f"error: {message}", style="bold red")
    if hint:
        _line(sys.stderr, f"  hint: {hint}", style="yellow")


def warning(message: str, hint: str | None = None) -> None:
    if settings.verbosity < 0:
        return
    if settings.json_lines:
        _json_line(warning={"message": message, "hint": hint})
        return
    _line(sys.stderr, f"warning: {message}", style="yellow")
    if hint:
        _line(sys.stderr, f"  hint: {hint}")


def print_text(text: str, style: str | None = None) -> None:
    _line(sys.stdout, text, style=style)


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


# -- replicator run: structured log lines and the live display ------------------------------


def log_line(text: str) -> None:
    """A structured log line (``key=value`` or JSON) on stderr, never styled."""
    sys.stderr.write(text if text.endswith("\n") else text + "\n")
    sys.stderr.flush()


class _Nothing:
    def __enter__(self) -> None:
        return None

    def __exit__(self, *exc: Any) -> None:
        return None


def nothing() -> _Nothing:
    return _Nothing()


class RunDisplay:
    """The live view of ``replicator run`` on a terminal.

    Snapshot: one progress bar per table (rows copied of the estimated total, rows/s, ETA).
    Stream: changes/s, lag in seconds and bytes, the last batch and its age, per-table totals.
    ``live`` is False off a terminal (or with -q): callers then log plain lines instead.
    """

    def __init__(self, pipeline: str, *, clock: Any = None) -> None:
        import time

        self.pipeline = pipeline
        self.live = is_terminal() and sys.stderr.isatty() and settings.verbosity >= 0
        self._clock = clock or time.time
        self._live: Any = None
        self._progress: Any = None  # rich Progress, created on the first snapshot chunk
        self._snapshot_tasks: dict[str, Any] = {}
        # Tables are copied one after the other: a table's copy started when the previous
        # chunk (or the snapshot) did; rows/s is its rows over the time since.
        self._snapshot_started: dict[str, float] = {}
        self._last_chunk_at: float | None = None
        self._tables: dict[str, dict[str, Any]] = {}
        self._batches = 0
        self._position = "-"
        self._lag = "-"
        self._last_batch_at: float | None = None
        self._last_error = ""

    def __enter__(self) -> RunDisplay:
        if self.live:
            from rich.live import Live

            # Live re-renders ``self`` on every refresh, so rates, ETAs and "last batch N s
            # ago" move on between batches.
            self._live = Live(self, console=stderr(), refresh_per_second=4)
            self._live.__enter__()
        return self

    def __exit__(self, *exc: Any) -> None:
        if self._live is not None:
            self._live.__exit__(*exc)
            self._live = None

    def _refresh(self) -> None:
        if self._live is not None:
            self._live.refresh()

    def error(self, message: str) -> None:
        self._last_error = message
        self._refresh()

    def snapshot_started(self) -> None:
        self._last_chunk_at = self._clock()

    def snapshot(self, report: Any, estimates: dict[str, int]) -> None:
        """Fold in one snapshot chunk (``engine.apply.metrics.BatchReport`` of kind snapshot);
        ``estimates`` are the tables' approximate row counts (lower-cased ``db.table``)."""
        from rich.progress import (
            BarColumn,
            MofNCompleteColumn,
            Progress,
            TextColumn,
            TimeRemainingColumn,
        )

        if self._progress is None:
            self._progress = Progress(
                TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(),
                TextColumn("rows"), TextColumn("{task.fields[rate]}"),
                TextColumn("ETA"), TimeRemainingColumn(),
                console=stderr(), auto_refresh=False,
            )
        for table in report.tables:
            task = self._snapshot_tasks.get(table.table)
            estimate = estimates.get(table.table.lower())
            if task is None:
                task = self._progress.add_task(f"snapshot {table.table}", total=estimate,
                                               rate="")
                self._snapshot_tasks[table.table] = task
            now = self._clock()
            started = self._snapshot_started.setdefault(table.table,
                                                        self._last_chunk_at or report.finished_at
                                                        - report.seconds)
            self._progress.advance(task, table.changes)
            done = self._progress.tasks[task].completed
            if estimate is not None and done > (self._progress.tasks[task].total or 0):
                # InnoDB's estimate was low: the bar shows the rows copied so far as the total.
                self._progress.update(task, total=done)
            elapsed = now - started
            self._progress.update(task, rate=f"{done / elapsed:,.0f} rows/s" if elapsed > 0
                                  else "")
        self._last_chunk_at = self._clock()
        self._refresh()

    def snapshot_done(self) -> None:
        """The snapshot finished: every bar shows 100% (estimates are only estimates)."""
        if self._progress is not None:
            for task in self._progress.tasks:
                self._progress.update(task.id, total=task.completed)
        self._refresh()

    def update(self, report: Any, lag: str | None = None) -> None:
        """Fold in one stream ``engine.apply.metrics.BatchReport`` (and the lag behind the head)."""
        self._batches += 1
        self._last_batch_at = report.finished_at
        if lag is not None:
            self._lag = lag
        if report.end_offset:
            self._position = f"{report.end_offset['file']}:{report.end_offset['pos']}"
        for table in report.tables:
            entry = self._tables.setdefault(
                table.table, {"changes": 0, "rows": 0, "batches": 0, "rate": 0.0}
            )
            entry["changes"] += table.changes
            entry["rows"] += table.rows
            entry["batches"] += 1
            seconds = report.seconds or 1e-9
            entry["rate"] = table.changes / seconds
        self._refresh()

    def title(self) -> str:
        age = ("-" if self._last_batch_at is None
               else f"{max(0.0, self._clock() - self._last_batch_at):.0f} s ago")
        return (f"{self.pipeline}: {self._batches} batch(es), at {self._position}, "
                f"lag {self._lag}, last batch {age}")

    def _render(self) -> Any:
        from rich.table import Table

        table = Table(
            title=self.title(),
            caption=f"last error: {self._last_error}" if self._last_error else None,
        )
        for column in ("table", "changes", "rows applied", "batches", "changes/s (last)"):
            table.add_column(column)
        for name, entry in sorted(self._tables.items()):
            table.add_row(name, str(entry["changes"]), str(entry["rows"]),
                          str(entry["batches"]), f"{entry['rate']:.0f}")
        return table

    def __rich__(self) -> Any:
        from rich.console import Group

        parts = []
        if self._progress is not None:
            parts.append(self._progress.get_renderable())
        if self._batches or self._progress is None or self._last_error:
            parts.append(self._render())
        return Group(*parts)


def run_display(pipeline: str) -> RunDisplay:
    return RunDisplay(pipeline)


# -- replicator verify: progress per table --------------------------------------------------


class VerifyProgress:
    """``replicator verify``'s progress on stderr (``verify.compare.Progress``).

    On a terminal: one bar per table, source rows compared of InnoDB's estimate (rows
    alone for a ``--where`` slice, whose share of the table is unknown). Otherwise a plain
    line as each table starts and ends. Nothing with -q. ``advance`` may come from verify's
    range threads: rich's Progress takes its own lock.
    """

    def __init__(self) -> None:
        self.live = sys.stderr.isatty() and settings.verbosity >= 0
        self._progress: Any = None
        self._tasks: dict[str, Any] = {}

    def __enter__(self) -> VerifyProgress:
        if self.live:
            from rich.progress import (
                BarColumn,
                MofNCompleteColumn,
                Progress,
                TextColumn,
                TimeElapsedColumn,
            )

            self._progress = Progress(
                TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(),
                TextColumn("rows"), TimeElapsedColumn(), console=stderr())
            self._progress.start()
        return self

    def __exit__(self, *exc: Any) -> None:
        if self._progress is not None:
            self._progress.stop()
            self._progress = None

    def started(self, table: str, estimated_rows: int | None) -> None:
        if self._progress is not None:
            self._tasks[table] = self._progress.add_task(f"verify {table}",
                                                         total=estimated_rows or None)
        else:
            about = f" (about {estimated_rows:,} rows)" if estimated_rows else ""
            info(f"{table}: comparing{about}")

    def advance(self, table: str, rows: int) -> None:
        task = self._tasks.get(table)
        if self._progress is None or task is None:
            return
        self._progress.advance(task, rows)
        done = self._progress.tasks[task].completed
        total = self._progress.tasks[task].total
        if total is not None and done > total:  # InnoDB's estimate was low
            self._progress.update(task, total=done)

    def done(self, report: Any) -> None:
        task = self._tasks.get(report.source_table)
        if self._progress is not None and task is not None:
            # Every bar ends full (the estimate is only an estimate).
            self._progress.update(task, total=self._progress.tasks[task].completed)
            return
        found = "equal" if report.equal else f"{len(report.differences)} differing key(s)"
        info(f"{report.source_table}: {report.source_rows:,} source rows compared in "
             f"{report.seconds:.1f}s, {found}")
