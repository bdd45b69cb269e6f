"""One error hierarchy for everything a user can act on.

Every error carries a one-line ``message`` and a ``hint`` that names the fix (the setting,
flag or GRANT). The CLI prints those two lines in red and exits with ``exit_code``; a
traceback is shown only with ``--debug``. Anything that is *not* a ``ReplicatorError`` is a
bug in replicator and is reported as such.

``transient`` tells the engine whether retrying with backoff can help (a dropped connection,
a warehouse that is resuming) or whether it must stop (a purged binlog, a missing grant).
It is decided where the driver error is caught: in ``source/`` and ``sink/``.
"""

from __future__ import annotations


class ReplicatorError(Exception):
    """Base of every error that is reported to the user without a traceback."""

    exit_code = 1
    transient = False

    def __init__(self, message: str, hint: str | None = None) -> None:
        super().__init__(message)
        self.message = message
        self.hint = hint

    def __str__(self) -> str:
        return self.message


class UsageError(ReplicatorError):
    """Bad command-line usage, or an input file that cannot be read at all (exit 2)."""

    exit_code = 2


class ConfigError(ReplicatorError):
    """The pipeline file is invalid; ``diagnostics`` lists every problem found."""

    def __init__(self, message: str, diagnostics: list | None = None, hint: str | None = None):
        super().__init__(message, hint)
        self.diagnostics = list(diagnostics or [])


class PlanError(ReplicatorError):
    """The pipeline cannot be turned into SQL (unknown type, missing key, ...).

    ``problems``: every problem ``build_plan`` found (``plan.problems.PlanProblem``: code,
    message, hint, where in the YAML), for reporters that point at the file's lines."""

    def __init__(self, message: str, hint: str | None = None, problems: tuple = ()) -> None:
        super().__init__(message, hint)
        self.problems = problems


class SourceError(ReplicatorError):
    """MySQL side: connection, settings, grants, binlog availability."""


class TransientSourceError(SourceError):
    """A MySQL failure that a reconnect with backoff can fix (server restart, network)."""

    transient = True


class BinlogGoneError(SourceError):
    """The binlog position to resume from has been purged: changes would be lost."""


class SinkError(ReplicatorError):
    """Target side: Snowflake or DuckDB."""


class TransientSinkError(SinkError):
    transient = True


class EngineError(ReplicatorError):
    """Spark job: launch, checkpoint, decode job failures."""


class LeaseError(ReplicatorError):
    """Another run holds the pipeline's lease in the target, or took it over from this run
    (fencing): this run applies nothing. Exit code 3 (docs/running.md)."""

    exit_code = 3
