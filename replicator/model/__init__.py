"""The pipeline model: frozen values built from a validated YAML file.

Everything downstream (plan, engine, source, sink) reads these and nothing else from the
configuration. See ``pipeline.py`` for the pipeline and ``changes.py`` for change events and
binlog positions (the contract between source, engine and sink).
"""

from replicator.model.changes import BinlogPosition, ChangeEvent, Op
from replicator.model.pipeline import (
    DEFAULT_METADATA,
    METADATA_COLUMNS,
    BatchPolicy,
    ColumnMapping,
    DuckDBTarget,
    EngineConfig,
    MySQLSource,
    Pipeline,
    SnowflakeTarget,
    StartPosition,
    TablePipeline,
    TargetConfig,
    derive_server_id,
)

__all__ = [
    "DEFAULT_METADATA",
    "METADATA_COLUMNS",
    "BatchPolicy",
    "BinlogPosition",
    "ChangeEvent",
    "ColumnMapping",
    "DuckDBTarget",
    "EngineConfig",
    "MySQLSource",
    "Op",
    "Pipeline",
    "SnowflakeTarget",
    "StartPosition",
    "TablePipeline",
    "TargetConfig",
    "derive_server_id",
]
