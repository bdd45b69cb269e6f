"""The JSON Schema: draft-07, documented for editors, shipped byte-identical in the package,
defaults that match the model's."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from jsonschema import Draft7Validator

from replicator.config.schema import pipeline_schema
from replicator.model.pipeline import (
    DEFAULT_METADATA,
    BatchPolicy,
    DuckDBTarget,
    EngineConfig,
    MySQLSource,
    TargetConfig,
)

ROOT = Path(__file__).resolve().parents[2]
CANONICAL = ROOT / "schemas" / "pipeline.schema.json"
PACKAGED = ROOT / "replicator" / "config" / "pipeline.schema.json"


def test_packaged_copy_is_byte_identical() -> None:
    assert PACKAGED.read_bytes() == CANONICAL.read_bytes(), (
        "copy schemas/pipeline.schema.json to replicator/config/pipeline.schema.json"
    )


def test_is_a_valid_draft7_schema() -> None:
    schema = json.loads(CANONICAL.read_text())
    assert schema["$schema"] == "http://json-schema.org/draft-07/schema#"
    Draft7Validator.check_schema(schema)


def _objects(node: Any, where: str) -> Iterator[tuple[str, dict[str, Any]]]:
    if isinstance(node, dict):
        if node.get("type") == "object" or "properties" in node:
            yield where, node
        for key, value in node.items():
            yield from _objects(value, f"{where}/{key}")
    elif isinstance(node, list):
        for index, value in enumerate(node):
            yield from _objects(value, f"{where}/{index}")


def test_every_object_is_closed_and_every_property_documented() -> None:
    schema = pipeline_schema()
    for where, node in _objects(schema, "#"):
        if "properties" not in node:
            continue  # maps of user names (columns, conf) validate their values instead
        assert node.get("additionalProperties") is False, where
        for name, prop in node["properties"].items():
            target = prop
            if "$ref" in prop:
                target = schema["definitions"][prop["$ref"].split("/")[-1]]
            assert target.get("description"), f"{where}/{name} has no description"
            assert target.get("examples"), f"{where}/{name} has no examples"


def _prop(path: str) -> dict[str, Any]:
    schema = pipeline_schema()
    node: dict[str, Any] = schema
    for part in path.split("."):
        node = node["properties"][part]
        if "$ref" in node:
            node = schema["definitions"][node["$ref"].split("/")[-1]]
    return node


def test_defaults_match_the_model() -> None:
    mysql, batching, engine = MySQLSource(), BatchPolicy(), EngineConfig()
    assert _prop("source.mysql.host")["default"] == mysql.host
    assert _prop("source.mysql.port")["default"] == mysql.port
    assert _prop("source.mysql.user")["default"] == mysql.user
    assert _prop("source.mysql.ssl")["default"] == mysql.ssl
    assert _prop("source.mysql.tinyint1")["default"] == mysql.tinyint1
    assert _prop("source.mysql.start")["default"] == mysql.start.kind
    assert mysql.zero_dates == "null" and _prop("source.mysql.zero_dates")["default"] == "as_null"
    target = TargetConfig(warehouse=DuckDBTarget())
    assert _prop("target.identifier_case")["default"] == target.identifier_case
    assert _prop("target.state_table")["default"] == target.state_table
    assert _prop("target.duckdb.path")["default"] == DuckDBTarget().path
    assert _prop("target.duckdb.schema")["default"] == DuckDBTarget().schema
    assert _prop("batching.max_rows")["default"] == batching.max_rows
    assert _prop("engine.master")["default"] == engine.master
    assert _prop("engine.decode_partitions")["default"] == engine.decode_partitions
    assert tuple(_prop("defaults.metadata")["default"]) == DEFAULT_METADATA
    assert _prop("defaults.deletes")["default"] == "hard"
    schema = pipeline_schema()
    assert schema["definitions"]["batching"]["properties"]["max_delay"]["default"] == "10s"
    assert batching.max_delay_ms == 10_000


def test_metadata_choices_are_the_models() -> None:
    from replicator.model.pipeline import METADATA_COLUMNS

    items = pipeline_schema()["definitions"]["metadata"]["items"]["enum"]
    assert set(items) == set(METADATA_COLUMNS)
