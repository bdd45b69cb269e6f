"""Validated data -> the frozen ``Pipeline`` model.

Runs only on data that passed the schema and semantic checks, so it converts and fills
defaults without checking again. YAML spellings that differ from the model's are mapped
here (``as_null`` -> the model's ``"null"``; ``start: {file, pos}`` -> ``kind="position"``).
Target names are kept as written; the plan applies ``identifier_case``.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

from replicator.config.semantic import parse_duration, split_source_name
from replicator.model.pipeline import (
    DEFAULT_METADATA,
    BatchPolicy,
    ColumnMapping,
    DuckDBTarget,
    EngineConfig,
    MySQLSource,
    OutboxColumn,
    OutboxRoute,
    OutboxSpec,
    Pipeline,
    SchemaChangePolicy,
    SnowflakeTarget,
    StartPosition,
    TablePipeline,
    TargetConfig,
)
from replicator.model.selection import TableSelection

_NAME_JUNK = re.compile(r"[^a-z0-9_-]+")


def name_from_path(path: str | Path) -> str:
    """The pipeline name a file gets when it does not say: its stem, made a valid name."""
    stem = _NAME_JUNK.sub("-", Path(path).stem.lower()).strip("-_")
    return stem or "pipeline"


def build_pipeline(data: dict[str, Any], *, path: str | Path | None = None) -> Pipeline:
    name = data.get("name") or (name_from_path(path) if path else "pipeline")
    batching = _batching(data.get("batching"), BatchPolicy())
    defaults = data.get("defaults") or {}
    schema_changes = _schema_changes(data.get("schema_changes"), SchemaChangePolicy())
    return Pipeline(
        name=name,
        source=_source(data["source"]["mysql"] or {}),
        target=_target(data["target"]),
        tables=tuple(_table(table, defaults, batching, schema_changes)
                     for table in data["tables"]),
        batching=batching,
        schema_changes=schema_changes,
        engine=_engine(data.get("engine") or {}),
        version=data.get("version", 1),
        path=str(path) if path is not None else None,
    )


def _batching(spec: dict[str, Any] | None, base: BatchPolicy) -> BatchPolicy:
    spec = spec or {}
    delay = parse_duration(spec.get("max_delay"))
    return BatchPolicy(
        max_rows=spec.get("max_rows", base.max_rows),
        max_delay_ms=base.max_delay_ms if delay is None else delay,
    )


def _schema_changes(spec: dict[str, Any] | None, base: SchemaChangePolicy) -> SchemaChangePolicy:
    """A `schema_changes:` mapping over ``base``: a kind it does not name keeps base's action."""
    import dataclasses

    return dataclasses.replace(base, **(spec or {}))


def _start(spec: Any) -> StartPosition:
    if spec is None or spec == "initial":
        return StartPosition("initial")
    if spec == "latest":
        return StartPosition("latest")
    if "gtid" in spec:
        return StartPosition("gtid", gtid=spec["gtid"])
    return StartPosition("position", file=spec["file"], pos=spec["pos"])


def _source(spec: dict[str, Any]) -> MySQLSource:
    defaults = MySQLSource()
    timeout = parse_duration(spec.get("connect_timeout"))
    return MySQLSource(
        host=spec.get("host", defaults.host),
        port=spec.get("port", defaults.port),
        user=spec.get("user", defaults.user),
        password=spec.get("password") or None,
        server_id=spec.get("server_id"),
        start=_start(spec.get("start")),
        connect_timeout_s=defaults.connect_timeout_s if timeout is None else timeout / 1000,
        ssl=spec.get("ssl", defaults.ssl),
        ssl_mode=spec.get("ssl_mode"),
        ssl_ca=spec.get("ssl_ca") or None,
        ssl_cert=spec.get("ssl_cert") or None,
        ssl_key=spec.get("ssl_key") or None,
        zero_dates="error" if spec.get("zero_dates") == "error" else "null",
        tinyint1=spec.get("tinyint1", defaults.tinyint1),
    )


def _target(spec: dict[str, Any]) -> TargetConfig:
    warehouse: SnowflakeTarget | DuckDBTarget
    if "snowflake" in spec:
        # `${VAR:-}` that is unset gives "": the same as not giving the setting at all.
        fields = {k: v for k, v in spec["snowflake"].items()
                  if v != "" or k in ("database", "schema")}
        warehouse = SnowflakeTarget(**fields)
    else:
        fields = dict(spec.get("duckdb") or {})
        fields["settings"] = tuple(sorted((fields.get("settings") or {}).items()))
        warehouse = DuckDBTarget(**fields)
    defaults = TargetConfig(warehouse=warehouse)
    return TargetConfig(
        warehouse=warehouse,
        identifier_case=spec.get("identifier_case", defaults.identifier_case),
        state_table=spec.get("state_table", defaults.state_table),
        atomic=spec.get("atomic", defaults.atomic),
    )


