"""The application context of one pipeline: its model, the source catalog, the plan and the
sink, each loaded once and in one way (sqlmesh's ``Context``).

Every command that needs more than the YAML asks a ``Context``: ``run`` (engine.runner and the
batch applier when tables appear), ``plan``, ``status``, ``verify`` and the demo. None of them
reads the catalog or builds the plan on its own, so they cannot disagree about which tables a
pipeline has or what the plan of one is.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING

from replicator.errors import SourceError

# The config, plan, source and sink modules are imported where they are used: importing them
# costs ~0.3 s together (the YAML, JSON Schema and SQL machinery), and `replicator validate`
# imports every command module, which all import this one.

if TYPE_CHECKING:
    from replicator.model.catalog import Catalog
    from replicator.model.pipeline import Pipeline
    from replicator.plan.model import Plan
    from replicator.sink import Sink


class Context:
    """``pipeline`` with its catalog and plan, read on first use and then kept.

    ``offline``: the catalog comes from the pipeline's declared types (``plan --offline``),
    no MySQL connection; otherwise it is the live schema of the named tables and of every
    table a ``sources:`` selection matches."""

    def __init__(self, pipeline: Pipeline, *, offline: bool = False) -> None:
        self.pipeline = pipeline
        self.offline = offline
        self._catalog: Catalog | None = None
        self._plan: Plan | None = None

    @classmethod
    def load(cls, path: str | Path, *, environ: Mapping[str, str] | None = None,
             offline: bool = False) -> Context:
        """The context of the pipeline file at ``path`` (validated: ``ConfigError`` with
        every diagnostic when it is not)."""
        from replicator.config import load_pipeline

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
            from replicator.plan import offline_catalog

            return offline_catalog(self.pipeline)
        from replicator.source.catalog import read_catalog

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
        error naming all of them (before the plan's per-table problems)."""
        if self._plan is None:
            catalog = self.catalog
            if not self.offline:
                missing = [t.source_name for t in self.pipeline.tables if not t.routed
                           and catalog.table(t.source_database, t.source_table) is None]
                if missing:
                    raise SourceError(
                        f"source tables not found: {', '.join(missing)}",
                        hint="create them in MySQL, or remove them from the pipeline's tables "
                        "(and check the replicator user has SELECT on them)",
                    )
            self._plan = self.replan(catalog)
        return self._plan

    def replan(self, catalog: Catalog) -> Plan:
        """The plan of this pipeline for ``catalog`` (not kept: the caller decides)."""
        from replicator.plan import build_plan

        return build_plan(self.pipeline, catalog)

    def open_sink(self, plan: Plan | None = None) -> Sink:
        """A new connection to the target for ``plan`` (default: this context's); the caller
        closes it."""
        from replicator.sink import open_sink

        return open_sink(self.pipeline, plan if plan is not None else self.plan)
