"""The compiled decoder's extension has one declaration, setup.py's ``decoder_extensions``:
pip's build backend runs the file as __main__ (its ``setup()``), scripts/build-decoder reads it
under another name for the declaration alone, so a flag or a source changed there reaches
worktrees and installs alike."""

from __future__ import annotations

import runpy
from pathlib import Path
from typing import Any

import pytest
import setuptools

ROOT = Path(__file__).resolve().parents[2]


def test_setup_py_read_by_build_decoder_declares_the_extension_and_builds_nothing(
        monkeypatch: pytest.MonkeyPatch) -> None:
    cython_build = pytest.importorskip("Cython.Build")
    ran: list[dict[str, Any]] = []
    monkeypatch.setattr(setuptools, "setup", lambda **kwargs: ran.append(kwargs))
    # What cythonize is given (the .pyx -> .c translation is build-decoder's to run).
    monkeypatch.setattr(cython_build, "cythonize", lambda extensions, **options: extensions)
    declared = runpy.run_path(str(ROOT / "setup.py"), run_name="replicator_setup")
    assert ran == []  # build-decoder's read runs no setup(): it would parse pyproject.toml
    [extension] = declared["decoder_extensions"]()
    assert extension.name == "replicator.source.fast.compiled"
    assert extension.sources == ["replicator/source/fast/compiled.pyx"]
    assert (ROOT / extension.sources[0]).is_file() and "-O2" in extension.extra_compile_args

    runpy.run_path(str(ROOT / "setup.py"), run_name="__main__")  # as pip's backend runs it
    assert [kwargs["ext_modules"][0].name for kwargs in ran] == [extension.name]
    script = (ROOT / "scripts/build-decoder").read_text()
    assert 'declared["decoder_extensions"]()' in script and "Extension(" not in script
