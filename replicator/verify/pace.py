"""``verify --max-rows-per-second N``: the source's reads paced by the rows they cover.

Every source query verify runs (a range checksum, a fetch of rows, a re-check by key) is
charged, once it returns, with the rows it covered (a checksum query: the rows its buckets
counted; a fetch: the rows fetched). Before the next query, the pacer waits until the rows
charged so far fit the rate: the next query starts no earlier than ``charged / N`` seconds
after the first one. The source thus reads at most N rows per second on average, with
bursts of at most the queries running at once (``walk`` ``parallel``), each of which is
sized to cover at most ``rows_per_query`` rows (N times ``QUERY_SECONDS``), so the load
is spread evenly instead of a long query followed by a long pause.

Target queries are not paced: the bound is for the production MySQL; the warehouse reads
the same ranges, one query per source query.

``decisions`` keeps each wait (rows charged so far, the time, the seconds slept) and
``charges`` each query's rows, so a test asserts the pacing itself, with a clock and a sleep
of its own, not the wall time.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from dataclasses import dataclass

QUERY_SECONDS = 0.25  # a paced query covers about this many seconds of the rate's rows


@dataclass(frozen=True)
class PaceDecision:
    charged: int  # rows charged before this query
    at: float  # seconds since the first query, before waiting
    slept: float  # seconds waited


class Pacer:
    """Spaces the source's queries so their rows stay under ``rows_per_second``."""

    def __init__(self, rows_per_second: float, *, clock: Callable[[], float] = time.monotonic,
                 sleep: Callable[[float], None] = time.sleep) -> None:
        if rows_per_second <= 0:
            raise ValueError("rows_per_second must be positive")
        self.rows_per_second = rows_per_second
        self._clock = clock
        self._sleep = sleep
        self._lock = threading.Lock()
        self._started: float | None = None
        self.charged = 0
        self.decisions: list[PaceDecision] = []
        self.charges: list[int] = []  # the rows of each query, in the order they returned

    @property
    def rows_per_query(self) -> int:
        """The most rows one source query should cover at this rate."""
        return max(1, int(self.rows_per_second * QUERY_SECONDS))

    def wait(self) -> None:
        """Before a source query: wait until the rows charged so far fit the rate. Threads
        wait one after the other (the rate is shared)."""
        with self._lock:
            now = self._clock()
            if self._started is None:
                self._started = now
            at = now - self._started
            slept = max(0.0, self.charged / self.rows_per_second - at)
            if slept > 0:
                self._sleep(slept)
            self.decisions.append(PaceDecision(self.charged, at, slept))

    def charge(self, rows: int) -> None:
        """After a source query: the rows it covered."""
        with self._lock:
            self.charged += max(0, rows)
            self.charges.append(rows)


class Unpaced:
    """No rate: every query runs at once (the default)."""

    rows_per_second = None
    rows_per_query = None

    def wait(self) -> None:
        return None

    def charge(self, rows: int) -> None:
        return None
