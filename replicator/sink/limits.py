"""Values a warehouse refuses by their size, found before the load, column by column.

Snowflake stores at most 16 MB (16,777,216 bytes) in a VARCHAR or VARIANT declared without a
larger length and 8 MB in a BINARY (https://docs.snowflake.com/en/sql-reference/data-types-text,
.../data-types-semistructured). A bigger value makes the COPY of the batch's file fail with an
error about a file and a line: nothing names the row, and every restart fails the same way.
Checked here on the staged Arrow slices (one ``binary_length`` and ``max`` per text/binary
column: no Python loop over rows), the batch stops instead with the table, the row's key and
the column named, and the fixes. The limits are the dialect's data (``max_value_bytes``).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from replicator.errors import SinkError
from replicator.plan.dialects import Dialect
from replicator.plan.model import TablePlan

if TYPE_CHECKING:
    import pyarrow as pa


def check_value_sizes(table: TablePlan, dialect: Dialect, piece: pa.Table) -> None:
    """Raise a SinkError naming the first value of ``piece`` over the dialect's limit."""
    import pyarrow as pa
    import pyarrow.compute as pc

    limits = dialect.max_value_bytes
    if not limits or not piece.num_rows:
        return
    for column in table.staged_columns:
        limit = limits.get(column.target_type.kind)
        if limit is None or column.staging_name not in piece.column_names:
            continue
        values = piece.column(column.staging_name)
        if not (pa.types.is_string(values.type) or pa.types.is_large_string(values.type)
                or pa.types.is_binary(values.type) or pa.types.is_large_binary(values.type)):
            continue  # an all-NULL slice, or a kind staged otherwise
        lengths = pc.binary_length(values)
        longest = pc.max(lengths).as_py()
        if longest is None or longest <= limit:
            continue
        row = pc.index(pc.greater(lengths, limit), True).as_py()
        raise SinkError(
            f"{table.label}: the value of {column.target_column} in the row with key "
            f"{_key(table, piece, row)} is {longest:,} bytes; {dialect.name} "
            f"{dialect.type_name(column.target_type)} holds at most {limit:,} bytes",
            hint=f"leave the column out (columns: {{{column.source_column or column.target_column}: "
            "{exclude: true}}), cut it with a mask ({truncate: N}), or shorten the value in "
            "the source; until then the pipeline stops at this batch (nothing of it is applied)",
        )


def _key(table: TablePlan, piece: pa.Table, row: int) -> str:
    values: dict[str, Any] = {}
    for column in table.key_columns:
        if column.staging_name in piece.column_names:
            values[column.target_column] = piece.column(column.staging_name)[row].as_py()
    # Numbers (DECIMAL keys arrive as Decimal) as written; text quoted.
    return ", ".join(f"{name}={value!r}" if isinstance(value, str | bytes) else f"{name}={value}"
                     for name, value in values.items()) or f"(row {row})"
