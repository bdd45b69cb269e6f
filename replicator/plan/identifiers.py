"""The identifier policy, decided once: every identifier is quoted, case set by the pipeline.

Every name that reaches generated SQL goes through ``quote_identifier``, so names with spaces,
quotes, reserved words (``TABLE``, ``ORDER``) and mixed case work the same in both dialects.
``identifier_case: upper`` (the default) folds target names to upper case first, which is
Snowflake's own rule for unquoted names: users then query ``SELECT * FROM DRIVER_TRIPS``
without quotes. ``preserve`` keeps names exactly as written (users must quote mixed case).
https://docs.snowflake.com/en/sql-reference/identifiers-syntax

Both Snowflake and DuckDB quote with double quotes and escape one by doubling it.
"""

from __future__ import annotations

from collections.abc import Iterable

# The folding rule lives in the model (validate uses it too); plan/ folds every name with it.
from replicator.model.identifiers import target_identifier as target_identifier


def quote_identifier(name: str) -> str:
    """THE quoting function: wrap in double quotes, double any double quote inside."""
    if not name:
        raise ValueError("an empty identifier cannot be quoted")
    return '"' + name.replace('"', '""') + '"'


def qualified_name(parts: Iterable[str]) -> str:
    """``("DB", "RAW", "ORDERS")`` -> ``"DB"."RAW"."ORDERS"``."""
    return ".".join(quote_identifier(part) for part in parts)


