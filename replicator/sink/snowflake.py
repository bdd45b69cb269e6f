"""Snowflake target. The only module that imports snowflake.connector.

Connection parameters, strongest first: the YAML's explicit fields, the named connection in
``connections.toml`` (the connector's own file, ``~/.snowflake/connections.toml``), then
``SNOWFLAKE_*`` environment variables. Password, key-pair (``private_key_file`` + optional
passphrase) and token (OAuth / programmatic access token) authentication. The session says
who we are: ``application=replicator`` and a ``QUERY_TAG`` naming the pipeline, so every
query is findable in QUERY_HISTORY.

Per batch: create the TEMP staging table (DDL commits implicitly, so before anything else),
skip the batch if the state table has it, load staging with ``write_pandas`` (once per slice
for a big batch) and commit (the staging table is private to the session, so this commit
publishes nothing), then MERGE and
the state row in ONE transaction and COMMIT. The MERGE opens that transaction because
fakesnow cannot run a MERGE inside an explicit BEGIN (DESIGN.md); on Snowflake it is the
same transaction either way (``autocommit=False``). One session runs one batch at a time.
"""

from __future__ import annotations

import contextlib
import json
import os
import threading
import time
from collections.abc import Iterable, Mapping
from typing import TYPE_CHECKING, Any

from replicator import __version__
from replicator.errors import SinkError, TransientSinkError
from replicator.model.pipeline import SnowflakeTarget
from replicator.plan import statements
from replicator.plan.dialects import SNOWFLAKE
from replicator.plan.identifiers import quote_identifier
from replicator.plan.model import Plan, TablePlan
from replicator.sink import ApplyResult, slices_of, state_from_row

if TYPE_CHECKING:
    import pyarrow as pa

    from replicator.model.pipeline import Pipeline

# connect() parameter -> the environment variable that fills it when nothing else does.
ENVIRONMENT = {
    "account": "SNOWFLAKE_ACCOUNT",
    "user": "SNOWFLAKE_USER",
    "password": "SNOWFLAKE_PASSWORD",
    "role": "SNOWFLAKE_ROLE",
    "warehouse": "SNOWFLAKE_WAREHOUSE",
    "authenticator": "SNOWFLAKE_AUTHENTICATOR",
    "token": "SNOWFLAKE_TOKEN",
    "private_key_file": "SNOWFLAKE_PRIVATE_KEY_FILE",
    "private_key_file_pwd": "SNOWFLAKE_PRIVATE_KEY_FILE_PWD",
    "host": "SNOWFLAKE_HOST",
}
SECRETS = frozenset({"password", "token", "private_key_file_pwd", "private_key"})
# What proves who we are; taken together from one place (see connection_parameters).
CREDENTIALS = ("password", "token", "private_key_file")
APPLICATION = "replicator"


def query_tag(pipeline_name: str) -> str:
    return f"replicator:{pipeline_name}"


def connection_parameters(
    target: SnowflakeTarget,
    pipeline_name: str,
    *,
    named: Mapping[str, Any] | None = None,
    environ: Mapping[str, str] | None = None,
) -> dict[str, Any]:
    """The keyword arguments of ``snowflake.connector.connect`` (pure; holds secrets)."""
    environ = os.environ if environ is None else environ
    from_environment = {
        name: environ[variable] for name, variable in ENVIRONMENT.items() if environ.get(variable)
    }
    from_named = {k: v for k, v in (named or {}).items() if v not in (None, "")}
    explicit = {
        "account": target.account,
        "user": target.user,
        "role": target.role,
        "warehouse": target.warehouse,
        "authenticator": target.authenticator,
        "password": target.password,
        "token": target.token,
        "private_key_file": target.private_key_file,
        "private_key_file_pwd": target.private_key_file_pwd,
    }
    from_yaml = {k: v for k, v in explicit.items() if v not in (None, "")}
    layers = (from_environment, from_named, from_yaml)  # weakest first
    parameters: dict[str, Any] = {}
    for layer in layers:
        parameters.update(layer)
    # The credential comes whole from the strongest place that gives one: a password in the
    # YAML is not turned into OAuth by a SNOWFLAKE_TOKEN left in the shell, and a weaker
    # place's secret is not carried (or sent) along with it.
    # (An authenticator from a weaker place than that credential goes too.)
    with_credential = [i for i, layer in enumerate(layers) if any(k in layer for k in CREDENTIALS)]
    if with_credential:
        chosen = layers[with_credential[-1]]
        for name in CREDENTIALS:
            if name in chosen:
                parameters[name] = chosen[name]
            else:
                parameters.pop(name, None)
        if "private_key_file" not in chosen:
            parameters.pop("private_key_file_pwd", None)
        with_authenticator = [i for i, layer in enumerate(layers) if "authenticator" in layer]
        if with_authenticator and with_authenticator[-1] < with_credential[-1]:
            parameters.pop("authenticator")
    if "authenticator" not in parameters:
        if parameters.get("token"):
            parameters["authenticator"] = "oauth"
        elif parameters.get("private_key_file"):
            parameters["authenticator"] = "SNOWFLAKE_JWT"
    if not parameters.get("account"):
        raise SinkError(
            "no Snowflake account configured",
            hint="set target.snowflake.connection to a connection in "
            "~/.snowflake/connections.toml, or target.snowflake.account, or SNOWFLAKE_ACCOUNT",
        )
    session = dict(parameters.get("session_parameters") or {})
    session["QUERY_TAG"] = query_tag(pipeline_name)
    parameters.update(
        database=target.database,
        schema=target.schema,
        application=APPLICATION,
        session_parameters=session,
        # Server-side binding: values travel apart from the SQL text.
        paramstyle="qmark",
        autocommit=False,
        internal_application_name=APPLICATION,
        internal_application_version=__version__,
    )
    return parameters


