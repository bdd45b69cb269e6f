"""A/B of one setting on the e2e DuckDB run: the same binlog range, runs alternating A, B, B, A ...

    python -m bench.ab --changes 300000 --rounds 2 \
        --b-env JDK_JAVA_OPTIONS="-XX:TieredStopAtLevel=1 -XX:+UseSerialGC"

A is the run as it is; B the same run with environment variables set for the replicator
process (so for the JVM and Python workers it starts) and/or Spark settings (``--b-conf``),
and/or another checkout's replicator (``--b-checkout DIR``, e.g. a ``git archive`` of the
commit before a change: an A/B of two commits). One throwaway MariaDB, one workload;
each run a pipeline of its own from the workload's first position. Per run: wall and
streaming seconds, the CPU per change of the tree and of each role (bench/cpu_budget.py's
parts that a run measures itself). Alternating in pairs (ABBA) keeps a drift of the shared
machine's load from reading as an effect. Prints one line per run and the medians; ``--out``
writes the JSON.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import sys
import tempfile
from pathlib import Path
from typing import Any

from bench import workload
from bench.context import BenchContext, Sizes
from bench.cpu_budget import budget_of
from bench.e2e import run_e2e
from bench.environment import describe
from bench.run import SERVER_ARGS


def _figures(entry: dict[str, Any]) -> dict[str, Any]:
    if "error" in entry:
        return {"error": entry["error"][-600:]}
    budget = budget_of(entry, {})
    return {
        "wall_seconds": entry["wall_seconds"],
        "streaming_seconds": entry["streaming_seconds"],
        "startup_seconds": entry["phases_seconds"].get("startup"),
        "phases_seconds": entry["phases_seconds"],
        "us_per_change": {k: v for k, v in budget["us_per_change"].items()
                          if k in ("mariadb", "jvm", "spark_python", "apply", "driver_rest", "tree")},
        "streaming_us_per_change_by_role": budget["streaming_us_per_change_by_role"],
        "target_matches_source": entry.get("target_matches_source"),
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.ab", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--changes", type=int, default=300_000)
    parser.add_argument("--rounds", type=int, default=2, help="ABBA pairs: runs of each side")
    parser.add_argument("--b-env", action="append", default=[], metavar="KEY=VALUE",
                        help="an environment variable of the B runs; repeatable")
    parser.add_argument("--b-conf", action="append", default=[], metavar="KEY=VALUE",
                        help="a Spark setting of the B runs (replicator run --conf); repeatable")
    parser.add_argument("--b-duckdb", action="append", default=[], metavar="KEY=VALUE",
                        help="a DuckDB setting of the B runs (target.duckdb.settings); repeatable")
    parser.add_argument("--b-checkout", type=Path, metavar="DIR",
                        help="the B runs run this checkout's replicator (first on PYTHONPATH)")
    parser.add_argument("--out", type=Path)
    args = parser.parse_args(argv)
    b_env = dict(item.split("=", 1) for item in args.b_env)
    b_duckdb = dict(item.split("=", 1) for item in args.b_duckdb)
    from replicator.source.throwaway import ThrowawayMariaDB

    workdir = Path(tempfile.mkdtemp(prefix="replicator-ab-"))
    runs: list[dict[str, Any]] = []
    try:
        with ThrowawayMariaDB(extra_args=SERVER_ARGS) as server:
            ctx = BenchContext(server, workdir, Sizes(changes=args.changes))
            generated = workload.generate(server.socket, "bench", args.changes)
            order = ["ABBA"[i % 4] for i in range(2 * args.rounds)]  # A B B A A B ...
            for number, side in enumerate(order):
                saved = {k: os.environ.get(k) for k in b_env}
                if side == "B":
                    os.environ.update(b_env)
                ctx.checkout = args.b_checkout.resolve() if side == "B" and args.b_checkout else None
                try:
                    entry = run_e2e(ctx, generated, "duckdb", None, suffix=f"-{side.lower()}{number}",
                                    conf=tuple(args.b_conf) if side == "B" else (),
                                    duckdb_settings=b_duckdb if side == "B" else None)
                finally:
                    for key, value in saved.items():
                        if value is None:
                            os.environ.pop(key, None)
                        else:
                            os.environ[key] = value
                figures = {"side": side, **_figures(entry)}
                runs.append(figures)
                print(json.dumps(figures), file=sys.stderr, flush=True)
            environment = describe("")
    finally:
        shutil.rmtree(workdir, ignore_errors=True)
    summary: dict[str, Any] = {}
    for side in ("A", "B"):
        mine = [r for r in runs if r["side"] == side and "error" not in r]
        if not mine:
            continue
        summary[side] = {
            "runs": len(mine),
            "wall_seconds_median": round(statistics.median(r["wall_seconds"] for r in mine), 2),
            "streaming_seconds_median": round(
                statistics.median(r["streaming_seconds"] for r in mine), 2),
            "us_per_change_median": {
                part: round(statistics.median(r["us_per_change"][part] for r in mine), 1)
                for part in mine[0]["us_per_change"]},
        }
    result = {"changes": args.changes, "b_env": b_env, "b_conf": args.b_conf,
              "b_checkout": str(args.b_checkout) if args.b_checkout else None,
              "b_duckdb": b_duckdb, "runs": runs, "summary": summary,
              "environment": environment}
    print(json.dumps(summary, indent=1))
    if args.out:
        args.out.write_text(json.dumps(result, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
