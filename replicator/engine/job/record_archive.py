"""Record the driver JVM's class archive at installation (``scripts/bootstrap``), not in a run.

Without an archive, the first ``replicator run`` records one (``engine.class_sharing``): its
JVM writes ~150 MB at exit, which made a newcomer's first quickstart run take 36.7 s (issue
30; measured on 2026-11-28: 18.1 s, against 6.3 s with the archive recorded at installation).
Here a JVM does what a run does with Spark, without a source or a target: a local session
started as a run starts it (``engine.session``), then micro-batches as the stream runs them
(``engine.stream``): a job of Python tasks, one per decode range, each returning manifest rows
to the driver; then it stops, its JVM writes the archive at exit, and the archive is
taken into use at once (mapped and verified, ``class_sharing.take_into_use``), so the first
run maps it like every later one. Classes a run loads beyond these are loaded from the jars
as before.

    python -m replicator.engine.job.record_archive    # idempotent; exit 0 when there is nothing to do

It never fails the installation: without an archive a run records one, as before.
"""

from __future__ import annotations

import os
import re
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from replicator.engine.job import class_sharing, session

BATCHES = 2
JVM_EXIT_TIMEOUT_S = 180.0


def _warmup_task(part: int) -> list[dict[str, Any]]:
    """A decode task's shape: one manifest-like row per landed file."""
    return [{"kind": "rows", "path": f"part-{part}.parquet", "rows": 1}]


def record(workdir: Path) -> Path | None:
    """Start a JVM that records the archive, run the warm-up query, let the JVM exit and take
    its archive into use; the archive, or None when off, in use already, or recorded by
    another process."""
    if not class_sharing.enabled() or "PYSPARK_SUBMIT_ARGS" in os.environ:
        return None  # off, no java, or the user's own launcher options (runs record none)
    if any(o.startswith("-XX:SharedArchiveFile=") for o in class_sharing.java_options(record=False)):
        return None  # in use already: nothing to record
    # A JVM whose output this process routes is the kind that records (``session``).
    session.route_jvm_output(workdir / "jvm.log")
    spark = session.SessionStart("local[*]", bounded=True, sql=False).context()  # as a run
    found = re.search(r"-XX:ArchiveClassesAtExit=(\S+)", os.environ.get("PYSPARK_SUBMIT_ARGS", ""))
    recorded = Path(found.group(1)) if found else None
    try:
        for _ in range(BATCHES):
            spark.parallelize(range(2), 2).map(_warmup_task).collect()
    finally:
        _stop_jvm(spark)
    return None if recorded is None else class_sharing.take_into_use(recorded)


def _stop_jvm(spark: Any) -> None:
    """Stop the session and wait for its JVM to exit: it writes the archive on the way out."""
    from pyspark import SparkContext

    gateway = SparkContext._gateway
    spark.stop()
    process = getattr(gateway, "proc", None)
    if gateway is None or process is None:
        return
    gateway.shutdown()
    if process.stdin is not None:
        process.stdin.close()  # pyspark's gateway server exits when its stdin closes
    process.wait(timeout=JVM_EXIT_TIMEOUT_S)


def main() -> int:
    started = time.perf_counter()
    try:
        with tempfile.TemporaryDirectory(prefix="replicator-archive-") as workdir:
            archive = record(Path(workdir))
    except Exception as exc:  # the installation goes on: the first run records one instead
        print(f"record_archive: not recorded ({type(exc).__name__}: {exc}); the first run "
              "records it", file=sys.stderr)
        return 0
    if archive is None:
        print("record_archive: nothing to record (an archive is in use, another process "
              "records one, REPLICATOR_SPARK_CDS=0 or PYSPARK_SUBMIT_ARGS is set)",
              file=sys.stderr)
    else:
        print(f"record_archive: {archive} ({archive.stat().st_size / 2**20:.0f} MiB) in "
              f"{time.perf_counter() - started:.1f} s", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