def redacted(parameters: Mapping[str, Any]) -> dict[str, Any]:
    """Parameters safe to log."""
    return {k: ("***" if k in SECRETS else v) for k, v in parameters.items()}


def _named_connection(name: str | None) -> dict[str, Any] | None:
    if not name:
        return None
    from snowflake.connector.config_manager import CONFIG_MANAGER

    connections: Any
    try:
        connections = CONFIG_MANAGER["connections"]
    except Exception:  # no or unreadable connections.toml: the connector's own error types
        connections = {}
    if name in connections:
        return dict(connections[name])
    if name == "default":
        return None  # "default" is optional: env vars or explicit fields may be enough
    raise SinkError(
        f"no Snowflake connection named {name!r} in connections.toml",
        hint="add [" + name + "] to ~/.snowflake/connections.toml (or SNOWFLAKE_HOME), "
        "or set target.snowflake.connection to one that exists",
    )


def _sink_error(exc: Exception, doing: str) -> SinkError:
    """Sort connector errors: network and service hiccups are transient, the rest terminal."""
    from snowflake.connector import errors

    message = f"Snowflake failed to {doing}: {getattr(exc, 'msg', None) or exc}"
    if isinstance(exc, (errors.OperationalError, errors.InterfaceError)):
        return TransientSinkError(message, hint="retried with backoff")
    if isinstance(exc, errors.DatabaseError) and getattr(exc, "errno", None) in (
        250001, 251005, 390100, 390144, 390318,  # authentication / login failures
    ):
        return SinkError(message, hint="check the Snowflake user's credentials")
    if isinstance(exc, errors.ProgrammingError) and getattr(exc, "errno", None) in (2003, 3001):
        return SinkError(
            message,
            hint="grant the role USAGE on the database and schema and CREATE TABLE on the "
            "schema (or create the tables with the DDL from `replicator plan`)",
        )
    return SinkError(message, hint="run `replicator plan` to see the SQL it runs")


