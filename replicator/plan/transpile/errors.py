"""``Untranslatable``: a construct the checker accepts (``plan.expressions``) but that has
no exact DuckDB form; ``validate`` and ``plan`` refuse it (R241), so what runs is what the
differential test proves equal to Spark."""

from __future__ import annotations

from replicator.errors import PlanError
from replicator.plan.expressions.errors import SUPPORTED_HINT


class Untranslatable(PlanError):
    """A supported-looking construct with no exact DuckDB form; ``offset`` as ExpressionError."""

    def __init__(self, message: str, offset: int = 0) -> None:
        super().__init__(message, hint=SUPPORTED_HINT)
        self.offset = offset
