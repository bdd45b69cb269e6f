"""``replicator schema``: print the pipeline JSON Schema (for editors and SchemaStore)."""

from __future__ import annotations

import sys

from replicator.config.schema import schema_text

COMMAND_SETTINGS = {"help": "Print the JSON Schema of pipeline files (draft-07)."}


def command() -> None:
    text = schema_text()
    sys.stdout.write(text if text.endswith("\n") else text + "\n")
