"""The application context of one pipeline: its model, the source catalog, the plan and the
sink, each loaded once and in one way (sqlmesh's ``Context``).

Every command that needs more than the YAML asks a ``Context``: ``run`` (engine.runner and the
batch applier when tables appear), ``plan``, ``status``, ``verify`` and the demo. None of them
reads the catalog or builds the plan on its own, so they cannot disagree about which tables a
pipeline has or what the plan of one is.
"""

from __future__ import annotations

import dataclasses
import json
import os
from collections.abc import Collection, Iterable, Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

import replicator.sink
from replicator.config import load_pipeline
from replicator.errors import SourceError
from replicator.model.followed import (
    FollowedColumns,
    followed_drop,
    followed_rename,
    with_followed,
)
from replicator.source.catalog import read_catalog

# The planner (replicator.plan, ~50 ms: the SQL machinery) is imported where it is used:
# `replicator validate` imports every command module, which all import this one. Config,
# catalog and the sink's package add no heavy library (the drivers load in open_sink).

if TYPE_CHECKING:
    from replicator.model.catalog import Catalog
    from replicator.model.pipeline import Pipeline
    from replicator.plan.model import Plan
    from replicator.sink.protocol import Sink

# In the checkpoint directory: the columns added in MySQL that a run ignored
# (`schema_changes.add_column: ignore`), per source table: {"db.table": ["col", ...]}.
IGNORED_COLUMNS_FILE = "ignored_columns.json"
# ... and the column renames and drops a run followed, per source table, for the names the
# YAML declares: {"db.table": {"qty": "quantity", "price": null}} (``model.followed``).
FOLLOWED_COLUMNS_FILE = "followed_columns.json"


