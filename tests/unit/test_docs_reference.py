"""docs/reference.md is generated from the JSON Schema and must stay in sync with it.

The walk over the schema here is written independently of ``docs/gen_reference.py``, so a
key the generator skips (a new nesting, a ``$ref`` it does not follow) fails a test too.
"""

from __future__ import annotations

import importlib.util
import json
import re
import sys
from pathlib import Path
from typing import Any

import pytest

ROOT = Path(__file__).resolve().parents[2]
SCHEMA = json.loads((ROOT / "schemas" / "pipeline.schema.json").read_text())
REFERENCE = ROOT / "docs" / "reference.md"
REGENERATE = ".venv/bin/python docs/gen_reference.py"


def _generator() -> Any:
    """docs/gen_reference.py, a script rather than a package module, loaded by path."""
    name = "docs_gen_reference"
    if name not in sys.modules:
        spec = importlib.util.spec_from_file_location(name, ROOT / "docs" / "gen_reference.py")
        assert spec and spec.loader
        module = importlib.util.module_from_spec(spec)
        sys.modules[name] = module  # dataclasses look their module up while being created
        spec.loader.exec_module(module)
    return sys.modules[name]


def _deref(node: dict[str, Any]) -> dict[str, Any]:
    while "$ref" in node:
        name = node["$ref"].rsplit("/", 1)[-1]
        node = {**SCHEMA["definitions"][name], **{k: v for k, v in node.items() if k != "$ref"}}
    return node


def _leaves(path: str, node: dict[str, Any]) -> list[tuple[str, dict[str, Any]]]:
    """(path, schema) of every key, the way the reference writes paths."""
    node = _deref(node)
    found: list[tuple[str, dict[str, Any]]] = []
    properties = dict(node.get("properties", {}))
    for form in node.get("oneOf", []):
        properties.update(_deref(form).get("properties", {}))
    for key, child in properties.items():
        child_path = f"{path}.{key}" if path else key
        found.append((child_path, _deref(child)))
        found += _leaves(child_path, child)
    extra = node.get("additionalProperties")
    if isinstance(extra, dict):
        placeholder = ("<route column>" if path.endswith(".<type value>.columns") else {
            "columns": "<source column>", "conf": "<spark setting>", "routes": "<type value>",
            "settings": "<duckdb setting>",
        }[path.rsplit(".", 1)[-1]])
        found.append((f"{path}.{placeholder}", _deref(extra)))
        found += _leaves(f"{path}.{placeholder}", extra)
    if node.get("type") == "array" and isinstance(node.get("items"), dict):
        found += _leaves(path + "[]", node["items"])
    return found


LEAVES = _leaves("", SCHEMA)
TEXT = REFERENCE.read_text(encoding="utf-8")
ROWS = {
    match.group(1): match.group(0)
    for match in re.finditer(r"^\| `([^`]+)` \|.*$", TEXT, re.MULTILINE)
}


def test_reference_is_up_to_date_with_the_schema() -> None:
    expected = _generator().render(SCHEMA)
    assert expected == TEXT, (
        "docs/reference.md is out of date with schemas/pipeline.schema.json; regenerate it "
        f"with `{REGENERATE}` and commit the result"
    )


def test_check_mode_reports_the_regenerate_command(tmp_path: Path, monkeypatch, capsys) -> None:
    generator = _generator()
    stale = tmp_path / "reference.md"
    stale.write_text("# stale\n")
    monkeypatch.setattr(generator, "REFERENCE_PATH", stale)
    monkeypatch.setattr(generator, "ROOT", tmp_path)
    assert generator.main(["--check"]) == 1
    assert REGENERATE in capsys.readouterr().err
    assert generator.main([]) == 0
    assert generator.main(["--check"]) == 0


def test_every_key_of_the_schema_has_a_row() -> None:
    assert len(LEAVES) > 50  # the walk itself found the schema's keys
    missing = [path for path, _ in LEAVES if path not in ROWS]
    assert not missing, f"keys without a row in docs/reference.md: {missing}"
    extra = sorted(set(ROWS) - {path for path, _ in LEAVES})
    assert not extra, f"rows for keys the schema does not have: {extra}"


@pytest.mark.parametrize("path,node", LEAVES, ids=[path for path, _ in LEAVES])
def test_row_shows_default_enum_and_description(path: str, node: dict[str, Any]) -> None:
    row = ROWS[path]
    if "description" in node:
        assert " ".join(node["description"].split()) in row.replace("\\|", "|")
    if "default" in node and not isinstance(node["default"], (dict, list)):
        default = node["default"]
        text = {True: "true", False: "false"}.get(default, str(default)) if isinstance(
            default, bool) else str(default)
        assert f"`{text}`" in row
    for value in node.get("enum", []):
        assert f"`{'null' if value is None else value}`" in row


def test_required_keys_are_marked_required() -> None:
    assert "**required**" in ROWS["source"] and "**required**" in ROWS["tables[].sources.include"]
    # A table gives `source` OR `sources` (semantic check R221): neither is required alone.
    assert "**required**" not in ROWS["tables[].source"]
    assert "**required**" in ROWS["target.snowflake.database"]
    assert "**required**" not in ROWS["source.mysql.host"]


def test_section_links_point_at_existing_headings() -> None:
    anchors = {_generator()._anchor(h) for h in re.findall(r"^## `([^`]+)`", TEXT, re.MULTILINE)}
    links = set(re.findall(r"\]\(#([^)]+)\)", TEXT))
    assert links and links <= anchors, sorted(links - anchors)
