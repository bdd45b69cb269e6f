"""The staging table's Arrow schema: the exact Arrow type of each staging column.

``transform.stage_batch`` produces the staging rows (one DuckDB statement over a change batch:
the only path); this module says what their columns and types are, exactly the staging
table's (``plan.statements.tables.staging_columns``), so both sinks load them unchanged.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from replicator.plan.model import TablePlan
from replicator.plan.statements.tables import staging_columns
from replicator.plan.types import TargetType

if TYPE_CHECKING:
    import pyarrow as pa

def arrow_type(target_type: TargetType, *, staging: bool = True) -> pa.DataType:
    """The exact Arrow type of a staging column of this target type."""
    import pyarrow as pa

    kind = target_type.kind
    if kind == "integer":
        return {8: pa.int8(), 16: pa.int16(), 32: pa.int32(), 64: pa.int64()}[
            target_type.bits or 64
        ]
    if kind == "decimal":
        return pa.decimal128(target_type.precision or 38, target_type.scale or 0)
    if kind == "float":
        return pa.float64()
    if kind == "boolean":
        return pa.bool_()
    if kind == "date":
        return pa.date32()
    if kind == "timestamp":
        return pa.timestamp("us")
    if kind == "timestamp_tz":
        return pa.timestamp("us", tz="UTC")
    if kind == "binary":
        return pa.binary()
    return pa.string()  # string, time_text, json (JSON text; parsed by the MERGE)


def staging_schema(table: TablePlan) -> pa.Schema:
    import pyarrow as pa

    return pa.schema(
        [pa.field(name, arrow_type(type_)) for name, type_ in staging_columns(table)]
    )
