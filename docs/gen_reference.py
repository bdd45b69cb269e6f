"""Generate docs/reference.md, the configuration reference, from the pipeline JSON Schema.

    .venv/bin/python docs/gen_reference.py           # rewrite docs/reference.md
    .venv/bin/python docs/gen_reference.py --check   # exit 1 if it is out of date

The schema (``schemas/pipeline.schema.json``) is the one source of truth for keys, types,
defaults, allowed values and descriptions: editors show the same text on hover, and
``tests/unit/test_docs_reference.py`` fails when this page and the schema disagree. Every
object in the schema becomes a section; every key becomes a row named by its full path
(``source.mysql.host``, ``tables[].columns.<source column>.mask``), so a search for a key
finds it. Only the standard library and PyYAML: it runs wherever the tests run.
"""

from __future__ import annotations

import json
import sys
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

ROOT = Path(__file__).resolve().parents[1]
SCHEMA_PATH = ROOT / "schemas" / "pipeline.schema.json"
REFERENCE_PATH = ROOT / "docs" / "reference.md"
REGENERATE = ".venv/bin/python docs/gen_reference.py"

# How the path of a list item and of a free-form mapping key are written.
ITEM = "[]"
PLACEHOLDERS = {"columns": "<source column>", "conf": "<spark setting>", "routes": "<type value>",
                "settings": "<duckdb setting>"}


def placeholder_for(path: str) -> str:
    """The placeholder of the free-form keys of the mapping at ``path``."""
    if path.endswith(".<type value>.columns"):
        return "<route column>"  # an outbox route's columns are target columns
    return PLACEHOLDERS.get(path.rsplit(".", 1)[-1], "<name>")
PLACEHOLDER_EXAMPLES = {"<source column>": "DRIVERID", "<spark setting>": "spark.driver.memory",
                        "<duckdb setting>": "memory_limit"}
# Shared string definitions whose name says more than "string" (their own description is
# replaced by the key's, so the name carries the format).
SCALAR_DEFINITIONS = {"duration", "secret"}


@dataclass
class Row:
    """One key: a line of a section's table."""

    path: str
    schema: dict[str, Any]
    required: bool


@dataclass
class Section:
    """One object of the schema: its description, example and keys."""

    path: str
    schema: dict[str, Any]
    rows: list[Row] = field(default_factory=list)


def resolve(node: dict[str, Any], root: dict[str, Any]) -> dict[str, Any]:
    """``node`` with its ``$ref`` followed; keys written next to the ``$ref`` win (the schema
    uses them to give a shared definition a description of its own)."""
    if "$ref" not in node:
        return node
    pointer = node["$ref"]
    if not pointer.startswith("#/"):
        raise ValueError(f"only local $refs are supported: {pointer}")
    target: Any = root
    for part in pointer[2:].split("/"):
        target = target[part]
    merged = dict(resolve(target, root))
    merged.setdefault("x-definition", pointer.rsplit("/", 1)[-1])
    merged.update({k: v for k, v in node.items() if k != "$ref"})
    return merged


def _join(parent: str, key: str) -> str:
    return f"{parent}.{key}" if parent else key


def _object_forms(node: dict[str, Any], root: dict[str, Any]) -> list[dict[str, Any]]:
    """The object alternatives of a oneOf/anyOf (``start: {file, pos}`` / ``{gtid}``)."""
    forms = [resolve(f, root) for f in node.get("oneOf", []) + node.get("anyOf", [])]
    return [f for f in forms if "properties" in f]


def sections(schema: dict[str, Any]) -> Iterator[Section]:
    """Every object of the schema, parents before children, keys in the schema's order."""

    def walk(path: str, node: dict[str, Any]) -> Iterator[Section]:
        node = resolve(node, schema)
        properties = dict(node.get("properties", {}))
        for form in _object_forms(node, schema):
            properties.update(form["properties"])
        # Keys of a oneOf form are required only inside that form: not marked here.
        required = set(node.get("required", []))
        extra = node.get("additionalProperties")
        if properties or isinstance(extra, dict):
            section = Section(path or "(top level)", node)
            children: list[tuple[str, dict[str, Any]]] = []
            for key, child in properties.items():
                child_path = _join(path, key)
                section.rows.append(Row(child_path, resolve(child, schema), key in required))
                children.append((child_path, child))
            if isinstance(extra, dict):
                placeholder = placeholder_for(path)
                child_path = _join(path, placeholder)
                section.rows.append(Row(child_path, resolve(extra, schema), False))
                children.append((child_path, extra))
            yield section
            for child_path, child in children:
                yield from walk(child_path, child)
        elif node.get("type") == "array" and isinstance(node.get("items"), dict):
            yield from walk(path + ITEM, node["items"])

    yield from walk("", schema)


