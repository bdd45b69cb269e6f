"""What a run tells ``replicator status`` while it runs and after it ends: ``run.json``.

Two facts answer "is it running?", both in the checkpoint directory:

- ``run.lock`` is held (flock) by the one live run of the pipeline and names its PID
  (``checkpoint.CheckpointDir.lock``); the OS drops the lock when the process dies, so a
  held lock means a live process, whatever happened to it;
- ``run.json`` (this module) is rewritten by that run every ``HEARTBEAT_S`` seconds and after
  every batch, notice and error: host, PID, phase, last batch, snapshot progress, last error.
  Its age tells a live but stuck process from a working one, and after the run it says how
  the run ended (caught up, stopped, failed with which error).

Until the run lease of a future release exists, this file is the run's only record of its
host; the lock is per machine (a run on another host sharing the checkpoint directory over
NFS is not seen by flock).
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
import socket
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from replicator.engine.state.checkpoint import write_private

RUN_FILE = "run.json"
LOCK_FILE = "run.lock"
JVM_LOG = "spark.log"
HEARTBEAT_S = 5.0
# A heartbeat older than this, while the lock is held, means the run is stuck (the writer
# thread of a healthy run rewrites the file every HEARTBEAT_S, even mid-batch).
STALE_S = 60.0


def lock_holder(checkpoint_dir: str | os.PathLike[str]) -> int | None:
    """The PID of the run holding the pipeline's run lock, or None when no run holds it.

    Probes with a shared non-blocking flock, released at once: a run starting in those few
    microseconds would see the lock taken and say so (it never waits on it).
    """
    path = Path(checkpoint_dir) / LOCK_FILE
    try:
        descriptor = os.open(path, os.O_RDONLY)
    except FileNotFoundError:
        return None
    try:
        try:
            fcntl.flock(descriptor, fcntl.LOCK_SH | fcntl.LOCK_NB)
        except BlockingIOError:
            text = os.pread(descriptor, 64, 0).decode(errors="replace").strip()
            return int(text) if text.isdigit() else -1
        fcntl.flock(descriptor, fcntl.LOCK_UN)
        return None
    finally:
        os.close(descriptor)


def read_run_state(checkpoint_dir: str | os.PathLike[str]) -> dict[str, Any] | None:
    """The last ``run.json`` written, or None (never run, or unreadable: it is rewritten
    atomically, so unreadable means damaged by hand)."""
    try:
        data = json.loads((Path(checkpoint_dir) / RUN_FILE).read_text())
    except (FileNotFoundError, ValueError):
        return None
    return data if isinstance(data, dict) else None


class RunStateWriter:
    """Keeps ``run.json`` of the current run: ``update(...)`` merges fields, a daemon thread
    rewrites it every ``HEARTBEAT_S`` seconds (with a fresh ``updated_at``).

    It writes only while this process holds the run lock (``run.lock`` names our PID): a
    second ``replicator run`` of a running pipeline fails on the lock and must not overwrite
    the first one's record.
    """

    def __init__(self, checkpoint_dir: str | os.PathLike[str], pipeline: str, *,
                 clock: Callable[[], float] = time.time, interval_s: float = HEARTBEAT_S) -> None:
        self.path = Path(checkpoint_dir) / RUN_FILE
        self._lock_path = Path(checkpoint_dir) / LOCK_FILE
        self._clock = clock
        self._interval_s = interval_s
        self._mutex = threading.Lock()
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self.state: dict[str, Any] = {
            "pipeline": pipeline,
            "host": socket.gethostname(),
            "pid": os.getpid(),
            "started_at": clock(),
            "updated_at": clock(),
            "phase": "starting",  # starting|snapshot|streaming|retrying|caught_up|stopped|failed
            "ended_at": None,
            "last_batch": None,
            "last_change_ts_ms": None,
            "snapshot": {},  # source table -> {"rows": copied by this run, "estimate": ~rows}
            "tables": {},  # source table -> {"changes", "rows", "unrouted"} of this run
            "last_error": None,  # {"code", "message", "hint", "transient", "at"}
        }

    def _own_lock(self) -> bool:
        try:
            return self._lock_path.read_text().strip() == str(os.getpid())
        except OSError:
            return False

    def write(self) -> None:
        """Rewrite the file now (atomically), if this process holds the run lock."""
        with self._mutex:
            if not self._own_lock():
                return
            self.state["updated_at"] = self._clock()
            data = (json.dumps(self.state, indent=2, default=str) + "\n").encode()
            scratch = self.path.with_name(f".{self.path.name}.{os.getpid()}")
            with contextlib.suppress(OSError):  # status is a report: never fail a run over it
                write_private(scratch, data)
                os.replace(scratch, self.path)

    def update(self, **fields: Any) -> None:
        with self._mutex:
            self.state.update(fields)
        self.write()

    def batch(self, report: Any, *, estimates: dict[str, int] | None = None) -> None:
        """Fold in one ``engine.apply.metrics.BatchReport`` (``estimates``: approximate rows per
        lower-cased source table, for snapshot progress)."""
        with self._mutex:
            state = self.state
            state["last_batch"] = {
                "kind": report.kind, "batch_id": report.batch_id, "at": report.finished_at,
                "position": (f"{report.end_offset['file']}:{report.end_offset['pos']}"
                             if report.end_offset else None),
                "changes": report.changes, "rows": report.rows,
                "seconds": round(report.seconds, 3),
            }
            if report.kind == "snapshot":
                state["phase"] = "snapshot"
                for table in report.tables:
                    entry = state["snapshot"].setdefault(table.table,
                                                         {"rows": 0, "estimate": None})
                    entry["rows"] += table.changes
                    if estimates and table.table.lower() in estimates:
                        entry["estimate"] = estimates[table.table.lower()]
            elif report.kind == "stream":  # (a re-copy's chunk leaves the phase as it is)
                state["phase"] = "streaming"
                if report.last_ts_ms:
                    state["last_change_ts_ms"] = max(state["last_change_ts_ms"] or 0,
                                                     report.last_ts_ms)
            for table in report.tables:
                entry = state["tables"].setdefault(table.table,
                                                   {"changes": 0, "rows": 0, "unrouted": 0})
                entry["changes"] += table.changes
                entry["rows"] += table.rows
                entry["unrouted"] += table.unrouted
        self.write()

    def error(self, exc: Any, *, transient: bool) -> None:
        """Record an error: a transient one the run retries, or the one that ends it."""
        self.update(
            phase="retrying" if transient else "failed",
            last_error={"code": error_code(exc), "message": getattr(exc, "message", str(exc)),
                        "hint": getattr(exc, "hint", None), "transient": transient,
                        "at": self._clock()},
            **({} if transient else {"ended_at": self._clock()}),
        )

    def __enter__(self) -> RunStateWriter:
        def beat() -> None:
            while not self._stop.wait(self._interval_s):
                self.write()

        self._thread = threading.Thread(target=beat, name="replicator-heartbeat", daemon=True)
        self._thread.start()
        return self

    def __exit__(self, *exc: Any) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=self._interval_s + 1)


def error_code(exc: Any) -> str:
    """A stable name for an error kind: its class name (``BinlogGoneError``, ...)."""
    return type(exc).__name__
