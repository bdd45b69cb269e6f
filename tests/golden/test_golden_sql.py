"""Every example pipeline's SQL, in both dialects, equals its reviewed golden file."""

from __future__ import annotations

from pathlib import Path

import pytest

from replicator.config import load_pipeline
from replicator.plan import DIALECTS, build_plan, offline_catalog, render_sql
from replicator.source.snapshot import chunk_select_preview
from replicator.transform import snapshot_staging

ROOT = Path(__file__).resolve().parents[2]
GOLDEN = Path(__file__).resolve().parent
PIPELINES = sorted((ROOT / "pipelines").glob("*.yaml"))


def rendered(pipeline_file: Path) -> dict[Path, str]:
    """golden path -> SQL for every table of a pipeline in every dialect (offline plan)."""
    pipeline = load_pipeline(pipeline_file)
    catalog = offline_catalog(pipeline)
    plan = build_plan(pipeline, catalog)
    return {
        # A routed table (`sources:`) is named by its target: its source is a pattern.
        GOLDEN / pipeline_file.stem / dialect.name
        / f"{table.target_table if table.routed else table.label}.sql": render_sql(
            table, dialect, snapshot_staging(table, catalog, dialect),
            chunk_select_preview(plan.tables, table, catalog),
        )
        for dialect in DIALECTS.values()
        for table in plan.tables
    }


def test_there_are_example_pipelines():
    assert PIPELINES, "pipelines/*.yaml is empty"


@pytest.mark.parametrize("pipeline_file", PIPELINES, ids=lambda p: p.stem)
def test_sql_matches_golden(pipeline_file, update_golden):
    expected = rendered(pipeline_file)
    if update_golden:
        for path, sql in expected.items():
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(sql, encoding="utf-8")
    for path, sql in expected.items():
        assert path.exists(), f"{path} missing: run pytest --update-golden"
        assert path.read_text(encoding="utf-8") == sql, (
            f"{path.relative_to(ROOT)} differs from the plan: review the change, then "
            "pytest --update-golden"
        )
    stale = set((GOLDEN / pipeline_file.stem).rglob("*.sql")) - set(expected)
    if update_golden:
        for path in stale:
            path.unlink()
    else:
        assert not stale, f"golden files no longer produced: {sorted(map(str, stale))}"


def test_no_golden_directory_without_a_pipeline():
    stems = {p.stem for p in PIPELINES}
    orphans = [d.name for d in GOLDEN.iterdir() if d.is_dir() and d.name not in stems
               and not d.name.startswith("__")]
    assert not orphans, f"golden files of removed pipelines: {orphans}"