# -- rendering ---------------------------------------------------------------------------


def _scalar(value: Any) -> str:
    """A value as it is written in YAML, in backticks."""
    if isinstance(value, str):
        text = value
    elif value is None:
        text = "null"
    elif isinstance(value, bool):
        text = "true" if value else "false"
    else:
        text = yaml.safe_dump(value, default_flow_style=True, allow_unicode=True,
                              sort_keys=False, width=1000).strip()
        if text.endswith("..."):
            text = text[:-3].strip()
    return "`" + text.replace("|", "\\|") + "`"


def _cell(text: str) -> str:
    return " ".join(text.split()).replace("|", "\\|")


def _range(node: dict[str, Any]) -> str:
    low, high = node.get("minimum"), node.get("maximum")
    if low is not None and high is not None:
        return f"{low}..{high}"
    if low is not None:
        return f"≥ {low}"
    if high is not None:
        return f"≤ {high}"
    return ""


def type_text(node: dict[str, Any], root: dict[str, Any]) -> str:
    """``integer, 1..65535``, ``string: upper, preserve``, ``list of string``, ..."""
    if "oneOf" in node or "anyOf" in node:
        forms = [resolve(f, root) for f in node.get("oneOf", []) + node.get("anyOf", [])]
        return " or ".join(_form_text(form) for form in forms)
    kinds = node.get("type", "any")
    kinds = [kinds] if isinstance(kinds, str) else list(kinds)
    kind = " or ".join(k for k in kinds if k != "null" or "enum" not in node)
    if kind == "array":
        items = type_text(resolve(node.get("items", {}), root), root)
        text = f"list of ({items})" if ":" in items else f"list of {items}"
    elif kind == "object" and "properties" not in node and isinstance(
        node.get("additionalProperties"), dict
    ):
        text = f"mapping of {type_text(resolve(node['additionalProperties'], root), root)}"
    elif kind == "object":
        text = "mapping"
    elif node.get("x-definition") in SCALAR_DEFINITIONS:
        text = f"{node['x-definition']} ({kind})"
    else:
        text = kind
    details: list[str] = []
    if "const" in node:
        details.append(f"only {_scalar(node['const'])}")
    if "enum" in node:
        details.append("one of " + ", ".join(_scalar(v) for v in node["enum"]))
    if _range(node):
        details.append(_range(node))
    if "pattern" in node:
        details.append(f"matching `{node['pattern']}`")
    if "minLength" in node:
        details.append(f"at least {node['minLength']} characters")
    if "maxLength" in node:
        details.append(f"at most {node['maxLength']} characters")
    if "minItems" in node:
        details.append(f"at least {node['minItems']} item{'s' if node['minItems'] != 1 else ''}")
    if node.get("uniqueItems"):
        details.append("no repeats")
    return text + (": " + "; ".join(details) if details else "")


def _form_text(form: dict[str, Any]) -> str:
    if "properties" in form:
        keys = ", ".join(f"`{k}`" for k in form["properties"])
        return f"mapping {{{keys}}}"
    return type_text(form, {})


def _default(row: Row) -> str:
    if row.required:
        return "**required**"
    if "default" in row.schema:
        return _scalar(row.schema["default"])
    return ""


def _examples(node: dict[str, Any]) -> str:
    return ", ".join(_scalar(example) for example in node.get("examples", []))


def _example_block(section: Section) -> list[str]:
    examples = section.schema.get("examples", [])
    if not examples or section.path == "(top level)":
        return []
    key = section.path.rsplit(".", 1)[-1]
    lines = ["Example:" if len(examples) == 1 else "Examples:", "", "```yaml"]
    for number, example in enumerate(examples):
        if number:
            lines.append("# or")
        if key.endswith(ITEM):
            document: Any = {key[: -len(ITEM)]: [example]}
        elif key.startswith("<"):
            document = {PLACEHOLDER_EXAMPLES.get(key, key): example}
        else:
            document = {key: example}
        lines.append(_yaml_text(document))
    lines += ["```", ""]
    return lines


