"""The warehouse session under the SQL sink (``sink.sql.SQLSink``): cursors, errors, retries.

``SinkSession`` holds the driver connection and everything about talking to it that is not
the programs themselves: one transaction at a time where the warehouse needs it, a new
session after a transient error (``reopen``), the driver's errors sorted into ``SinkError``s,
a whole attempt run again after a transient one (``retry_delays``), and one read in a
transaction of its own. ``DuckDBSink`` and ``SnowflakeSink`` fill in the hooks at the end.
"""

from __future__ import annotations

import contextlib
import os
import threading
import time
from collections.abc import Callable, Sequence
from typing import Any

from replicator.errors import SinkError
from replicator.plan import program
from replicator.plan.dialects import Dialect
from replicator.plan.program import Statement

# Up to ~1 min of waiting per batch: a resuming warehouse, a network blip, an expired
# session. Longer outages go to the engine's own restart-with-backoff.
RETRY_DELAYS_S = (1.0, 2.0, 4.0, 8.0, 16.0, 30.0)


def retry_delays(environ: Any = None) -> tuple[float, ...]:
    """``RETRY_DELAYS_S``, or the seconds REPLICATOR_SINK_RETRY_DELAYS lists ("" : no retry
    inside the sink)."""
    text = (os.environ if environ is None else environ).get("REPLICATOR_SINK_RETRY_DELAYS")
    if text is None:
        return RETRY_DELAYS_S
    try:
        return tuple(float(part) for part in text.split(",") if part.strip())
    except ValueError:
        raise SinkError(f"REPLICATOR_SINK_RETRY_DELAYS={text!r} is not a list of seconds",
                        hint='write seconds separated by commas, e.g. "1,2,4"') from None


class SinkSession:
    """Subclasses set ``dialect`` and implement the hooks at the end of the class."""

    dialect: Dialect
    # One transaction at a time per session (a Snowflake connection is one session); DuckDB
    # gives every batch a connection of its own (``cursor()``), so tables apply in parallel.
    one_transaction_at_a_time: bool = False

    def __init__(self, connection: Any) -> None:
        self._connection = connection
        self._session = threading.Lock() if self.one_transaction_at_a_time else None
        # A transient error may have taken the session with it: the next call opens a new
        # one (``reopen``) before it runs anything.
        self._stale = False
        # Seconds to wait before each new attempt of a batch after a transient error
        # (REPLICATOR_SINK_RETRY_DELAYS="1,2,4": tests and impatient operators), and who
        # hears about it (the run's notices).
        self.retry_delays: tuple[float, ...] = retry_delays()
        self.sleep: Callable[[float], None] = time.sleep
        self.on_retry: Callable[[str], None] | None = None

    @property
    def connection(self) -> Any:
        """The driver connection (tests and ``verify`` read the target through it)."""
        return self._connection

    def close(self) -> None:
        self._connection.close()

    def _with_retries(self, batch_id: int, attempt: Callable[[], Any]) -> Any:
        for number in range(len(self.retry_delays) + 1):
            try:
                return attempt()
            except SinkError as error:
                if not error.transient or number == len(self.retry_delays):
                    raise
                delay = self.retry_delays[number]
                if self.on_retry is not None:
                    self.on_retry(f"transient error (attempt {number + 1}): "
                                  f"{error.message}; batch {batch_id} again in {delay:g} s")
                self.sleep(delay)
        raise AssertionError("unreachable")  # the loop returns or raises

    def _read(self, sql: str, params: Sequence[Any], result: Callable[[Any], Any], doing: str,
              **missing: Any) -> Any:
        """Run one read on a cursor of its own and end its transaction: what ``result`` takes
        from the cursor; ``missing=V``: V when the table it reads does not exist yet."""
        with self._one_at_a_time():
            cursor = self._cursor()
            try:
                self._run(cursor, Statement("read", sql, tuple(params)))
                value = result(cursor)
                if self.dialect.implicit_transactions:  # end the read's transaction
                    cursor.execute(program.ROLLBACK)
                return value
            except self.driver_errors() as exc:
                if missing and self.missing_table(exc):
                    return missing["missing"]
                raise self._failed(exc, doing) from None
            finally:
                cursor.close()

    def _cursor(self) -> Any:
        if self._stale:
            replacement = self.reopen()
            if replacement is not None:
                abandoned = self.session_id()
                with contextlib.suppress(Exception):  # the old session is most likely gone
                    self._connection.close()
                self._connection = replacement
                cursor = replacement.cursor()
                try:
                    self._reopened(cursor, abandoned)
                finally:
                    cursor.close()
            self._stale = False
        return self._connection.cursor()

    def _failed(self, exc: BaseException, doing: str) -> SinkError:
        error = self.sink_error(exc, doing)
        self._stale = self._stale or error.transient
        return error

    @staticmethod
    def _run(cursor: Any, statement: Statement) -> None:
        if statement.params:
            cursor.execute(statement.sql, list(statement.params))
        else:
            cursor.execute(statement.sql)

    def _rollback(self, cursor: Any) -> None:
        with contextlib.suppress(Exception):  # the failed transaction (or session) may be gone
            cursor.execute(program.ROLLBACK)

    def _one_at_a_time(self) -> contextlib.AbstractContextManager[Any]:
        return self._session if self._session is not None else contextlib.nullcontext()

    # -- hooks ------------------------------------------------------------------------------

    @staticmethod
    def described_type(column: Any) -> str | None:
        """A cursor description row's column type as ``Dialect.type_name`` writes it, where
        the driver tells it (None: unknown); the setup widens columns by it."""
        return None

    def driver_errors(self) -> tuple[type[BaseException], ...]:
        raise NotImplementedError

    def sink_error(self, exc: BaseException, doing: str) -> SinkError:
        raise NotImplementedError

    def missing_table(self, exc: BaseException) -> bool:
        raise NotImplementedError

    def reopen(self) -> Any:
        """A new connection after a transient error, or None to keep the one there is."""
        return None

    def _reopened(self, cursor: Any, abandoned: str | None) -> None:
        """Told on a cursor of the new connection, and the session ``reopen`` replaced."""

    def session_id(self) -> str | None:
        """The warehouse session this sink talks on (None: the warehouse has no sessions that
        outlive a killed process, as DuckDB's file lock dies with it)."""
        return None

    def abort_in(self, cursor: Any, session: str) -> list[str]:
        """Abort the transactions open in ``session`` (another of this user's); their ids."""
        return []
