"""Values a warehouse refuses by their size, found before the load, column by column.

Snowflake stores at most 16 MB (16,777,216 bytes) in a VARCHAR or VARIANT declared without a
larger length and 8 MB in a BINARY (https://docs.snowflake.com/en/sql-reference/data-types-text,
.../data-types-semistructured). A bigger value makes the COPY of the batch's file fail with an
error about a file and a line: nothing names the row, and every restart fails the same way.
Checked here on the staged Arrow slices (one ``binary_length`` and ``max`` per text/binary
column: no Python loop over rows), the batch stops instead with the table, the row's key and
the column named, and the fixes; with ``on_error: dead_letter`` the rows are taken out of the
batch and recorded in the dead-letter table (in the batch's transaction) instead. The limits
are the dialect's data (``max_value_bytes``).
"""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, Any

from replicator.errors import SinkError
from replicator.plan.dialects import Dialect
from replicator.plan.model import TablePlan

if TYPE_CHECKING:
    import pyarrow as pa


def check_value_sizes(table: TablePlan, dialect: Dialect,
                      piece: pa.Table) -> tuple[pa.Table, list[tuple[str, str, str]]]:
    """``piece`` without the rows holding a value over the dialect's limit, and per such row
    and column (key as JSON, target column, error) for the dead-letter table. With
    ``on_error: fail`` (the default) the first one raises a SinkError naming it instead."""
    import pyarrow as pa
    import pyarrow.compute as pc

    limits = dialect.max_value_bytes
    if not limits or not piece.num_rows:
        return piece, []
    refused = None
    dead: list[tuple[str, str, str]] = []
    for column in table.staged_columns:
        limit = limits.get(column.target_type.kind)
        if limit is None or column.staging_name not in piece.column_names:
            continue
        values = piece.column(column.staging_name)
        if not (pa.types.is_string(values.type) or pa.types.is_large_string(values.type)
                or pa.types.is_binary(values.type) or pa.types.is_large_binary(values.type)):
            continue  # an all-NULL slice, or a kind staged otherwise
        lengths = pc.binary_length(values)
        over = pc.fill_null(pc.greater(lengths, limit), False)
        if not pc.any(over).as_py():
            continue
        type_name = dialect.type_name(column.target_type)
        rows = pc.indices_nonzero(over).to_pylist()  # only the refused rows, rare
        sizes = pc.take(lengths, rows).to_pylist()
        if table.on_error != "dead_letter":
            raise SinkError(
                f"{table.label}: the value of {column.target_column} in the row with key "
                f"{_key_text(table, piece, rows[0])} is {sizes[0]:,} bytes; {dialect.name} "
                f"{type_name} holds at most {limit:,} bytes",
                hint="leave the column out (columns: "
                f"{{{column.source_column or column.target_column}: {{exclude: true}}}}), cut it "
                "with a mask ({truncate: N}), shorten the value in the source, or set the "
                "table's on_error: dead_letter; until then the pipeline stops at this batch "
                "(nothing of it is applied)",
            )
        for row, size in zip(rows, sizes, strict=True):
            dead.append((_key_json(table, piece, row), column.target_column,
                         f"{size:,} bytes; {dialect.name} {type_name} holds at most "
                         f"{limit:,} bytes"))
        refused = over if refused is None else pc.or_(refused, over)
    if refused is None:
        return piece, []
    return piece.filter(pc.invert(refused)), dead


def _key_values(table: TablePlan, piece: pa.Table, row: int) -> dict[str, Any]:
    return {column.target_column: piece.column(column.staging_name)[row].as_py()
            for column in table.key_columns if column.staging_name in piece.column_names}


def _key_json(table: TablePlan, piece: pa.Table, row: int) -> str:
    return json.dumps(_key_values(table, piece, row), default=str, ensure_ascii=False)


def _key_text(table: TablePlan, piece: pa.Table, row: int) -> str:
    values = _key_values(table, piece, row)
    # Numbers (DECIMAL keys arrive as Decimal) as written; text quoted.
    return ", ".join(f"{name}={value!r}" if isinstance(value, str | bytes) else f"{name}={value}"
                     for name, value in values.items()) or f"(row {row})"
