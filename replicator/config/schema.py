"""JSON Schema validation of the loaded data, every error mapped to a ``Diagnostic``.

The schema (``schemas/pipeline.schema.json``, shipped in the package as
``replicator/config/pipeline.schema.json``) is what editors use for completion and hover;
here each of jsonschema's errors becomes one message a human can act on, at the line and
column of the offending key or value, with a hint (``did you mean ...?``, ``remove the
quotes``).
"""

from __future__ import annotations

import difflib
import json
from functools import cache
from importlib import resources
from typing import Any

from replicator.config.loader import JsonPath, LoadedDocument

_JSON_TYPES = {
    "string": "a string",
    "integer": "an integer",
    "number": "a number",
    "boolean": "a boolean (true or false)",
    "object": "a mapping",
    "array": "a list",
    "null": "null",
}
_RANGE_VALIDATORS = frozenset({
    "minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum", "minLength", "maxLength",
    "minItems", "maxItems", "uniqueItems", "minProperties", "maxProperties",
})


@cache
def pipeline_schema() -> dict[str, Any]:
    """The pipeline JSON Schema (draft-07), as shipped inside the package."""
    text = resources.files("replicator.config").joinpath("pipeline.schema.json").read_text("utf-8")
    return json.loads(text)


def schema_text() -> str:
    return resources.files("replicator.config").joinpath("pipeline.schema.json").read_text("utf-8")


@cache
def _validator() -> Any:
    from jsonschema import Draft7Validator

    return Draft7Validator(pipeline_schema())


def render_path(path: JsonPath) -> str:
    text = ""
    for part in path:
        if isinstance(part, int):
            text += f"[{part}]"
        else:
            text += f".{part}" if text else str(part)
    return text or "(top level)"


def _show(value: Any) -> str:
    if isinstance(value, str):
        return repr(value)
    return json.dumps(value, default=str)


def _flow(value: Any) -> str:
    """A value as YAML flow text, the way a user would type it: {database: RAW, pos: 4}."""
    if isinstance(value, dict):
        return "{" + ", ".join(f"{k}: {_flow(v)}" for k, v in value.items()) + "}"
    if isinstance(value, list):
        return "[" + ", ".join(_flow(v) for v in value) + "]"
    if isinstance(value, bool) or value is None:
        return json.dumps(value)
    return str(value)


def _suggest(word: str, choices: list[str]) -> str | None:
    close = difflib.get_close_matches(word, choices, n=1, cutoff=0.6)
    if not close and choices:
        close = [c for c in choices if c.lower() == word.lower()]
    return close[0] if close else None


def _example(schema: dict[str, Any]) -> str | None:
    examples = schema.get("examples")
    if examples:
        return _flow(examples[0])
    return None


def check_schema(document: LoadedDocument) -> None:
    """Add one diagnostic per schema violation to ``document`` (nothing when data is None)."""
    if document.data is None:
        return
    errors = list(_validator().iter_errors(document.data))
    # A value of the wrong type also fails its enum/pattern: report the type only.
    mistyped = {tuple(e.absolute_path) for e in errors if e.validator == "type"}
    for error in errors:
        if error.validator in ("enum", "const", "pattern") and tuple(error.absolute_path) in mistyped:
            continue
        _report(document, error)


# Schema checks about a value itself (not about keys), and the code each is reported under.
_VALUE_CHECKS = {
    "type": "R102", "enum": "R104", "const": "R104", "pattern": "R104", "format": "R104",
    "minimum": "R105", "maximum": "R105", "exclusiveMinimum": "R105", "exclusiveMaximum": "R105",
    "minLength": "R105", "maxLength": "R105", "oneOf": "R106", "anyOf": "R106",
}


def _wants_string(schema: dict[str, Any]) -> bool:
    kind = schema.get("type")
    return kind == "string" or (isinstance(kind, list) and "string" in kind)


def _set_value(data: Any, path: JsonPath, value: str | None) -> bool:
    if value is None or not path:
        return False
    parent = data
    for step in path[:-1]:
        parent = parent[step]
    parent[path[-1]] = value
    return True


def _expected(schema: dict[str, Any]) -> str:
    """What the schema wants, in words, without the offending value."""
    if "enum" in schema:
        return "one of " + ", ".join(str(v) for v in schema["enum"])
    kind = schema.get("type")
    if kind:
        return "expected " + (" or ".join(kind) if isinstance(kind, list) else str(kind))
    return "see `replicator schema`"