class SnowflakeSink:
    dialect = SNOWFLAKE

    def __init__(self, pipeline: Pipeline, plan: Plan, *, connection: Any = None) -> None:
        self.pipeline_name = pipeline.name
        self.plan = plan
        self._lock = threading.Lock()  # one transaction at a time per session
        # staging table -> the layout created in this session (skips the DDL round trip)
        self._staging_layouts: dict[str, tuple[Any, ...]] = {}
        if connection is not None:
            self._connection = connection
            return
        import snowflake.connector

        target = pipeline.target.warehouse
        if not isinstance(target, SnowflakeTarget):
            raise SinkError(f"pipeline {pipeline.name} does not target Snowflake")
        parameters = connection_parameters(
            target, pipeline.name, named=_named_connection(target.connection)
        )
        try:
            self._connection = snowflake.connector.connect(**parameters)
        except snowflake.connector.errors.Error as exc:
            raise _sink_error(exc, f"connect to account {parameters.get('account')!r}") from None

    def _execute(self, cursor: Any, sql: str, params: list[Any] | None = None) -> Any:
        return cursor.execute(sql, params) if params is not None else cursor.execute(sql)

    def prepare(self) -> None:
        from snowflake.connector import errors

        with self._lock:
            cursor = self._connection.cursor()
            try:
                for table in self.plan.tables:
                    cursor.execute(statements.create_target_table(table, self.dialect))
                    if table.log_table:
                        cursor.execute(statements.create_log_table(table, self.dialect))
                    cursor.execute(statements.create_state_table(table, self.dialect))
                    for sql in statements.add_columns(
                        table, self._missing_columns(cursor, table), self.dialect
                    ):
                        cursor.execute(sql)
                    if table.log_table:
                        missing = self._missing_columns(cursor, table, log=True)
                        for sql in statements.add_columns(table, missing, self.dialect, log=True):
                            cursor.execute(sql)
                self._connection.commit()
            except errors.Error as exc:
                raise _sink_error(exc, "create the target tables") from None
            finally:
                cursor.close()

    def _missing_columns(self, cursor: Any, table: TablePlan, *, log: bool = False):
        name = (statements.log_name if log else statements.target_name)(table, self.dialect)
        cursor.execute(f"SELECT * FROM {name} LIMIT 0")
        # build_plan rejects names that differ only by case, so a case-blind match is safe
        # (and fakesnow's identifiers are case-insensitive).
        existing = {str(d[0]).lower() for d in cursor.description}
        columns = table.log_columns if log else table.columns
        return [c for c in columns if c.target_column.lower() not in existing]

    def _ensure_staging(self, cursor: Any, table: TablePlan) -> None:
        """Create the session's TEMP staging table, or re-create it if the plan changed."""
        layout = tuple(statements.staging_columns(table))
        known = self._staging_layouts.get(table.staging_table)
        if known == layout:
            return
        cursor.execute(
            statements.create_staging_table(table, self.dialect, replace=known is not None)
        )
        self._staging_layouts[table.staging_table] = layout

    def apply(
        self, table: TablePlan, batch_id: int, end_offset: dict[str, Any],
        staged: pa.Table | Iterable[pa.Table],
    ) -> ApplyResult:
        from snowflake.connector import errors

        key = [self.pipeline_name, table.target_table, batch_id]
        rows = 0
        stage_seconds = 0.0
        with self._lock:
            cursor = self._connection.cursor()
            try:
                self._ensure_staging(cursor, table)
                if cursor.execute(statements.state_lookup(table, self.dialect), key).fetchone():
                    self._connection.rollback()
                    return ApplyResult(skipped=True, rows=0, seconds_stage=0.0, seconds_merge=0.0)
                cursor.execute(statements.clear_staging(table, self.dialect))
                # Slices are produced (decoded) between loads: only loading counts as staging.
                for piece in slices_of(staged):
                    started = time.perf_counter()
                    if piece.num_rows:
                        self._load_staging(table, piece)
                    rows += piece.num_rows
                    stage_seconds += time.perf_counter() - started
                self._connection.commit()
                staged_at = time.perf_counter()
                for _purpose, sql in statements.batch_statements(table, self.dialect):
                    cursor.execute(sql)
                cursor.execute(
                    statements.state_insert(table, self.dialect), [*key, json.dumps(end_offset)]
                )
                self._connection.commit()
                merged_at = time.perf_counter()
            except errors.Error as exc:
                with contextlib.suppress(errors.Error):  # a dead session took it along
                    self._connection.rollback()
                raise _sink_error(exc, f"apply batch {batch_id} to {table.target_table}") from None
            except BaseException:
                # A slice failed to decode: the target is untouched (staging is private to
                # the session and cleared by the next attempt).
                with contextlib.suppress(errors.Error):
                    self._connection.rollback()
                raise
            finally:
                cursor.close()
        return ApplyResult(
            skipped=False,
            rows=rows,
            seconds_stage=stage_seconds,
            seconds_merge=merged_at - staged_at,
        )

    def _load_staging(self, table: TablePlan, piece: pa.Table) -> None:
        """Append one slice to the session's staging table (write_pandas: a stage + COPY)."""
        import pandas as pd
        from snowflake.connector.pandas_tools import write_pandas

        # ArrowDtype keeps NULL ints NULL (not NaN) and decimals exact.
        frame = piece.to_pandas(types_mapper=pd.ArrowDtype)
        write_pandas(
            self._connection,
            frame,
            quote_identifier(table.staging_table),  # fakesnow wants it pre-quoted
            quote_identifiers=False,
            auto_create_table=False,
            use_logical_type=True,
        )

    def last_applied(self, table: TablePlan) -> dict[str, Any] | None:
        from snowflake.connector import errors

        with self._lock:
            cursor = self._connection.cursor()
            try:
                row = cursor.execute(
                    statements.state_latest(table, self.dialect),
                    [self.pipeline_name, table.target_table],
                ).fetchone()
                self._connection.rollback()  # end the read-only transaction
            except errors.ProgrammingError as exc:
                if getattr(exc, "errno", None) == 2003:  # no state table yet
                    return None
                raise _sink_error(exc, "read the state table") from None
            except errors.Error as exc:
                raise _sink_error(exc, "read the state table") from None
            finally:
                cursor.close()
        return state_from_row(row)

    @property
    def connection(self) -> Any:
        return self._connection

    def close(self) -> None:
        self._connection.close()
