"""The identifier check of every name a pipeline file gives a target object (R205), for the
semantic checks and the outbox routes' alike."""

from __future__ import annotations

from replicator.config.loader import JsonPath, LoadedDocument

# https://docs.snowflake.com/en/sql-reference/identifiers-syntax: at most 255 characters.
MAX_IDENTIFIER_LENGTH = 255


def check_identifier(document: LoadedDocument, path: JsonPath, name: str, what: str,
                      *, key: bool = False) -> None:
    """R205 at ``path`` (its key when ``key``) when ``name`` cannot be a Snowflake identifier;
    ``what`` names it in the message ("target column name")."""
    problem = None
    if not name.strip():
        problem = "is empty"
    elif "\x00" in name:
        problem = "holds a NUL character"
    elif len(name) > MAX_IDENTIFIER_LENGTH:
        problem = f"is {len(name)} characters long (at most {MAX_IDENTIFIER_LENGTH})"
    if problem:
        where = document.key_position(path) if key else document.position(path)
        shown = name if len(name) <= 40 else name[:37] + "..."
        document.add(where, "R205", f"{what} {shown!r} {problem}: Snowflake cannot hold it",
                     "choose a name of 1 to 255 characters without NUL")