def _report(document: LoadedDocument, error: Any) -> None:
    path: JsonPath = tuple(error.absolute_path)
    where = render_path(path)
    last = path[-1] if path else None
    instance = error.instance
    schema = error.schema if isinstance(error.schema, dict) else {}
    kind = error.validator
    hint: str | None

    # An unquoted ${VAR} is re-read as YAML so `port: ${PORT}` is a number; a field that
    # wants text (a password of digits, say) keeps the text the variable expanded to.
    if (path in document.interpolated and kind == "type" and _wants_string(schema)
            and _set_value(document.data, path, document.expanded.get(path))):
        return
    if path in document.interpolated and kind in _VALUE_CHECKS:
        # The value came from the environment and may be a secret put in the wrong field:
        # name the reference as written, never the value it expanded to.
        written = document.written.get(path, "${...}")
        code = _VALUE_CHECKS[kind]
        document.add(document.position(path), code,
                     f"{where}: the value of {written} is not valid here ({_expected(schema)})",
                     f"check what {written} is set to in the environment")
        return
    if kind == "additionalProperties":
        allowed = sorted(schema.get("properties", {}))
        for key in sorted(set(instance) - set(allowed)):
            suggestion = _suggest(key, allowed)
            hint = (f"did you mean '{suggestion}'?" if suggestion
                    else "allowed here: " + ", ".join(allowed))
            document.add(document.key_position((*path, key)), "R101",
                         f"unknown key '{key}' in {where}", hint)
        return
    if kind == "required":
        present = set(instance) if isinstance(instance, dict) else set()
        for key in error.validator_value:
            if key in present:
                continue
            prop = schema.get("properties", {}).get(key, {})
            example = _example(prop)
            hint = f"add `{key}: {example}`" if example else f"add `{key}:`"
            inside = f"{where}: " if path else ""
            document.add(document.key_position(path), "R103",
                         f"{inside}missing required key '{key}'", hint)
        return
    if kind == "type":
        _report_type(document, path, instance, schema)
        return
    if kind in ("enum", "const"):
        allowed = error.validator_value if kind == "enum" else [error.validator_value]
        words = [str(a) for a in allowed if a is not None]
        hint = None
        if isinstance(instance, str):
            suggestion = _suggest(instance, words)
            hint = f"did you mean '{suggestion}'?" if suggestion else None
        if document.yaml11_booleans.get(path):
            hint = f"`{document.yaml11_booleans[path]}` is read as a boolean; write one of: " + ", ".join(words)
        if hint is None:
            hint = "use one of: " + ", ".join(words)
        document.add(document.position(path), "R104",
                     f"{where}: {_show(instance)} is not one of {', '.join(words)}", hint)
        return
    if kind == "pattern":
        explanation = schema.get("patternErrorMessage", f"must match {error.validator_value}")
        document.add(document.position(path), "R104",
                     f"{where}: {_show(instance)} is not allowed here", explanation)
        return
    if kind in _RANGE_VALIDATORS:
        hint = _range_hint(last, kind, error.validator_value)
        document.add(document.position(path), "R105", f"{where}: {error.message}", hint)
        return
    if kind in ("oneOf", "anyOf"):
        _report_alternatives(document, path, error)
        return
    document.add(document.position(path), "R106", f"{where}: {error.message}")


def _report_type(document: LoadedDocument, path: JsonPath, instance: Any,
                 schema: dict[str, Any]) -> None:
    where = render_path(path)
    expected = schema.get("type")
    types = expected if isinstance(expected, list) else [expected]
    wanted = " or ".join(_JSON_TYPES.get(str(t), str(t)) for t in types)
    position = document.position(path)
    key = path[-1] if path and isinstance(path[-1], str) else None
    hint: str | None = None
    if "string" in types and path in document.yaml11_booleans:
        written = document.yaml11_booleans[path]
        document.add(position, "R006",
                     f"{where}: `{written}` is read by YAML as the boolean "
                     f"{str(bool(instance)).lower()}, not the text {written!r}",
                     f"quote it: {key or where}: '{written}'")
        return
    if isinstance(instance, str) and "integer" in types and instance.strip().lstrip("-").isdigit():
        hint = f"remove the quotes: {key or where}: {instance.strip()}"
    elif isinstance(instance, str) and "number" in types:
        hint = f"write a number without quotes: {key or where}: {instance.strip()}"
    elif "string" in types and isinstance(instance, bool | int | float):
        text = str(instance).lower() if isinstance(instance, bool) else str(instance)
        hint = f"quote it: {key or where}: '{text}'"
    elif instance is None:
        example = _example(schema)
        hint = (f"give it a value, e.g. {key or where}: {example}" if example
                else "give it a value or remove the line")
    else:
        example = _example(schema)
        hint = f"for example: {key or where}: {example}" if example else None
    document.add(position, "R102", f"{where}: {_show(instance)} is not {wanted}", hint)


def _range_hint(key: Any, kind: str, limit: Any) -> str | None:
    if key == "server_id":
        return "server_id must be 1..4294967295 and unique among the server's replicas; "\
            "or remove it to derive one from the pipeline name"
    if kind == "uniqueItems":
        return "remove the repeated entry"
    if kind in ("minItems", "minProperties"):
        return "give at least one entry, or remove the key to use the default"
    return None


def _report_alternatives(document: LoadedDocument, path: JsonPath, error: Any) -> None:
    """A oneOf/anyOf failure: report the branch that has the instance's type, else list them."""
    from jsonschema import Draft7Validator

    instance = error.instance
    branches = error.validator_value
    def has_type(branch: dict[str, Any]) -> bool:
        wanted = branch.get("type", "object")  # a JSON Schema type, or a list of them
        return any(Draft7Validator(branch).is_type(instance, kind)
                   for kind in ([wanted] if isinstance(wanted, str) else wanted))

    matching = [branch for branch in branches if has_type(branch)]
    if len(matching) == 1:
        before = len(document.diagnostics)
        for sub in Draft7Validator(matching[0]).iter_errors(instance):
            sub.path.extendleft(reversed(path))  # make the sub-error's path absolute
            _report(document, sub)
        if len(document.diagnostics) > before:
            return
    if len(matching) > 1 and isinstance(instance, dict):
        # Objects of different shapes (start: {file, pos} or {gtid}): pick by their keys.
        for branch in matching:
            if set(instance) & set(branch.get("properties", {})):
                before = len(document.diagnostics)
                for sub in Draft7Validator(branch).iter_errors(instance):
                    sub.path.extendleft(reversed(path))
                    _report(document, sub)
                if len(document.diagnostics) > before:
                    return
    examples = error.schema.get("examples") if isinstance(error.schema, dict) else None
    hint = ("write one of: " + ", ".join(_flow(e) for e in examples)) if examples else None
    document.add(document.position(path), "R106",
                 f"{render_path(path)}: {_show(instance)} matches none of the allowed forms",
                 hint)
