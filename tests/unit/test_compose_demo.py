"""The docker compose demo must replicate exactly the tables its MySQL init script seeds
(Docker cannot run here, so this is the check that they stay in step)."""

import re
from pathlib import Path

from replicator.config import load_pipeline
from replicator.plan import build_plan, offline_catalog

ROOT = Path(__file__).resolve().parents[2]


def test_compose_pipeline_matches_the_seeded_schema():
    compose = (ROOT / "docker-compose.yml").read_text()
    assert "./docker/pipeline.yaml:/pipelines/compose_demo.yaml" in compose
    assert '"/pipelines/compose_demo.yaml"' in compose

    init_sql = (ROOT / "docker/mysql/init.sql").read_text()
    seeded = {f"shop.{name}" for name in re.findall(r"CREATE TABLE (\w+)", init_sql)}

    pipeline = load_pipeline(ROOT / "docker/pipeline.yaml")
    assert {table.source_name for table in pipeline.tables} == seeded
    plan = build_plan(pipeline, offline_catalog(pipeline))
    for table in plan.tables:
        seeded_columns = re.search(
            rf"CREATE TABLE {table.source_name.split('.')[1]} \((.*?)\n\);", init_sql, re.S
        ).group(1)
        names = {line.split()[0] for line in seeded_columns.strip().splitlines()
                 if not line.strip().upper().startswith(("PRIMARY", "KEY", "UNIQUE"))}
        assert {c.source_column for c in table.data_columns} == names
