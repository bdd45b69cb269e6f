"""How a pipeline's ``identifier_case`` folds target names: the one rule, used by the
semantic checks of ``validate`` (collisions, R202/R203) and by the plan (every target name)."""

from __future__ import annotations

from replicator.model.pipeline import IdentifierCase


def target_identifier(name: str, case: IdentifierCase) -> str:
    """A target name under the pipeline's identifier policy (not quoted yet): ``upper`` folds
    to upper case (Snowflake's own rule for unquoted names), ``preserve`` keeps it."""
    return name.upper() if case == "upper" else name
