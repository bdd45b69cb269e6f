"""scd2 in SQL: a table's kept changes folded into versions with window functions.

One step of the staging statement (``transform.stage``), which DuckDB and, on the external
stage, Snowflake run; its column names are the statement's internal columns.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from replicator.model import change_batch as cb
from replicator.transform.columns import q

if TYPE_CHECKING:
    from collections.abc import Sequence

    from replicator.plan.model import TablePlan

N = cb.INTERNAL_PREFIX + "n"
GLOBAL = cb.INTERNAL_PREFIX + "global"
KEY_FIRST = cb.INTERNAL_PREFIX + "key_first"
VALID_FROM = cb.INTERNAL_PREFIX + "valid_from"
VALID_TO = cb.INTERNAL_PREFIX + "valid_to"
VERSION_SEQ = cb.INTERNAL_PREFIX + "version_seq"


def version_ctes(table: TablePlan, names: set[str], *, order: Sequence[str], final_op: str,
                 computed_prefix: str) -> list[tuple[str, str]]:
    """scd2: the kept changes -> versions (Spark Declarative Pipelines' AUTO CDC SCD type 2,
    sequenced by binlog position), per key in binlog order: a change whose tracked columns differ from the previous change of its run
    (the changes since the key's last delete) opens a version, others fold into it; a
    version ends at the next change after its last (a delete or the next version); a delete
    as the key's first change ends the target's current version. A tracked column the batch
    does not carry (``names``: the batch's columns; a shard of a routed target without it, a
    column added to the plan since) is NULL in every change, as the staging stages it.

    Reads the staging statement's ``kept`` step: ``order`` its binlog order columns,
    ``final_op`` the op after the filter, ``computed_prefix`` + index its computed values."""
    key = ", ".join(q(k) for k in table.source_key) or "NULL"
    order_by = ", ".join(q(c) for c in order)
    window = f"(PARTITION BY {key} ORDER BY {order_by})"
    # A computed column is tracked by its value, which the judged step computed.
    computed = {column: index for index, column in enumerate(table.computed_columns)}
    tracked = [q(computed_prefix + str(computed[c])) if c in computed
               else q(c.image_key) if c.image_key in names else "NULL"
               for c in table.tracked_columns]
    op, final = q(cb.OP), q(final_op)
    # change_seq(): binlog position as sortable text (cb.CHANGE_SEQ_FORMAT); a snapshot read
    # (r) sorts first. lpad and || rather than printf: one form DuckDB and Snowflake both run
    # (the numbers are never negative nor wider than their padding).
    def padded(name: str, width: int) -> str:
        return f"lpad(CAST({q(name)} AS VARCHAR), {width}, '0')"

    file_width, pos_width, row_width = cb.CHANGE_SEQ_WIDTHS
    seq = (f"({padded(cb.FILE_SEQ, file_width)} || '.' || {padded(cb.POS, pos_width)} || '.' || "
           f"CASE WHEN {op} = 'r' THEN '0' ELSE '1' END || {padded(cb.ROW_INDEX, row_width)})")
    lags = "".join(f", lag({c}) OVER {window} AS {q(N + '_prev_' + str(i))}, "
                   f"lead({c}) OVER {window} AS {q(N + '_next_' + str(i))}"
                   for i, c in enumerate(tracked))
    differs_prev = " OR ".join(f"{c} IS DISTINCT FROM {q(N + '_prev_' + str(i))}"
                               for i, c in enumerate(tracked)) or "FALSE"
    differs_next = " OR ".join(f"{c} IS DISTINCT FROM {q(N + '_next_' + str(i))}"
                               for i, c in enumerate(tracked)) or "FALSE"
    ordered = (f"SELECT *, row_number() OVER {window} AS {q(N)}, "
               f"min({q(GLOBAL)}) OVER (PARTITION BY {key}) AS {q(KEY_FIRST)}, "
               f"lag({final}) OVER {window} AS __prev_op, lead({final}) OVER {window} AS __next_op, "
               f"lead({q(cb.TS_MS)}) OVER {window} AS __next_ts, {seq} AS __seq, "
               f"lead({seq}) OVER {window} AS __next_seq{lags} "
               f"FROM (SELECT *, row_number() OVER (ORDER BY {order_by}) AS {q(GLOBAL)} FROM kept)")
    marked = (f"SELECT *, sum(CASE WHEN {final} <> 'd' AND (__prev_op IS NULL OR __prev_op = 'd' "
              f"OR {differs_prev}) THEN 1 ELSE 0 END) OVER ({window[1:-1]} ROWS UNBOUNDED "
              f"PRECEDING) AS __version FROM ordered")
    grouped = (f"SELECT *, first_value({q(cb.TS_MS)}) OVER (PARTITION BY {key}, __version, "
               f"{final} = 'd' ORDER BY {order_by}) AS {q(VALID_FROM)} FROM marked")
    is_last = f"(__next_op IS NULL OR __next_op = 'd' OR {differs_next})"
    versions = (f"SELECT *, CASE WHEN {final} = 'd' OR __next_op IS NULL THEN NULL "
                f"ELSE __next_ts END AS {q(VALID_TO)}, CASE WHEN __next_op = 'd' AND {final} <> 'd' "
                f"THEN __next_seq ELSE __seq END AS {q(VERSION_SEQ)} FROM grouped "
                f"WHERE ({final} <> 'd' AND {is_last}) OR ({final} = 'd' AND {q(N)} = 1)")
    return [("ordered", ordered), ("marked", marked), ("grouped", grouped), ("versions", versions)]
