"""Column renames and drops a run followed, applied to the pipeline as the YAML declares it.

A pipeline names source columns in three places: `columns:` entries, `key:` and
`track_history:`. When MySQL renames or drops such a column and the run follows it (by the
table's `schema_changes:` policy), the YAML still says the old name. Two kinds of entry:

- a **pin**: an entry whose only setting is `source_type` (what `replicator init` writes for
  every column, so that `plan --offline` works). It records a type for offline planning; it
  states no intent. A pin never stops a run: a pinned column renamed or dropped is followed
  exactly as an unlisted one (``ColumnMapping.binding`` is False).
- a **binding** entry (`name`, `type`, `mask`, `exclude`, an `expression`) and the names in
  `key:` / `track_history:`: settings that must keep applying to *their column* under its new
  name. A mask that stopped masking after a rename would fail open.

So the run remembers, per source table, each declared name's current source column
(``FollowedColumns``: declared name, lower case -> the current name, or None once dropped; kept
by ``Context`` in the checkpoint's ``followed_columns.json``), and every plan is built from
``with_followed``'s pipeline: the YAML with those names replaced (dropped entries removed).
``replicator check`` / ``status`` report the entries this leaves stale, and
``replicator init --refresh`` writes the new names into the file.

A rename onto the declared name of *another* binding entry is ambiguous (whose settings does
the column take now?): ``rename_conflict`` names it, and the run stops with the exact edit.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping

from replicator.model.pipeline import ColumnMapping, Pipeline, TablePipeline

# db.table (lower case) -> declared name (lower case) -> current source column (None: dropped)
FollowedColumns = Mapping[str, Mapping[str, str | None]]


def declared_names(table: TablePipeline) -> set[str]:
    """Lower-case source column names the table's YAML names: entries, key, track_history."""
    names = {m.source_column.lower() for m in table.columns if not m.computed}
    names |= {k.lower() for k in table.key or ()}
    names |= {c.lower() for c in table.track_history or ()}
    return names


def followed_rename(followed: Mapping[str, str | None], table: TablePipeline, old: str,
                    new: str) -> dict[str, str | None]:
    """``followed`` (one table's) after MySQL renamed ``old`` to ``new``: every declared name
    now at ``old`` moves to ``new``; a declared name ``old`` not followed yet starts at
    ``new``. Idempotent: a batch applied again records nothing new."""
    out = dict(followed)
    for declared, current in followed.items():
        if current is not None and current.lower() == old.lower():
            out[declared] = new
    if old.lower() in declared_names(table) and old.lower() not in followed:
        out[old.lower()] = new
    return out


def followed_drop(followed: Mapping[str, str | None], table: TablePipeline,
                  column: str) -> dict[str, str | None]:
    """``followed`` (one table's) after MySQL dropped ``column``."""
    out = dict(followed)
    for declared, current in followed.items():
        if current is not None and current.lower() == column.lower():
            out[declared] = None
    if column.lower() in declared_names(table) and column.lower() not in followed:
        out[column.lower()] = None
    return out


def current_name(followed: Mapping[str, str | None], declared: str) -> str | None:
    """Where the column the YAML calls ``declared`` is now (None: dropped)."""
    return followed.get(declared.lower(), declared)


def rename_conflict(followed: Mapping[str, str | None], table: TablePipeline,
                    new: str) -> ColumnMapping | None:
    """The binding entry whose declared name ``new`` a column renamed to ``new`` takes, while that
    entry no longer means the column now called ``new`` (it was dropped, or renamed away):
    the YAML would read as if its settings applied to the renamed column."""
    for mapping in table.columns:
        if mapping.computed or not mapping.binding or mapping.source_column.lower() != new.lower():
            continue
        now = current_name(followed, mapping.source_column)
        if now is None or now.lower() != new.lower():
            return mapping
        # The entry still means a live column called `new`: MySQL refuses the rename anyway.
    return None


def with_followed(pipeline: Pipeline, followed: FollowedColumns) -> Pipeline:
    """The pipeline as the run applies it: each table's declared names replaced by their
    current columns (entries of dropped columns removed). Always computed from the YAML's
    pipeline (``declared``), so applying it twice, or to a pipeline that had it, is the same."""
    declared = pipeline.declared or pipeline
    if not any(followed.values()):
        return declared
    tables = tuple(_table_with(table, followed.get(table.source_name.lower(), {}))
                   for table in declared.tables)
    return dataclasses.replace(declared, tables=tables, declared=declared,
                               followed={k: dict(v) for k, v in followed.items()})


def _table_with(table: TablePipeline, followed: Mapping[str, str | None]) -> TablePipeline:
    if table.routed or not followed:
        return table
    columns = []
    for mapping in table.columns:
        if mapping.computed:
            columns.append(mapping)
            continue
        now = current_name(followed, mapping.source_column)
        if now is None:
            continue  # dropped in MySQL: nothing left to apply it to
        columns.append(dataclasses.replace(mapping, source_column=now))

    def names(declared: tuple[str, ...] | None, keep_dropped: bool) -> tuple[str, ...] | None:
        if declared is None:
            return None
        now = [(d, current_name(followed, d)) for d in declared]
        return tuple(n if n is not None else d for d, n in now if n is not None or keep_dropped)

    # A dropped key column keeps its declared name: the plan then says it is not in the
    # source (a key is never shortened silently; the DROP itself is a key change).
    return dataclasses.replace(table, columns=tuple(columns), key=names(table.key, True),
                               track_history=names(table.track_history, False))


__all__ = ["FollowedColumns", "current_name", "declared_names", "followed_drop",
           "followed_rename", "rename_conflict", "with_followed"]
