"""Import rules that ``lint-imports`` (.importlinter) cannot express (issue 16).

A private name (``_Problems``) imported by another module ties the two modules together
without saying so: make it public in the module that owns it, or move the caller.
"""

from __future__ import annotations

import ast
from pathlib import Path

PACKAGE = Path(__file__).resolve().parents[2] / "replicator"

# Known exceptions (none left; issue 16 removed the last): this list only shrinks.
KNOWN: set[tuple[str, str, str]] = set()


def private_imports() -> set[tuple[str, str, str]]:
    found = set()
    for path in sorted(PACKAGE.rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            if isinstance(node, ast.ImportFrom) and (node.module or "").startswith("replicator"):
                for alias in node.names:
                    if alias.name.startswith("_") and not alias.name.startswith("__"):
                        found.add((path.relative_to(PACKAGE).as_posix(), node.module, alias.name))
    return found


def test_no_module_imports_another_modules_private_name() -> None:
    found = private_imports()
    new = sorted(found - KNOWN)
    assert not new, f"private names imported across modules (make them public): {new}"
    gone = sorted(KNOWN - found)
    assert not gone, f"remove these from KNOWN, they are fixed: {gone}"
