"""Executor-side PUT: with ``target.snowflake.stage`` over a local ``engine.landing``, the
executor task that lands a change file uploads it to that (internal) stage itself, so the
driver only COPYs it by name (``plan.statements.stage_copy``), as from an object store.

``LandedUpload`` travels with the tasks (a data-source option for the stream's decode tasks,
the closure of the snapshot's chunk tasks) without any secret: the target's fields minus the
password, token and key passphrase. On the executor the connector finds the credential
where it finds the driver's (``sink.snowflake.put_from_executor``): a named connection in
``connections.toml``, ``SNOWFLAKE_*`` variables, a private key file on the host.
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterable
from dataclasses import asdict, dataclass, replace

from replicator.model.pipeline import IdentifierCase, Pipeline, SnowflakeTarget
from replicator.plan.dialects import landed_locally
from replicator.plan.model import Plan, TablePlan
from replicator.plan.stage_roads import driver_reasons
from replicator.plan.statements.stage_copy import put_landed
from replicator.sink.snowflake import put_from_executor


@dataclass(frozen=True)
class LandedUpload:
    target: SnowflakeTarget  # no secret (``of``)
    pipeline_name: str
    identifier_case: IdentifierCase
    stage: str
    landing: str
    # Source tables (``db.table``, lower case) only the driver stages (``plan.stage_roads``):
    # their files are never COPYed from the stage, so they are not PUT there.
    driver_staged: tuple[str, ...] = ()

    @classmethod
    def of(cls, pipeline: Pipeline, plan: Plan | None = None) -> LandedUpload | None:
        """The upload a pipeline's executors do, or None (no stage, or an object store);
        ``plan``: leave out the files of tables only the driver stages."""
        target = pipeline.target.warehouse
        landing = pipeline.engine.landing
        if not isinstance(target, SnowflakeTarget) or not target.stage or not landing \
                or not landed_locally(landing):
            return None
        # Absolute, as ``engine.landing.landing_root`` resolves it for the tasks.
        root = landing if "://" in landing else os.path.abspath(landing)
        return cls(replace(target, password=None, token=None, private_key_file_pwd=None),
                   pipeline.name, pipeline.target.identifier_case, target.stage, root,
                   _driver_staged(plan) if plan is not None else ())

    def to_json(self) -> str:
        return json.dumps({**asdict(self), "target": asdict(self.target)})

    @classmethod
    def from_json(cls, text: str) -> LandedUpload:
        fields = json.loads(text)
        return cls(**{**fields, "target": SnowflakeTarget(**fields["target"]),
                      "driver_staged": tuple(fields.get("driver_staged", ()))})

    def wants(self, source_table: str) -> bool:
        """Whether a landed file of ``source_table`` (``db.table``) goes to the stage."""
        return source_table.lower() not in self.driver_staged

    def put(self, paths: Iterable[str], local: str | None = None) -> None:
        """PUT each landed file (executor side); ``local``: the one file of ``paths`` is
        still there, under the same base name (a file the driver must not see before it is
        in the stage)."""
        statements = [put_landed(self.stage, self.landing, path, local) for path in paths]
        if statements:
            put_from_executor(self.target, self.pipeline_name, self.identifier_case,
                              statements)


def _driver_staged(plan: Plan) -> tuple[str, ...]:
    """The named source tables every reader of which the driver stages; a table a routed
    target on the stage's road may read (its selection matches it) is still PUT."""
    on_stage: list[TablePlan] = []
    by_driver: list[TablePlan] = []
    for table in plan.tables:
        (by_driver if driver_reasons(table) else on_stage).append(table)
    names = {name.lower() for table in by_driver if not table.routed
             for name in table.source_names}
    return tuple(sorted(name for name in names
                        if not any(table.reads(name) for table in on_stage)))


__all__ = ["LandedUpload"]
