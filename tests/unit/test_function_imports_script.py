"""scripts/function-imports finds imports of our own modules inside functions (issue 16).

Only its static part: the closures it measures take a fresh interpreter per module (~40 s).
"""

from __future__ import annotations

import importlib.machinery
import importlib.util
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def _script():
    loader = importlib.machinery.SourceFileLoader("function_imports",
                                                  str(ROOT / "scripts" / "function-imports"))
    spec = importlib.util.spec_from_loader("function_imports", loader)
    assert spec is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # its dataclasses look their module up
    loader.exec_module(module)
    return module


def test_lists_the_imports_inside_functions_with_the_modules_they_import() -> None:
    script = _script()
    found = script.scan(["replicator/cli/package.py"])
    # `replicator package` builds the cluster's zip: the launcher stays off every other command.
    assert [(item.function, item.modules) for item in found] == [
        ("command", ("replicator.engine.job.launch",))]
    assert found[0].importer == "replicator.cli.package"


def test_from_package_import_submodule_counts_the_submodule() -> None:
    script = _script()
    assert script.is_module("replicator.source.fast.stream")
    assert not script.is_module("replicator.source.fast.read_changes_fast")
