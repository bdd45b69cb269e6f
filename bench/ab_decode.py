"""A/B of the decoder alone: two checkouts' ``read_change_batches`` over one binlog range.

    git worktree add /tmp/base HEAD~1
    python -m bench.ab_decode --a /tmp/base --rounds 3 --changes 300000

One throwaway MariaDB and one workload; each run is a fresh process with ``PYTHONPATH`` set
to the A checkout or this one (B), decoding the whole range into Arrow change batches
(``bench.decode.decode_columnar``, the executors' decode), alternating ABBA... Prints each
run's CPU and wall seconds and the medians in microseconds of CPU per change.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

from bench import workload
from bench.context import REPO_ROOT
from bench.run import SERVER_ARGS
from bench.tables import TABLES

_CHILD = """
import json, sys
from bench.decode import decode_columnar
from replicator.model.changes import BinlogPosition
from replicator.model.pipeline import MySQLSource
import pyarrow, replicator.source.fast.columnar  # imported before the clocks start
# pa.array imports pandas on its first call (0.37 s of CPU here): once per process, the same
# for both sides, and ~1.2 us per change of a 300k range that is not the decoder's.
import pandas
spec = json.loads(sys.argv[1])
result = decode_columnar(MySQLSource(**spec["source"]), BinlogPosition(**spec["start"]),
                         BinlogPosition(**spec["end"]), tables=spec["tables"],
                         server_id=spec["server_id"])
print(json.dumps(result.to_json()))
"""


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.ab_decode", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--a", type=Path, required=True, help="the A checkout (its replicator/)")
    parser.add_argument("--changes", type=int, default=300_000)
    parser.add_argument("--rounds", type=int, default=3, help="runs of each side")
    args = parser.parse_args(argv)
    from replicator.source.throwaway import ThrowawayMariaDB

    runs: list[dict[str, object]] = []
    workdir = Path(tempfile.mkdtemp(prefix="replicator-ab-decode-"))
    try:
        with ThrowawayMariaDB(extra_args=SERVER_ARGS) as server:
            generated = workload.generate(server.socket, "bench", args.changes)
            source = server.source()
            for number in range(2 * args.rounds):
                side = "ABBA"[number % 4]
                tree = args.a.resolve() if side == "A" else REPO_ROOT
                spec = {
                    "source": {"host": source.host, "port": source.port, "user": source.user,
                               "password": source.password},
                    "start": {"file": generated.start.file, "pos": generated.start.pos},
                    "end": {"file": generated.end.file, "pos": generated.end.pos},
                    "tables": [f"{generated.database}.{t.name}" for t in TABLES],
                    "server_id": 9_000 + number,
                }
                env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(tree), str(REPO_ROOT)])}
                done = subprocess.run([sys.executable, "-c", _CHILD, json.dumps(spec)], env=env,
                                      cwd=workdir, capture_output=True, text=True, check=True)
                result = json.loads(done.stdout.strip().splitlines()[-1])
                entry = {"side": side, "rows": result["rows"], "seconds": result["seconds"],
                         "cpu_seconds": result["cpu_seconds"],
                         "us_per_change": round(1e6 * result["cpu_seconds"] / result["rows"], 2)}
                runs.append(entry)
                print(json.dumps(entry), file=sys.stderr, flush=True)
    finally:
        shutil.rmtree(workdir, ignore_errors=True)
    summary = {side: round(statistics.median(r["us_per_change"] for r in runs  # type: ignore[misc]
                                             if r["side"] == side), 2) for side in ("A", "B")}
    print(json.dumps({"us_per_change_median": summary, "runs": runs}, indent=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
