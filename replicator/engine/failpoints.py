"""Failpoints: named places where a test can make a real run stop and wait.

A crash test has to kill the process *inside* a window (a sink transaction half staged, a
checkpoint half written). Timing the kill from outside only works while the window is longer
than the test's reaction time; as the code gets faster the window shrinks and the test starts
killing after the commit (CI did: a 200k-row batch staged in under 1.5 s). A failpoint makes
the window as long as the test needs, in the real process, with no mock.

``REPLICATOR_FAILPOINTS="name=sleep(30);other=sleep(5)"`` (the convention of etcd's gofail
and TiDB's failpoint, reduced to the one action our tests need). A failpoint that fires says
so on stderr, ``failpoint <name>: sleeping <n> s``, so the test knows the run is inside the
window, then sleeps; each fires once per process. Unset (every user's run), ``reached`` is one
dictionary lookup.
"""

from __future__ import annotations

import os
import re
import sys
import time

ENVIRONMENT = "REPLICATOR_FAILPOINTS"
_SLEEP = re.compile(r"^\s*([\w.]+)\s*=\s*sleep\(\s*(\d+(?:\.\d+)?)\s*\)\s*$")


def _parse(text: str) -> dict[str, float]:
    points: dict[str, float] = {}
    for part in filter(None, (item.strip() for item in text.split(";"))):
        match = _SLEEP.match(part)
        if match is None:
            raise ValueError(f"{ENVIRONMENT}: {part!r} is not name=sleep(<seconds>)")
        points[match.group(1)] = float(match.group(2))
    return points


_ARMED = _parse(os.environ.get(ENVIRONMENT, ""))


def reached(name: str) -> None:
    """Fire the failpoint ``name`` if the environment armed it (once per process)."""
    seconds = _ARMED.pop(name, None)
    if seconds is None:
        return
    print(f"failpoint {name}: sleeping {seconds:g} s", file=sys.stderr, flush=True)
    time.sleep(seconds)
