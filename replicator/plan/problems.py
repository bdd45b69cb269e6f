"""Problems found while planning a pipeline against its catalog, all collected before one error.

Each problem has a stable code (the R2xx rule it shares with ``validate`` where the rule is the
same, R3xx for what only the catalog can show; docs/diagnostics.md) and ``where``: the path of
the setting in the pipeline file (``("tables", 2, "columns", "email")``). The CLI turns them into
``Diagnostic``s with the line and column of that setting, so ``replicator plan`` reports like
``replicator validate`` does (``--format github`` annotates the YAML).
"""

from __future__ import annotations

from dataclasses import dataclass

from replicator.errors import PlanError
from replicator.model.pipeline import Pipeline, TablePipeline

JsonPath = tuple[str | int, ...]

# The codes of problems only the plan finds (the catalog, the offline declarations). Codes
# shared with validate (R202, R203, R215, R24x, R238) mean the same rule there.
PLAN_CODES: dict[str, str] = {
    "R301": "a table named by `source:` is not in the MySQL schema",
    "R302": "a configured column is not a column of the source table",
    "R303": "the key cannot be resolved (no primary key, a key column missing or excluded)",
    "R304": "unknown metadata",
    "R305": "a column whose type cannot be mapped to a target type",
    "R306": "a target column name that replicator reserves",
    "R307": "no source table matches a `sources:` selection",
    "R308": "the tables a `sources:` selection matches disagree (column types, keys)",
    "R309": "plan --offline: columns without source_type",
    "R310": "an outbox route that cannot be planned",
    "R311": "target.snowflake.stage without engine.landing, or with an HDFS one",
    # A warning: the pipeline runs, the table's batches take the driver's staging road.
    "R312": "target.snowflake.stage: a table whose batches the driver stages (the external-stage "
            "load cannot render its transform in Snowflake SQL yet)",
}


@dataclass(frozen=True)
class PlanProblem:
    message: str
    hint: str | None
    code: str
    where: JsonPath  # into the pipeline file; () for the file itself
    severity: str = "error"  # or "warning": reported, the plan still built (``Plan.notes``)


class PlanProblems:
    """Collects every problem of a pipeline so the user sees them all at once."""

    def __init__(self) -> None:
        self.items: list[PlanProblem] = []
        self.notes: list[PlanProblem] = []  # warnings: they do not stop the plan
        # The table being planned (``("tables", 2)``): ``add``'s ``at`` is relative to it.
        self.base: JsonPath = ()

    def add(self, message: str, hint: str | None = None, *, code: str,
            at: JsonPath = ()) -> None:
        """A problem with the setting ``at`` (under the table being planned) that fixes it."""
        self.items.append(PlanProblem(message, hint, code, (*self.base, *at)))

    def note(self, message: str, hint: str | None = None, *, code: str,
             at: JsonPath = ()) -> None:
        """A warning at the setting ``at``: reported with the plan, which is still built."""
        self.notes.append(PlanProblem(message, hint, code, (*self.base, *at), "warning"))

    def raise_if_any(self) -> None:
        if not self.items:
            return
        problems = tuple(self.items)
        if len(problems) == 1:
            raise PlanError(problems[0].message, problems[0].hint, problems)
        lines = [f"{len(problems)} problems:"]
        for problem in problems:
            lines.append(f"  - {problem.message}"
                         + (f" (hint: {problem.hint})" if problem.hint else ""))
        raise PlanError("\n".join(lines), "fix each problem above in the pipeline file", problems)


def expression_code(message: str) -> str:
    """The code of an expression or filter that does not compile (validate and plan alike):
    R240 syntax, R242 unknown column, R241 unsupported, R243 a type error."""
    if message.startswith("syntax error") or "expected exactly one" in message or "not a query" in message:
        return "R240"
    if message.startswith("unknown column"):
        return "R242"
    if "not supported" in message or message.startswith("function"):
        return "R241"
    return "R243"


def table_path(pipeline: Pipeline, table: TablePipeline, *parts: str | int) -> JsonPath:
    """Where ``table`` (and a setting of it) is in the pipeline file: ``("tables", 2, ...)``."""
    index = next((n for n, t in enumerate(pipeline.tables) if t is table), None)
    return ("tables", index, *parts) if index is not None else ()