class Context:
    """``pipeline`` with its catalog and plan, read on first use and then kept.

    ``offline``: the catalog comes from the pipeline's declared types (``plan --offline``),
    no MySQL connection; otherwise it is the live schema of the named tables and of every
    table a ``sources:`` selection matches."""

    def __init__(self, pipeline: Pipeline, *, offline: bool = False) -> None:
        self.offline = offline
        # The YAML's pipeline with the column renames and drops a run followed applied: the
        # one every plan, decision and check of this context uses (``model.followed``).
        self.pipeline = pipeline.declared or pipeline
        self.pipeline = with_followed(self.pipeline, self.followed_columns())
        self._catalog: Catalog | None = None
        self._plan: Plan | None = None
        # Ignored columns found by this context but not recorded (``ignore_missing_columns``
        # with record=False: verify and status read, they never write the checkpoint).
        self._seen_ignored: dict[str, set[str]] = {}

    @classmethod
    def load(cls, path: str | Path, *, environ: Mapping[str, str] | None = None,
             offline: bool = False) -> Context:
        """The context of the pipeline file at ``path`` (validated: ``ConfigError`` with
        every diagnostic when it is not)."""
        return cls(load_pipeline(path, environ=environ), offline=offline)

    def reload(self) -> None:
        """Forget the catalog and plan: the next use reads the live schema again (the runner,
        after tables were renamed into a ``sources:`` selection mid-stream)."""
        self._catalog = None
        self._plan = None

    def read_catalog(self) -> Catalog:
        """The catalog as it is now (read again on every call: the batch applier re-reads it
        when the binlog shows tables appearing); ``catalog`` keeps the first one."""
        if self.offline:
            # The planner (replicator.plan, ~50 ms) stays off every command's start-up: cli/
            # modules import this one.
            from replicator.plan import offline_catalog

            return offline_catalog(self.pipeline)
        pipeline = self.pipeline
        return read_catalog(pipeline.source, pipeline.fixed_tables, pipeline.selections)

    @property
    def catalog(self) -> Catalog:
        if self._catalog is None:
            self._catalog = self.read_catalog()
        return self._catalog

    @property
    def plan(self) -> Plan:
        """The plan of the catalog; a named table missing from the live schema is one
        error naming all of them (before the plan's per-table problems), unless its
        `schema_changes.drop_table` is ignore: then the plan leaves it out (``left_out``)."""
        if self._plan is None:
            catalog = self.catalog
            missing = self._missing(catalog, ignored=False)
            if missing:
                raise SourceError(
                    f"source tables not found: {', '.join(missing)}",
                    hint="create them in MySQL, or remove them from the pipeline's tables "
                    "(and check the replicator user has SELECT on them); to keep the target "
                    "table of a table dropped in MySQL and follow the others, set its "
                    "`schema_changes.drop_table: ignore`",
                )
            self._plan = self.replan(catalog)
        return self._plan

    def left_out(self) -> list[str]:
        """The named tables the plan leaves out: dropped in MySQL under `drop_table: ignore`
        (their target tables stay as they are)."""
        return self._missing(self.catalog, ignored=True)

    def _missing(self, catalog: Catalog, *, ignored: bool) -> list[str]:
        """Named tables the live ``catalog`` lacks, whose `drop_table` policy is ignore (or
        is not). None offline: that catalog is the YAML's own."""
        if self.offline:
            return []
        return [t.source_name for t in self.pipeline.tables if not t.routed
                and catalog.table(t.source_database, t.source_table) is None
                and (self.pipeline.schema_changes_for(t).drop_table == "ignore") == ignored]

    def replan(self, catalog: Catalog, *, named: Collection[str] | None = None) -> Plan:
        """The plan of this pipeline for ``catalog`` (not kept: the caller decides), without
        the columns ignored under `schema_changes.add_column: ignore` (``ignored_columns``)
        and the tables dropped under `drop_table: ignore` (``left_out``). ``named``: plan
        only these of the named tables (``db.table``; routed targets are always planned):
        a re-plan mid-stream must not judge a table by DDL that lies ahead in the binlog."""
        from replicator.plan import build_plan  # off every command's start-up (see the top)

        pipeline = self.pipeline
        gone = set(self._missing(catalog, ignored=True))
        wanted = None if named is None else {name.lower() for name in named}
        if gone or wanted is not None:
            pipeline = dataclasses.replace(pipeline, tables=tuple(
                t for t in pipeline.tables if t.routed or (
                    t.source_name not in gone
                    and (wanted is None or t.source_name.lower() in wanted))))
        return build_plan(pipeline, catalog, self.ignored_columns())

    # -- columns added in MySQL and ignored (`schema_changes.add_column: ignore`) ------------
    #
    # The plan is built from the live catalog, so a column added in MySQL is in it unless it
    # is remembered as ignored. Remembered in two ways that agree: the checkpoint's
    # ``ignored_columns.json`` (written by the run when it follows the ADD COLUMN, or finds
    # the column at start-up; read by every command, `plan` included, which has no target
    # connection), and the target itself: a column the catalog has and the target table
    # lacks, on a table whose policy is ignore, is an ignored added column
    # (``ignore_missing_columns``; a target rebuilt from scratch, or a lost checkpoint, is
    # recovered from it). The policy decides each time: switching a table to
    # `add_column: follow` brings its ignored columns back (added empty by the setup).

    def _ignored_file(self) -> Path | None:
        if self.offline:  # the YAML's declared columns only: nothing was added
            return None
        return Path(self.pipeline.checkpoint_dir) / IGNORED_COLUMNS_FILE

    def ignored_columns(self) -> dict[str, set[str]]:
        """Per source table (``db.table``, lower case), the lower-case columns remembered as
        added in MySQL and ignored (the checkpoint's record and what this context found)."""
        found: dict[str, set[str]] = {name: set(columns)
                                      for name, columns in self._seen_ignored.items()}
        path = self._ignored_file()
        if path is not None and path.is_file():
            recorded: dict[str, Any] = json.loads(path.read_text(encoding="utf-8"))
            for name, columns in recorded.items():
                found.setdefault(name.lower(), set()).update(str(c).lower() for c in columns)
        return found

    def ignore_columns(self, source: str, columns: Iterable[str], *,
                       record: bool = True) -> bool:
        """Remember ``columns`` of ``source`` (``db.table``) as added and ignored; the plan is
        built again on next use. ``record``: write them to the checkpoint (only the run does).
        True when any was new."""
        name = source.lower()
        new = {c.lower() for c in columns} - self.ignored_columns().get(name, set())
        if not new:
            return False
        self._seen_ignored.setdefault(name, set()).update(new)
        path = self._ignored_file()
        if record and path is not None:
            path.parent.mkdir(parents=True, exist_ok=True)
            everything = {key: sorted(value) for key, value in self.ignored_columns().items()}
            scratch = path.with_suffix(".tmp")
            scratch.write_text(json.dumps(everything, indent=2, sort_keys=True) + "\n",
                               encoding="utf-8")
            os.replace(scratch, path)
        self._plan = None
        return True

    # -- column renames and drops followed (``model.followed``) ------------------------------

    def _followed_file(self) -> Path | None:
        if self.offline:  # the YAML's declared columns, as written
            return None
        return Path(self.pipeline.checkpoint_dir) / FOLLOWED_COLUMNS_FILE

    def followed_columns(self) -> FollowedColumns:
        """Per source table (``db.table``, lower case): declared name (lower case) -> the
        source column it is now (None: dropped), as the run recorded following them."""
        path = self._followed_file()
        if path is None or not path.is_file():
            return {}
        recorded: dict[str, Any] = json.loads(path.read_text(encoding="utf-8"))
        return {table.lower(): {str(k).lower(): (None if v is None else str(v))
                                for k, v in names.items()}
                for table, names in recorded.items() if isinstance(names, dict)}

    def follow_column(self, source: str, old: str, new: str | None) -> bool:
        """Record that MySQL renamed ``old`` to ``new`` (None: dropped it) in ``source``
        (``db.table``) and the run followed it; the pipeline and plan follow from now on.
        Only names the YAML declares are recorded. True when anything changed."""
        declared = self.pipeline.declared or self.pipeline
        spec = next((t for t in declared.tables if not t.routed
                     and t.source_name.lower() == source.lower()), None)
        if spec is None:
            return False
        everything = {table: dict(names) for table, names in self.followed_columns().items()}
        before = everything.get(source.lower(), {})
        after = (followed_drop(before, spec, old) if new is None
                 else followed_rename(before, spec, old, new))
        path = self._followed_file()
        if after == before or path is None:
            return False
        everything[source.lower()] = after
        self._write_followed(path, everything)
        self.pipeline = with_followed(declared, everything)
        self.reload()
        return True

    def forget_followed(self, source: str, declared: Iterable[str]) -> bool:
        """Forget the followed renames and drops of these declared names of ``source``
        (``db.table``): ``replicator init --refresh`` wrote their current names into the YAML,
        so a record left would move a name the YAML now means as it is. True when any was."""
        path = self._followed_file()
        everything = {table: dict(names) for table, names in self.followed_columns().items()}
        names = everything.get(source.lower(), {})
        gone = {name.lower() for name in declared} & set(names)
        if path is None or not gone:
            return False
        everything[source.lower()] = {k: v for k, v in names.items() if k not in gone}
        self._write_followed(path, {k: v for k, v in everything.items() if v})
        return True

    @staticmethod
    def _write_followed(path: Path, everything: Mapping[str, Mapping[str, str | None]]) -> None:
        path.parent.mkdir(parents=True, exist_ok=True)
        scratch = path.with_suffix(".tmp")
        scratch.write_text(json.dumps(everything, indent=2, sort_keys=True) + "\n",
                           encoding="utf-8")
        os.replace(scratch, path)

    def ignore_missing_columns(self, sink: Sink, plan: Plan | None = None, *,
                               only: Iterable[str] | None = None, skip: Iterable[str] = (),
                               record: bool = True) -> bool:
        """The target as memory of ignored columns: in ``plan`` (default: this context's),
        a named table whose `add_column` policy is ignore and whose target table exists,
        the source columns the plan writes that the target lacks -- added in MySQL while
        no run followed them, or renamed from an ignored one -- are remembered as ignored
        (``ignore_columns``). Columns `columns:` configures, key columns and computed ones
        are never ignored. ``only``/``skip``: the source tables (``db.table``) to look at /
        to leave alone (a table queued for a re-copy after a type or key change, whose
        target columns may be between DROP and ADD). True when the plan must be built
        again (``self.plan`` is)."""
        plan = plan if plan is not None else self.plan
        wanted = None if only is None else {name.lower() for name in only}
        left_alone = {name.lower() for name in skip}
        changed = False
        for table in plan.tables:
            name = table.source_name.lower()
            if (table.routed or table.outbox is not None or name in left_alone
                    or (wanted is not None and name not in wanted)):
                continue
            spec = self.pipeline.table(table.source_name)
            if self.pipeline.schema_changes_for(spec).add_column != "ignore":
                continue
            have = sink.described_columns(table)
            if not have:
                continue  # no target table yet: its setup creates every column
            missing = [c.source_column for c in table.data_columns
                       if c.source_column and c.expression is None and not c.is_key
                       and spec.mapping_for(c.source_column) is None
                       and c.target_column.lower() not in have]
            if missing:
                changed |= self.ignore_columns(table.source_name, missing, record=record)
        return changed

    def open_sink(self, plan: Plan | None = None) -> Sink:
        """A new connection to the target for ``plan`` (default: this context's); the caller
        closes it."""
        return replicator.sink.open_sink(self.pipeline, plan if plan is not None else self.plan)
