"""The interpreter Spark starts its local Python processes with: pyspark imported as installed.

Spark starts the executors' Python worker daemon (and, while the stream was a Structured
Streaming query, five more Python processes per run: the data source lookup, its creation,
its read planner, the streaming source runner). It puts ``$SPARK_HOME/python/lib/pyspark.zip`` and py4j's zip
first on each one's ``PYTHONPATH``. Python cannot cache the bytecode of modules imported from a
zip, so every one of those processes compiles pyspark's sources again: measured (py-spy, this
project's 2-core machine) 0.6-0.8 s of CPU per process, six of them before a run's first batch
then,
on the run's critical path. Measured end to end on a one-change run at load 7 (A/B/B/A, four
rounds each): 32.5 s mean wall without this, 21.4 s with it.

With a local master those processes run this interpreter, which has pyspark installed: the
zips are that same package's own copies (``pyspark/python/lib`` inside it). So
``PYSPARK_PYTHON`` and ``PYSPARK_DRIVER_PYTHON`` (the lookup's) become a small shell script that drops exactly those two zips from
``PYTHONPATH`` and execs this interpreter, which then imports pyspark from site-packages with
its cached bytecode. Nothing changes when the user set either variable, when ``SPARK_HOME``
names another Spark (its zip may be another version), on a cluster master (its workers run the
cluster's Python), or when no cache directory is writable.

Their worker daemon is ``engine.job.python_daemon`` (``worker_conf``): it imports the decode
stack once, before it forks the workers, instead of each worker importing it again.
"""

from __future__ import annotations

import hashlib
import importlib.util
import os
import shlex
import sys
import uuid
from collections.abc import Mapping
from pathlib import Path

_SCRIPT = """#!/bin/sh
# Written by replicator (engine/job/python_workers.py): Spark's Python workers import the
# installed pyspark (byte-compiled) instead of its zipped copy (compiled at every start).
lib={lib}
real={real}
kept=
IFS=:
for entry in $PYTHONPATH; do
  case "$entry" in "$lib"/*|"$real"/*) ;; *) kept="${{kept:+$kept:}}$entry" ;; esac
done
unset IFS
PYTHONPATH=$kept
export PYTHONPATH
exec {python} "$@"
"""


def worker_python(master: str, environ: Mapping[str, str] | None = None) -> str | None:
    """The ``PYSPARK_PYTHON`` for a run on ``master``: the script above (written once into the
    user's cache), or None to leave Spark's default alone (see the module docstring)."""
    env = os.environ if environ is None else environ
    if (not master.startswith("local") or os.name != "posix" or "PYSPARK_PYTHON" in env
            or "PYSPARK_DRIVER_PYTHON" in env):
        return None
    lib = _zipped_pyspark(env)
    if lib is None:
        return None
    script = _SCRIPT.format(lib=shlex.quote(str(lib)), real=shlex.quote(str(lib.resolve())),
                            python=shlex.quote(sys.executable))
    digest = hashlib.sha256(script.encode()).hexdigest()[:16]
    cache = Path(env.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "replicator"
    path = cache / f"python-{digest}"
    if path.is_file() and os.access(path, os.X_OK):
        return str(path)
    try:
        cache.mkdir(parents=True, exist_ok=True, mode=0o700)
        # Written under a unique name and renamed: a concurrent run never execs half a script.
        partial = cache / f"{path.name}.{uuid.uuid4().hex[:12]}.tmp"
        partial.write_text(script)
        partial.chmod(0o755)
        partial.replace(path)
    except OSError:
        return None  # no writable cache: the workers compile pyspark, as Spark does by default
    return str(path)


# Spark's setting naming the module its executors run as the Python worker daemon.
DAEMON_MODULE_KEY = "spark.python.daemon.module"


def worker_conf(master: str) -> dict[str, str]:
    """Spark settings for the Python workers of a run on ``master``: a local run's daemon
    pre-imports the decode stack (``engine.job.python_daemon``); a cluster's executors keep
    Spark's daemon (their Python and its threads at fork were never measured here)."""
    if not master.startswith("local"):
        return {}
    return {DAEMON_MODULE_KEY: "replicator.engine.job.python_daemon"}


def _zipped_pyspark(env: Mapping[str, str]) -> Path | None:
    """The ``python/lib`` folder of the installed pyspark when it is the Spark that runs (the
    one whose zips Spark puts on the workers' path), else None."""
    spec = importlib.util.find_spec("pyspark")
    if spec is None or spec.origin is None:
        return None
    package = Path(spec.origin).parent
    lib = package / "python" / "lib"
    if not (lib / "pyspark.zip").is_file():
        return None
    home = env.get("SPARK_HOME")
    if home and Path(home).resolve() != package.resolve():
        return None
    return lib
