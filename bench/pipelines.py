"""Pipeline YAML files for the benchmark's runs, written like a user would write them.

Every column declares its ``source_type`` so the same file also serves ``plan --offline``.
Connection settings come from the environment (``${MYSQL_PORT}`` ...), the way the example
pipelines do it, so no password is written into a file.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from bench.tables import TABLES, TableSpec
from replicator.model.changes import BinlogPosition

SNOWFLAKE_DATABASE = "BENCH"
SNOWFLAKE_SCHEMA = "RAW"


def _quote(value: str) -> str:
    return json.dumps(value, ensure_ascii=False)  # a JSON string is a valid YAML scalar


def pipeline_yaml(
    *,
    name: str,
    database: str,
    tables: Sequence[TableSpec] = TABLES,
    target: str,  # duckdb | snowflake
    workdir: Path,
    start: BinlogPosition | str,  # a position, or "initial" / "latest"
    server_id: int,
    max_rows: int = 50_000,
    max_delay: str = "10s",
    engine_conf: Mapping[str, str] | None = None,
    duckdb_settings: Mapping[str, str] | None = None,  # target.duckdb.settings
    decode_partitions: int | str = "auto",  # "auto": the product's default (not written)
    mode: str = "merge",
    also: Sequence[tuple[str, TableSpec]] = (),  # (database, table) of other databases
    atomic: bool | None = None,  # target.atomic (None: the default)
    row_filter: str | None = None,  # every table's `filter:` (Spark SQL)
    transforms: Mapping[str, Mapping[str, Any]] | None = None,  # table name -> its transforms
    stage: str | None = None,  # target.snowflake.stage, over a local engine.landing of its own
    landing: str | None = None,  # engine.landing instead (an object store's, for an external stage)
) -> str:
    """``transforms``: per table, ``filter`` (Spark SQL), ``masks`` (column -> the YAML of
    its ``mask:``) and ``computed`` (name -> (expression, type)), as a user writes them."""
    if isinstance(start, BinlogPosition):
        start_text = f"{{file: {start.file}, pos: {start.pos}}}"
    else:
        start_text = start
    if target == "duckdb":
        settings = ", ".join(f"{k}: {_quote(v)}" for k, v in (duckdb_settings or {}).items())
        target_text = (f"  duckdb: {{path: {_quote(str(workdir / f'{name}.duckdb'))}"
                       + (f", settings: {{{settings}}}" if settings else "") + "}")
    elif target == "snowflake":
        # The [fakesnow] connection of the connections.toml bench.fakesnow_run writes.
        target_text = (
            f"  snowflake: {{connection: fakesnow, "
            f"database: {SNOWFLAKE_DATABASE}, schema: {SNOWFLAKE_SCHEMA}"
            + (f", stage: {stage}" if stage else "") + "}"
        )
    else:
        raise ValueError(f"unknown target {target!r}")
    lines = [
        "# Written by bench/run: one benchmark run (see bench/README.md).",
        "version: 1",
        f"name: {name}",
        "source:",
        "  mysql:",
        "    host: ${MYSQL_HOST:-127.0.0.1}",
        "    port: ${MYSQL_PORT}",
        "    user: ${MYSQL_USER:-replicator}",
        "    password: ${MYSQL_PASSWORD}",
        f"    server_id: {server_id}",
        f"    start: {start_text}",
        "target:",
        target_text,
        *([f"  atomic: {str(atomic).lower()}"] if atomic is not None else []),
        f"batching: {{max_rows: {max_rows}, max_delay: {max_delay}}}",
        "engine:",
        f"  checkpoint: {_quote(str(workdir / f'{name}.checkpoint'))}",
        *([f"  landing: {_quote(landing or str(workdir / f'{name}.landing'))}"]
          if stage or landing else []),
        *([] if decode_partitions == "auto" else [f"  decode_partitions: {int(decode_partitions)}"]),
    ]
    if engine_conf:
        lines.append("  conf:")
        lines.extend(f"    {_quote(k)}: {_quote(v)}" for k, v in engine_conf.items())
    lines.append("tables:")
    for table_database, spec in [*((database, spec) for spec in tables), *also]:
        lines.append(f"  - source: {table_database}.{spec.name}")
        if table_database != database:  # another database's table of the same name
            lines.append(f"    target: {_quote(f'{table_database}_{spec.name}'.upper())}")
        lines.append(f"    key: [{spec.key}]")
        if mode != "merge":
            lines.append(f"    mode: {mode}")
        own = (transforms or {}).get(spec.name, {}) if table_database == database else {}
        table_filter = own.get("filter", row_filter)
        if table_filter is not None:
            lines.append(f"    filter: {_quote(table_filter)}")
        lines.append("    columns:")
        masks = own.get("masks", {})
        for column, mysql_type in spec.columns:
            mask = f", mask: {masks[column]}" if column in masks else ""
            lines.append(f"      {column}: {{source_type: {_quote(mysql_type)}{mask}}}")
        for column, (expression, target_type) in own.get("computed", {}).items():
            lines.append(f"      {column}: {{expression: {_quote(expression)}, "
                         f"type: {_quote(target_type)}}}")
    return "\n".join(lines) + "\n"


def write_pipeline(path: Path, **settings: Any) -> Path:
    path.write_text(pipeline_yaml(workdir=path.parent, **settings))
    return path
