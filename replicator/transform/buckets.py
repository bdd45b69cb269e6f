"""Key buckets: which part of a big batch each change belongs to, so that every change of one
key lands in the same part.

An scd2 table's versions of a key depend on all of that key's changes in the batch, so such a
batch cannot be staged in slices of consecutive rows (``engine.apply.applier``). It can be staged
in slices of *keys*: ``key_bucket_ids`` numbers each row by a hash of its key (DuckDB's
``hash``, the engine that runs the transforms), the same key always to the same bucket.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

from replicator.plan.identifiers import quote_identifier

if TYPE_CHECKING:
    import pyarrow as pa


def key_bucket_ids(batch: pa.Table, key: Sequence[str], buckets: int) -> pa.Array:
    """The bucket (0 .. ``buckets`` - 1) of each row of ``batch``, by its ``key`` columns."""
    import duckdb

    columns = ", ".join(quote_identifier(name) for name in key)
    connection = duckdb.connect(":memory:")
    try:
        connection.register("batch", batch.select(list(key)))
        # A projection over one registered table keeps the rows' order.
        return connection.sql(
            f"SELECT CAST(hash({columns}) % CAST(? AS UBIGINT) AS INTEGER) FROM batch",
            params=[buckets]).to_arrow_table().column(0).combine_chunks()
    finally:
        connection.close()
