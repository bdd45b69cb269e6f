"""What every benchmark section shares: the server, a work directory, how to run replicator."""

from __future__ import annotations

import itertools
import os
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from replicator.source.throwaway import ThrowawayMariaDB

REPO_ROOT = Path(__file__).resolve().parent.parent


def replicator_command() -> list[str]:
    """How a user runs replicator from this environment: the console script, else -m."""
    script = Path(sys.executable).with_name("replicator")
    if script.exists():
        return [str(script)]
    return [sys.executable, "-m", "replicator"]


@dataclass(frozen=True)
class Sizes:
    """How big each section runs (``--quick`` shrinks them all)."""

    changes: int = 300_000
    latency_rate: float = 1000.0  # changes/s
    latency_seconds: float = 60.0
    latency_max_delay: str = "1s"
    snapshot_rows: int = 1_000_000
    startup_repeats: int = 7
    verify_changes: int = 50_000  # fast decoder vs read_changes, compared untimed

    @classmethod
    def quick(cls) -> Sizes:
        return cls(changes=3_000, latency_rate=200.0, latency_seconds=8.0, snapshot_rows=20_000,
                   startup_repeats=3)


@dataclass
class BenchContext:
    server: ThrowawayMariaDB
    workdir: Path
    sizes: Sizes
    results: dict[str, Any] = field(default_factory=dict)  # section name -> its JSON
    _server_ids: itertools.count = field(default_factory=lambda: itertools.count(7_001))
    # Another checkout whose replicator the subprocesses run (``bench.ab --b-checkout``).
    checkout: Path | None = None

    def next_server_id(self) -> int:
        """A distinct replica server_id per reader (a duplicate kicks the other reader off)."""
        return next(self._server_ids) * 10  # leaves room for per-partition offsets

    def source(self) -> Any:
        return self.server.source()

    def environment(self) -> dict[str, str]:
        """The environment replicator subprocesses run in: connection settings as variables."""
        env = dict(os.environ)
        env.update(self.server.environment())
        paths = [str(self.checkout or REPO_ROOT),
                 *filter(None, env.get("PYTHONPATH", "").split(os.pathsep))]
        env["PYTHONPATH"] = os.pathsep.join(dict.fromkeys(paths))
        # PYSPARK_PYTHON is left to replicator: its default (engine/job/python_workers) is measured.
        return env
