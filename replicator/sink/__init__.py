"""Sinks: load a staged batch, MERGE it, record it, in one transaction (exactly once).

``open_sink(pipeline, plan)`` picks the sink for the pipeline's target. Only
``sink/duckdb.py`` imports duckdb and only ``sink/snowflake.py`` imports snowflake.connector;
both run the statements ``plan.render`` produces, nothing else. The ``Sink`` protocol and
what passes through it (``TableBatch``, ``ApplyResult``) are in ``sink/protocol.py``.

Exactly once: ``apply`` first looks the (pipeline, table, batch_id) up in the state table and
skips a batch already there; otherwise it stages, MERGEs and inserts the state row in one
transaction, so a batch Spark replays after a crash is a no-op. Snapshot chunks use negative
batch ids (-1 - chunk_index).

``sink.sql.SQLSink`` is the one algorithm both run: the programs of ``plan.program``, which
``replicator plan`` prints. A batch's rows reach staging as Parquet files: the caller's (the
landing zone's, already in the staging layout) or the staged Arrow rows written to a scratch
directory; DuckDB reads them in place, Snowflake PUTs them to the staging table's stage and
COPYs them.

A batch is staged as one Arrow table, as a list of Parquet file paths, or as an iterable of slices (a big transaction streamed
in bounded pieces, ``engine.apply.applier``): the sink checks the state table BEFORE it pulls the
first slice (a replayed batch costs no decoding), appends every slice to the staging table,
then runs ONE MERGE over all of them and the state row. The slices' ``STAGE_SEQ`` values are
global across the batch, so the MERGE's "last change per key" spans slices.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from replicator.errors import SinkError

if TYPE_CHECKING:
    from replicator.model.pipeline import Pipeline
    from replicator.plan.model import Plan
    from replicator.sink.protocol import Sink


def open_sink(pipeline: Pipeline, plan: Plan) -> Sink:
    kind = pipeline.target.kind
    # Imported here, not at the top: each concrete sink brings its driver (duckdb,
    # snowflake.connector), which only the sink the pipeline targets needs.
    if kind == "duckdb":
        from replicator.sink.duckdb import DuckDBSink

        return DuckDBSink(pipeline, plan)
    if kind == "snowflake":
        from replicator.sink.snowflake import SnowflakeSink

        return SnowflakeSink(pipeline, plan)
    raise SinkError(f"unknown target kind {kind!r}", hint="target: snowflake or duckdb")


__all__ = ["open_sink"]