def _yaml_text(document: dict[str, Any]) -> str:
    """Block style for the outer levels, flow style for leaf lists and mappings."""
    ((key, value),) = document.items()
    if not isinstance(value, (dict, list)):  # PyYAML would write {key: value}
        return f"{key}: {_scalar(value).strip('`')}"
    return yaml.safe_dump(document, sort_keys=False, allow_unicode=True,
                          default_flow_style=None, width=100).rstrip()


def _forms_block(section: Section, root: dict[str, Any]) -> list[str]:
    """The alternatives of a oneOf key (``source.mysql.start``), one bullet each."""
    forms = [resolve(f, root) for f in section.schema.get("oneOf", [])]
    if not forms:
        return []
    lines = ["One of:", ""]
    for form in forms:
        lines.append(f"- {_form_text(form)}: {_cell(form.get('description', ''))}")
    return [*lines, ""]


def render(schema: dict[str, Any]) -> str:
    lines = [
        "# Configuration reference",
        "",
        "<!-- Generated from schemas/pipeline.schema.json by docs/gen_reference.py: do not",
        f"     edit by hand. Regenerate with: {REGENERATE} -->",
        "",
        "Every key of a pipeline file, generated from the JSON Schema "
        "([`schemas/pipeline.schema.json`](../schemas/pipeline.schema.json), also printed by "
        "`replicator schema`). Keys are written as paths: `tables[]` is an entry of the "
        "`tables` list, `<source column>` a key you choose. A key without a default is not "
        "set unless you set it. The guide with worked examples is "
        "[configuration.md](configuration.md); what each diagnostic code means is in "
        "[diagnostics.md](diagnostics.md).",
        "",
        _cell(schema.get("description", "")),
        "",
    ]
    all_sections = list(sections(schema))
    section_paths = {s.path for s in all_sections}
    lines += ["Sections: " + " · ".join(f"[`{s.path}`](#{_anchor(s.path)})"
                                        for s in all_sections), ""]
    for section in all_sections:
        lines += [f"## `{section.path}`", ""]
        if section.schema.get("description") and section.path != "(top level)":
            lines += [_cell(section.schema["description"]), ""]
        lines += _forms_block(section, schema)
        lines += [
            "| Key | Type | Default | Description | Examples |",
            "|---|---|---|---|---|",
        ]
        for row in section.rows:
            kind = _cell(type_text(row.schema, schema))
            examples = _examples(row.schema)
            own = next((p for p in (row.path, row.path + ITEM) if p in section_paths), None)
            if own is not None:  # described (with its examples) in a section of its own
                kind += f", see [`{own}`](#{_anchor(own)})"
                examples = ""
            lines.append(
                f"| `{row.path}` | {kind} | {_default(row)} "
                f"| {_cell(row.schema.get('description', ''))} | {examples} |"
            )
        lines.append("")
        lines += _example_block(section)
    return "\n".join(lines).rstrip() + "\n"


def _anchor(heading: str) -> str:
    """GitHub's anchor of a heading ``## `path` ``: lower case, punctuation dropped."""
    text = heading.lower()
    kept = "".join(ch for ch in text if ch.isalnum() or ch in " -_")
    return kept.replace(" ", "-")


def load_schema(path: Path = SCHEMA_PATH) -> dict[str, Any]:
    return dict(json.loads(path.read_text(encoding="utf-8")))


def main(argv: list[str]) -> int:
    text = render(load_schema())
    if "--check" in argv:
        current = REFERENCE_PATH.read_text(encoding="utf-8") if REFERENCE_PATH.exists() else ""
        if current != text:
            print(f"{REFERENCE_PATH.relative_to(ROOT)} is out of date with the schema; "
                  f"regenerate it: {REGENERATE}", file=sys.stderr)
            return 1
        return 0
    REFERENCE_PATH.write_text(text, encoding="utf-8")
    print(f"wrote {REFERENCE_PATH.relative_to(ROOT)}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