def _engine(spec: dict[str, Any]) -> EngineConfig:
    defaults = EngineConfig()
    retention = parse_duration(spec.get("landing_retention"))
    return EngineConfig(
        master=spec.get("master", defaults.master),
        checkpoint=spec.get("checkpoint"),
        conf=dict(spec.get("conf") or {}),
        decode_partitions=spec.get("decode_partitions", defaults.decode_partitions),
        landing=spec.get("landing"),
        landing_retention_ms=defaults.landing_retention_ms if retention is None else retention,
    )


def _column(source_column: str, spec: dict[str, Any] | None) -> ColumnMapping:
    spec = spec or {}
    mask = spec.get("mask")
    salt = keep_last = length = None
    if isinstance(mask, dict):  # {sha256: {salt}} | {redact: {keep_last}} | {truncate: N}
        kind, options = next(iter(mask.items()))
        if kind == "truncate":
            length = int(options)
        elif kind == "redact":
            keep_last = int((options or {}).get("keep_last", 0)) or None
        else:
            salt = (options or {}).get("salt")
        mask = kind
    return ColumnMapping(
        source_column=source_column,
        target_column=spec.get("name"),
        target_type=spec.get("type"),
        source_type=spec.get("source_type"),
        exclude=bool(spec.get("exclude", False)),
        mask="null" if mask == "as_null" else mask,
        mask_salt=salt,
        mask_keep_last=keep_last,
        mask_length=length,
        expression=spec.get("expression"),
    )


def _table(spec: dict[str, Any], defaults: dict[str, Any], batching: BatchPolicy,
           schema_changes: SchemaChangePolicy) -> TablePipeline:
    selection = None
    if "sources" in spec:  # semantic checked: no `source`, a `target`, patterns compile
        sources = spec["sources"]
        selection = TableSelection(tuple(sources["include"]), tuple(sources.get("exclude") or ()))
        parts: tuple[str, str] | None = ("", "")
    else:
        parts = split_source_name(spec["source"])
    assert parts is not None  # checked by semantic (R207) before build
    key = spec.get("key")
    metadata = spec.get("metadata", defaults.get("metadata", list(DEFAULT_METADATA)))
    return TablePipeline(
        source_database=parts[0],
        source_table=parts[1],
        target_table=spec.get("target"),
        key=tuple(key) if key else None,
        primary_key=tuple(spec["primary_key"]) if spec.get("primary_key") else None,
        deletes=spec.get("deletes", defaults.get("deletes", "hard")),
        on_error=spec.get("on_error", defaults.get("on_error", "fail")),
        columns=tuple(_column(name, column) for name, column in (spec.get("columns") or {}).items()),
        metadata=tuple(metadata),
        filter=spec.get("filter"),
        # A per-table override inherits what it does not set from the pipeline's batching.
        batching=_batching(spec["batching"], batching) if spec.get("batching") else None,
        mode=spec.get("mode", "merge"),
        log_table=bool(spec.get("log_table", False)),
        track_history=tuple(spec["track_history"]) if spec.get("track_history") else None,
        outbox=_outbox(spec["outbox"], defaults) if spec.get("outbox") else None,
        selection=selection,
        # A per-table override inherits the kinds it does not name from the pipeline's.
        schema_changes=_schema_changes(spec["schema_changes"], schema_changes)
        if spec.get("schema_changes") else None,
    )


def _on_error(spec: dict[str, Any], default: Any) -> Any:
    """`on_error: null` (YAML's null) and `on_error: "null"` both mean: load NULL."""
    if "on_error" not in spec:
        return default
    return spec["on_error"] or "null"


def _outbox(spec: dict[str, Any], defaults: dict[str, Any]) -> OutboxSpec:
    routes = []
    for type_value, route in spec["routes"].items():
        metadata = route.get("metadata", defaults.get("metadata", list(DEFAULT_METADATA)))
        routes.append(OutboxRoute(
            type_value=str(type_value),
            target_table=route["target"],
            key=tuple(route["key"]),
            columns=tuple(
                OutboxColumn(name=name, path=column.get("path"), type=column["type"],
                             on_error=_on_error(column, None), column=column.get("column"))
                for name, column in route["columns"].items()
            ),
            mode=route.get("mode", "merge"),
            # A pipeline-wide `deletes: soft` default means nothing to a changelog route.
            deletes=route.get("deletes", defaults.get("deletes", "hard")
                              if route.get("mode", "merge") == "merge" else "hard"),
            metadata=tuple(metadata),
            delete_when=route.get("delete_when"),
            on_error=_on_error(route, "fail"),
        ))
    return OutboxSpec(
        type_column=spec["type_column"],
        payload_column=spec["payload_column"],
        routes=tuple(routes),
        unrouted=spec.get("unrouted", "ignore"),
    )
