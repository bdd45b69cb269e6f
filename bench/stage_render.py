"""The driver's work per stream batch on the external-stage path, before the warehouse's.

``python bench/stage_render.py [--repeats N]`` (PYTHONPATH: the checkout to measure, so the
same file times an older commit too). For each table mode the external stage renders
(``tests.integration.test_snowflake_external_stage.MODES``, plus plain merge), a 10-row
change batch of each table is landed in a local landing zone, and what
``BatchApplier.warehouse_staging`` does for it is timed: the files' footers
(``engine.job.landing.file_facts``) and the staging statement (``transform.file_staging``:
Snowflake's rendering, ``transform.stage.external_staging``). The median of ``repeats``
batches is printed in microseconds (all of it, and the rendering alone), with the rendered statement's SHA-256 (its text and
parameters): equal hashes across commits mean byte-identical SQL.
"""

from __future__ import annotations

import argparse
import hashlib
import statistics
import sys
import tempfile
import time
from pathlib import Path
from types import SimpleNamespace
from typing import Any

# Run as a script, Python puts bench/ first on the path, where profile.py would shadow the
# standard library's module of that name; the checkout measured is PYTHONPATH's.
sys.path = [p for p in sys.path if Path(p or ".").resolve() != Path(__file__).resolve().parent]


def _measure(repeats: int) -> list[tuple[str, str, float, float, str]]:
    from replicator.engine.job.landing import file_facts
    from replicator.model.changes import BinlogPosition, ChangeEvent
    from replicator.model.pipeline import (
        EngineConfig,
        MySQLSource,
        Pipeline,
        SnowflakeTarget,
        TablePipeline,
        TargetConfig,
    )
    from replicator.plan import build_plan
    from replicator.plan.dialects import pipeline_dialect
    from replicator.transform import file_staging
    from tests.fixtures.landed import land_events
    from tests.integration.test_snowflake_external_stage import CATALOG, ITEMS, MODES, STAGE

    at = BinlogPosition("mysql-bin.000001", 1000)
    empty = {name: None for name, _, _ in ITEMS}
    events = [ChangeEvent("shop.items", "c", at, i, 1_700_000_000_000,
                          after={**empty, "id": i + 1, "name": f"n{i}", "ratio": i / 3})
              for i in range(10)]
    events += [ChangeEvent("shop.people", "c", at, 10 + i, 1_700_000_000_000,
                           after={"id": i + 1, "nick": f"p{i}"}) for i in range(10)]
    out = []
    with tempfile.TemporaryDirectory() as landing:
        for mode, tables in [("merge", None), *MODES.items()]:
            pipeline = Pipeline(
                name="staged", source=MySQLSource(), engine=EngineConfig(landing=landing),
                target=TargetConfig(warehouse=SnowflakeTarget(
                    database="X", schema="RAW", account="bench", stage=STAGE)),
                tables=tables or (TablePipeline(source_database="shop", source_table="items"),
                                  TablePipeline(source_database="shop", source_table="people")))
            plan = build_plan(pipeline, CATALOG)
            dialect = pipeline_dialect(pipeline)
            manifest = land_events(SimpleNamespace(plan=plan, landing=landing), events,
                                   directory=f"{mode.replace(' ', '_')}/b1")
            for table in plan.tables:
                paths = [row["path"] for row in manifest if table.reads(row["table"])]
                batch, render = [], []
                query: Any = None
                for _ in range(repeats):
                    began = time.perf_counter()
                    facts = file_facts(paths, landing)
                    rendering = time.perf_counter()
                    query = file_staging(table, facts.schemas, dialect, snapshot=False)
                    ended = time.perf_counter()
                    batch.append(ended - began)
                    render.append(ended - rendering)
                text = repr((query.sql, query.params)) if query else "None"
                out.append((mode, table.target_table, statistics.median(batch) * 1e6,
                            statistics.median(render) * 1e6,
                            hashlib.sha256(text.encode()).hexdigest()[:12]))
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=500)
    args = parser.parse_args()
    print(f"{'mode':42s} {'table':10s} {'batch us':>9s} {'render us':>9s}  sql sha256")
    for mode, table, batch, render, digest in _measure(args.repeats):
        print(f"{mode:42s} {table:10s} {batch:9.1f} {render:9.1f}  {digest}")


if __name__ == "__main__":
    main()
