"""`replicator run` refuses a server whose binlog settings would make it replicate wrongly
(a STATEMENT binlog streams no row events at all) before it copies anything, with the fix
that `replicator check` names."""

from __future__ import annotations

from pathlib import Path

import pytest

from replicator.engine.state.checkpoint import CheckpointDir
from replicator.errors import SourceError
from replicator.model.pipeline import DuckDBTarget
from replicator.source.throwaway import ThrowawayMariaDB
from tests.integration.e2e_support import demo_pipeline, run

pytestmark = [pytest.mark.mysql, pytest.mark.spark, pytest.mark.slow]


def test_run_refuses_a_statement_binlog_before_the_snapshot(spark, tmp_path: Path):
    from replicator.demo.workload import create_schema, seed

    with ThrowawayMariaDB(extra_args=["--binlog-format=STATEMENT"]) as server:
        with server.root_connection() as root:
            with root.cursor() as cursor:
                cursor.execute("CREATE DATABASE shop")
            create_schema(root, "shop")
            seed(root, "shop", customers=3, orders=5, awkward=2)
        warehouse = tmp_path / "warehouse.duckdb"
        pipeline = demo_pipeline(server.source(), "shop", tmp_path, DuckDBTarget(str(warehouse)),
                                 name="statement")
        with pytest.raises(SourceError) as refused:
            run(pipeline, spark)
    error = refused.value
    assert "binlog_format = STATEMENT, replicator needs ROW" in error.message, error.message
    assert "SET PERSIST binlog_format = ROW" in (error.hint or ""), error.hint
    # Nothing was started: no start position, no copy.
    assert CheckpointDir(tmp_path / "checkpoint").load_start() is None
    assert not warehouse.exists()
