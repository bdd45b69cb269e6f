"""Schema changes of the tables a `sources:` selection matches (routing), while streaming.

Tables come and go under a selection by design; what each kind of DDL means:

- CREATE TABLE of a matching name: a new source table. Re-plan (it joins the target's
  sources; its columns must agree with the others'); it needs no copy: it was empty when
  created, so every row it gets is in the binlog after the CREATE (CREATE ... LIKE too;
  CREATE ... SELECT logs its rows after the CREATE in a ROW binlog).
- RENAME TABLE of another table INTO a matching name: its rows were written under the old
  name, so it needs a copy. ``SourcesToCopy`` stops the stream (the batch is not
  committed); the runner re-plans, copies the table (``start.cover_new_tables``, as for a
  table created while the pipeline was stopped) and streams on: the batch is replayed, and
  its RENAME is then known.
- DROP TABLE / RENAME AWAY / DROP DATABASE of a matched table: it stops being read; its rows
  stay in the target (docs/routing.md).

Anything else (ALTER, TRUNCATE) is left to the rules for one table (``transform``).
"""

from __future__ import annotations

from collections.abc import Collection, Sequence

from replicator.errors import EngineError


class SourcesToCopy(EngineError):
    """Tables renamed into a selection mid-stream: the runner copies them, then streams on."""

    def __init__(self, tables: Sequence[str], message: str, hint: str) -> None:
        super().__init__(message, hint=hint)
        self.tables = tuple(tables)


def follow_routed_change(
    kind: str, tables: Sequence[str], routed: Sequence[str], known: Collection[str], sql: str,
    where: str,
) -> bool:
    """True: re-plan (tables joined or left a selection). False: not a routing matter.

    ``tables``: the names the DDL touches (RENAME: old, new, old, new ...); ``routed``: those
    a selection matches or matched; ``known``: the lower-case source tables the plan has now.
    """
    routed_set = {name.lower() for name in routed}
    if kind == "create":
        return True
    if kind == "drop":
        return True  # a matched table dropped: not read any more, its rows stay
    if kind == "rename":
        pairs = list(zip(tables[0::2], tables[1::2], strict=False))
        arrivals = [new for old, new in pairs
                    if new.lower() in routed_set and new.lower() not in known]
        if arrivals:
            raise SourcesToCopy(
                arrivals,
                f"{', '.join(arrivals)} was renamed into a `sources:` selection at {where} "
                f"({sql[:200]}): its rows were written under another name, so it needs a copy",
                hint="run the pipeline again: a run copies the tables a selection matches that "
                "it has not covered yet, then streams on from here",
            )
        # Renamed away (not read any more), or into the selection after its copy (the
        # RENAME replayed after the runner copied it): re-plan either way.
        return True
    return False
