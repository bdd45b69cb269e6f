"""``Diagnostic``: one problem in a pipeline file, and the reporters that print them.

Every check (loading, interpolation, JSON Schema, semantics) produces these; nothing stops
at the first problem. The codes are stable and documented in ``docs/diagnostics.md``.
Reporters are plain functions from diagnostics to text, one per ``--format``.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Sequence
from dataclasses import asdict, dataclass
from typing import Literal

Severity = Literal["error", "warning"]


# Every code replicator reports, with its meaning. Codes are stable: never reuse one for
# another meaning. docs/diagnostics.md has the table with an example fix for each.
CODES: dict[str, str] = {
    "R001": "the file is not UTF-8 text (binary, or another encoding)",
    "R002": "the file holds no YAML document",
    "R003": "YAML syntax error",
    "R004": "the top level is not a mapping",
    "R005": "duplicate key",
    "R006": "a YAML 1.1 boolean word (yes/no/on/off) where text was meant",
    "R007": "the file is too large, nests too deep or its aliases expand too far",
    "R010": "an environment variable referenced with ${VAR} is not set",
    "R011": "a variable required with ${VAR:?message} is not set",
    "R012": "a malformed ${...} reference",
    "R013": "a secret written literally in the file (warning)",
    "R101": "unknown key",
    "R102": "wrong type",
    "R103": "missing required key",
    "R104": "value not allowed (not one of the choices, or a bad name)",
    "R105": "value out of range (too small, too large, too short, repeated)",
    "R106": "value matches none of the allowed forms",
    "R201": "key column not among the declared columns",
    "R202": "two tables land in one target table",
    "R203": "two columns land in one target column",
    "R204": "key column excluded or masked so that keys collapse",
    "R205": "identifier Snowflake cannot hold (empty, > 255 characters, NUL)",
    "R206": "not a duration",
    "R207": "source is not database.table",
    "R208": "source_type is not a MySQL column type",
    "R209": "the same source table listed twice",
    "R210": "not exactly one target (snowflake or duckdb)",
    "R211": "some columns declare source_type, others do not (warning)",
    "R212": "mask: null means no mask (warning)",
    "R213": "an excluded column with other settings (warning)",
    "R214": "a table setting that does not apply to its mode",
    "R215": "track_history names a column that cannot be tracked",
    "R220": "a `sources:` pattern is not a valid regular expression",
    "R221": "a table entry needs exactly one of `source:` and `sources:`",
    "R222": "a `sources:` table needs a `target:` name",
    "R223": "a `sources:` pattern with an unescaped `.` (warning)",
    "R224": "a table named by `source:` is also selected by a `sources:` entry (warning)",
    "R230": "outbox: without mode: outbox, or mode: outbox without outbox:",
    "R231": "a setting of an outbox table that belongs to its routes",
    "R232": "an outbox route key column that is not a route column, or loads NULL",
    "R233": "not a JSON path of the supported subset",
    "R234": "unknown target type of an outbox route column",
    "R235": "an outbox route lands in a target table already taken",
    "R236": "an outbox route column lands in a target column already taken",
    "R237": "an outbox route setting that does not apply to its mode",
    "R238": "the outbox type or payload column is missing or of the wrong type",
    "R239": "an outbox route column without exactly one of path and column, or an unknown column",
    "R240": "an expression or filter does not parse",
    "R241": "a function or construct outside the supported subset",
    "R242": "an expression or filter names an unknown column",
    "R243": "a type error in an expression",
    "R244": "a computed column is not well defined",
    "R245": "a mask that cannot apply to its column",
    "R250": "TLS settings that contradict each other",
    "R251": "engine.checkpoint is a remote URI (the checkpoint is files on the driver's disk)",
    "R246": "schema_changes.key_change: ignore on a table that declares no key",
    "R247": "schema_changes.add_column: ignore on a `sources:` target (warning)",
}


@dataclass(frozen=True)
class Diagnostic:
    path: str  # the file, as given on the command line
    line: int  # 1-based; 0 when the problem is the file itself
    col: int  # 1-based; 0 when the problem is the file itself
    code: str  # R001 ... (docs/diagnostics.md)
    message: str
    hint: str | None = None
    severity: Severity = "error"

    @property
    def is_error(self) -> bool:
        return self.severity == "error"

    def sort_key(self) -> tuple[str, int, int, str]:
        return (self.path, self.line, self.col, self.code)


def count(diagnostics: Iterable[Diagnostic]) -> tuple[int, int]:
    """(errors, warnings)."""
    errors = warnings = 0
    for diagnostic in diagnostics:
        if diagnostic.is_error:
            errors += 1
        else:
            warnings += 1
    return errors, warnings


def _plural(n: int, word: str) -> str:
    return f"{n} {word}" if n == 1 else f"{n} {word}s"


def summary_line(files: int, diagnostics: Sequence[Diagnostic]) -> str:
    errors, warnings = count(diagnostics)
    return f"{_plural(files, 'file')}, {_plural(errors, 'error')}, {_plural(warnings, 'warning')}"


def format_text(diagnostic: Diagnostic) -> str:
    """``path:line:col: error[R102]: message`` then ``  hint: ...``."""
    where = diagnostic.path if diagnostic.line == 0 else (
        f"{diagnostic.path}:{diagnostic.line}:{diagnostic.col}"
    )
    text = f"{where}: {diagnostic.severity}[{diagnostic.code}]: {diagnostic.message}"
    if diagnostic.hint:
        text += f"\n  hint: {diagnostic.hint}"
    return text


def report_text(diagnostics: Sequence[Diagnostic], *, files: int) -> str:
    lines = [format_text(d) for d in diagnostics]
    lines.append(summary_line(files, diagnostics))
    return "\n".join(lines) + "\n"


def report_json(diagnostics: Sequence[Diagnostic], *, files: int) -> str:
    errors, warnings = count(diagnostics)
    document = {
        "diagnostics": [asdict(d) for d in diagnostics],
        "summary": {"files": files, "errors": errors, "warnings": warnings},
    }
    return json.dumps(document, indent=2) + "\n"


def _escape_data(text: str) -> str:
    # https://docs.github.com/en/actions/reference/workflow-commands-for-github-actions
    return text.replace("%", "%25").replace("\r", "%0D").replace("\n", "%0A")


def _escape_property(text: str) -> str:
    return _escape_data(text).replace(":", "%3A").replace(",", "%2C")


def format_github(diagnostic: Diagnostic) -> str:
    """A GitHub Actions annotation: ``::error file=...,line=...,col=...,title=R102::message``."""
    properties = [f"file={_escape_property(diagnostic.path)}"]
    if diagnostic.line:
        properties += [f"line={diagnostic.line}", f"col={diagnostic.col}"]
    properties.append(f"title={_escape_property(diagnostic.code)}")
    message = diagnostic.message
    if diagnostic.hint:
        message += f"\nhint: {diagnostic.hint}"
    return f"::{diagnostic.severity} {','.join(properties)}::{_escape_data(message)}"


def report_github(diagnostics: Sequence[Diagnostic], *, files: int) -> str:
    lines = [format_github(d) for d in diagnostics]
    return "".join(line + "\n" for line in lines)


REPORTERS = {"text": report_text, "json": report_json, "github": report_github}
