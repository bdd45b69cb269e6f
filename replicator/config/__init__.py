"""Pipeline files: load, check, and build the ``Pipeline`` model.

``validate_file`` runs every check and returns every problem; ``load_pipeline`` returns the
model or raises ``ConfigError`` carrying those same diagnostics. Neither imports anything
heavy: ``replicator validate`` must start fast and run in CI without Java.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path

from replicator.config.build import build_pipeline
from replicator.config.diagnostics import Diagnostic
from replicator.config.loader import LoadedDocument, load_document
from replicator.config.schema import check_schema
from replicator.config.semantic import check_semantics
from replicator.config.transforms import check_transforms
from replicator.errors import ConfigError
from replicator.model.pipeline import Pipeline

__all__ = ["Diagnostic", "check_document", "load_pipeline", "validate_file"]


def check_document(
    path: str | Path, *, environ: Mapping[str, str] | None = None, content: bytes | None = None
) -> LoadedDocument:
    """Load and run every check; the document carries data and diagnostics, sorted."""
    document = load_document(path, environ=environ, content=content)
    check_schema(document)
    check_semantics(document)
    check_transforms(document)
    unique: dict[Diagnostic, None] = {}
    for diagnostic in document.diagnostics:
        unique.setdefault(diagnostic, None)  # a problem reached by two routes is shown once
    document.diagnostics = sorted(unique, key=Diagnostic.sort_key)
    return document


def validate_file(
    path: str | Path, *, environ: Mapping[str, str] | None = None
) -> list[Diagnostic]:
    """Every problem in the file (errors and warnings). Raises only ``UsageError`` when the
    file cannot be read at all (missing, a directory, no permission)."""
    return check_document(path, environ=environ).diagnostics


def load_pipeline(path: str | Path, *, environ: Mapping[str, str] | None = None) -> Pipeline:
    """The pipeline in ``path``; ``ConfigError`` listing every error if it has any.

    Warnings (a literal password, ...) do not stop loading. ``environ`` defaults to
    ``os.environ`` and fills the ``${VAR}`` references.
    """
    document = check_document(path, environ=environ)
    errors = [d for d in document.diagnostics if d.is_error]
    if errors:
        first = errors[0]
        more = f" (and {len(errors) - 1} more)" if len(errors) > 1 else ""
        raise ConfigError(
            f"{first.path}:{first.line}:{first.col}: {first.message}{more}",
            diagnostics=errors,
            hint=f"run `replicator validate {path}` to see every problem",
        )
    return build_pipeline(document.data, path=path)
