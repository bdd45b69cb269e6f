"""Options several commands declare alike, declared once: a command's ``--format`` of text or
JSON (``plan`` and ``validate`` print other formats and keep their own)."""

from __future__ import annotations

import enum
from typing import Annotated

import typer


class OutputFormat(enum.StrEnum):
    text = "text"
    json = "json"


# ``output_format: TextOrJson = OutputFormat.text``
TextOrJson = Annotated[OutputFormat, typer.Option("--format", "-f", help="text or json.")]
