"""What one batch runs between loading staging and recording its state row, per table mode
(merge, changelog, scd2): the one place that picks a mode's statements.
"""

from __future__ import annotations

from replicator.plan.dialects import Dialect
from replicator.plan.model import TablePlan
from replicator.plan.statements.history import (
    append_changes,
    scd2_drop_replayed,
    scd2_insert_versions,
    scd2_update_current,
)
from replicator.plan.statements.merging import insert_copied, merge


def batch_statements(table: TablePlan, dialect: Dialect, *, fresh: bool = False
                     ) -> list[tuple[str, str]]:
    """(purpose, SQL) of what one batch runs between loading staging and the state row, in
    order, all in the batch's transaction. The first statement of a merged table is its
    MERGE (fakesnow needs the MERGE to open the transaction, see sink/snowflake.py), but for
    a followed TRUNCATE's DELETE before it (``program.truncate_records``; fakesnow runs a
    MERGE in the transaction a DELETE opened, ``tests/integration/test_sink_program.py``).
    ``fresh``: a snapshot batch of a copy that began with the target empty inserts."""
    if table.mode == "changelog":
        return [("append every change", append_changes(table, dialect))]
    if table.mode == "scd2":
        return [
            ("drop versions already applied", scd2_drop_replayed(table, dialect)),
            ("insert new versions", scd2_insert_versions(table, dialect)),
            ("end or update current versions", scd2_update_current(table, dialect)),
        ]
    out = [("insert the copied rows (the target was empty when the copy began)",
            insert_copied(table, dialect)) if fresh else
           ("merge staged changes", merge(table, dialect))]
    if table.log_table:
        out.append(("append every change to the log table", append_changes(table, dialect, log=True)))
    return out
