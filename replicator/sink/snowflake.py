"""Snowflake target. The only module that imports snowflake.connector.

Connection parameters, strongest first: the YAML's explicit fields, the named connection in
``connections.toml`` (the connector's own file, ``~/.snowflake/connections.toml``), then
``SNOWFLAKE_*`` environment variables. Password, key-pair (``private_key_file`` + optional
passphrase) and token (OAuth / programmatic access token) authentication. The session says
who we are: ``application=replicator`` and a ``QUERY_TAG`` naming the pipeline, so every
query is findable in QUERY_HISTORY.

The batch program (``plan.program``, run by ``sink.sql.SQLSink``): skip the batch if the state
table has it, clear the TRANSIENT staging table (created by the setup), PUT the batch's
Parquet files to its table stage and COPY exactly those files in by column name, commit (the
load's transaction), then MERGE and the state row in ONE transaction and COMMIT. The MERGE
opens that transaction because fakesnow cannot run a MERGE inside an explicit BEGIN
(DESIGN.md); on Snowflake it is the same either way (``autocommit=False``). One session runs
one batch at a time. No ``write_pandas``: its own stage and ``COPY ... FROM (SELECT $1:...)``
were statements ``plan`` never showed (and that fakesnow's server cannot parse).
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from replicator import __version__
from replicator.errors import SinkError, TransientSinkError
from replicator.model.pipeline import IdentifierCase, SnowflakeTarget
from replicator.plan import program
from replicator.plan.dialects import SNOWFLAKE, pipeline_dialect
from replicator.plan.identifiers import target_identifier
from replicator.plan.model import Plan
from replicator.sink.sql import SQLSink

if TYPE_CHECKING:
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
# Ending what a killed run left open in its session (engine.state.lease).
SHOW_TRANSACTIONS = "SHOW TRANSACTIONS"
ABORT_TRANSACTION = "SELECT SYSTEM$ABORT_TRANSACTION(?)"


def query_tag(pipeline_name: str) -> str:
    return f"replicator:{pipeline_name}"


def connection_parameters(
    target: SnowflakeTarget,
    pipeline_name: str,
    *,
    named: Mapping[str, Any] | None = None,
    environ: Mapping[str, str] | None = None,
    identifier_case: IdentifierCase = "upper",
) -> dict[str, Any]:
    """The keyword arguments of ``snowflake.connector.connect`` (pure; holds secrets).

    The session's database and schema are named as the plan names them (folded by the
    identifier policy), so the session and every qualified statement mean the same schema.
    """
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
        database=target_identifier(target.database, identifier_case),
        schema=target_identifier(target.schema, identifier_case),
        application=APPLICATION,
        session_parameters=session,
        # Server-side binding: values travel apart from the SQL text.
        paramstyle="qmark",
        autocommit=False,
        # A Snowflake session ends after 4 hours without a query (a quiet source, a long
        # snapshot read); the connector's heartbeat keeps it. (A session lost anyway is
        # reopened by the sink: a transient error, the batch again.)
        client_session_keep_alive=True,
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


# Login failures (connector errno): never transient, whatever the exception's class.
_CREDENTIAL_ERRORS = frozenset({
    390100,  # incorrect username or password
    390144,  # JWT token invalid (key pair)
    390318, 390303,  # OAuth token expired / invalid
    251005,  # user is empty
})
_UNKNOWN_ACCOUNT_ERRORS = frozenset({540001})  # HTTP 403 at login: "verify the account name"
# The session is gone (the service restarted it away, it expired, HTTP 401): a new session
# and the same batch again can succeed. (Network drops the connector retries itself.)
_SESSION_GONE_ERRORS = frozenset({390104, 390111, 390112, 390114, 290401})
_CREDENTIALS_HINT = (
    "check the user and its password (or private key / token) of the Snowflake connection: "
    "the [connection] in connections.toml (SNOWFLAKE_HOME), target.snowflake, or "
    "SNOWFLAKE_USER / SNOWFLAKE_PASSWORD"
)
_ACCOUNT_HINT = (
    "check the account identifier (<orgname>-<account_name>, or the account locator with "
    "its region) in connections.toml or target.snowflake.account; Snowflake answers 403 "
    "for an account it does not know"
)


# Warehouse states and limits (https://docs.snowflake.com/en/user-guide/warehouses-tasks and
# .../resource-monitors): by error number where it is stable, by the message where Snowflake
# shares one number among several causes.
_NO_WAREHOUSE = 606  # "No active warehouse selected in the current session"
_STATEMENT_TIMEOUT = 630  # "Statement reached its statement or warehouse timeout"
_INTERNAL_ERRORS = frozenset({603, 625})  # internal processing error; too many lock waiters
_BAD_SQL_ERRORS = frozenset({1003, 904, 2040, 2043, 2262})  # syntax, identifier, types
_WAREHOUSE_HINT = (
    "give the connection a warehouse the role may use: target.snowflake.warehouse (or "
    "`warehouse` in connections.toml, or SNOWFLAKE_WAREHOUSE), and GRANT USAGE ON WAREHOUSE "
    "<name> TO ROLE <role>"
)


def _warehouse_error(exc: BaseException, message: str, errno: Any) -> SinkError | None:
    """A warehouse that is missing, suspended, over its quota, resizing or too busy."""
    text = str(getattr(exc, "msg", None) or exc).lower()
    if "resource monitor" in text or "quota" in text:
        return SinkError(
            message,
            hint="the warehouse's resource monitor has used its credit quota: an ACCOUNTADMIN "
            "raises it (ALTER RESOURCE MONITOR <name> SET CREDIT_QUOTA = ...) or the run waits "
            "for its reset; then run again",
        )
    if "suspended" in text:
        return SinkError(
            message,
            hint="the warehouse is suspended and does not resume itself: ALTER WAREHOUSE <name> "
            "RESUME, or ALTER WAREHOUSE <name> SET AUTO_RESUME = TRUE",
        )
    if errno == _NO_WAREHOUSE or "no active warehouse" in text:
        return SinkError(message, hint=_WAREHOUSE_HINT)
    if "resiz" in text or "resuming" in text or "provisioning" in text:
        return TransientSinkError(message, hint="the warehouse is resizing or resuming; "
                                  "retried with backoff")
    if errno == _STATEMENT_TIMEOUT or ("timeout" in text and "statement" in text):
        return TransientSinkError(
            message,
            hint="retried with backoff; if it repeats, the warehouse is too small or too busy "
            "for a batch: raise STATEMENT_TIMEOUT_IN_SECONDS / STATEMENT_QUEUED_TIMEOUT_IN_SECONDS "
            "of the warehouse or user, use a larger warehouse, or lower batching.max_rows",
        )
    return None


def _sink_error(exc: BaseException, doing: str) -> SinkError:
    """Sort connector errors: login problems name the setting to fix, warehouse states name
    theirs, network and service hiccups are transient (retried), the rest terminal. The
    connector's stack stays out."""
    from snowflake.connector import errors

    message = f"Snowflake failed to {doing}: {getattr(exc, 'msg', None) or exc}"
    errno = getattr(exc, "errno", None)
    warehouse = _warehouse_error(exc, message, errno)
    if warehouse is not None:
        return warehouse
    if errno in _INTERNAL_ERRORS:
        return TransientSinkError(message, hint="a Snowflake-side failure; retried with backoff")
    if errno in _BAD_SQL_ERRORS:
        return SinkError(
            message,
            hint="Snowflake refused SQL replicator generated: `replicator plan` shows it; "
            "report it with that output (a target table changed by hand can cause it too: "
            "compare it with the plan's CREATE TABLE)",
        )
    if errno in _CREDENTIAL_ERRORS:
        return SinkError(message, hint=_CREDENTIALS_HINT)
    if errno in _UNKNOWN_ACCOUNT_ERRORS or isinstance(exc, errors.ForbiddenError):
        return SinkError(message, hint=_ACCOUNT_HINT)
    if errno in _SESSION_GONE_ERRORS:
        return TransientSinkError(message, hint="the Snowflake session ended; the batch is "
                                  "retried on a new session")
    if isinstance(exc, (errors.OperationalError, errors.InterfaceError)):
        return TransientSinkError(message, hint="retried with backoff")
    if isinstance(exc, errors.ProgrammingError) and errno in (2003, 3001):
        return SinkError(
            message,
            hint="grant the role USAGE on the database and schema and CREATE TABLE on the "
            "schema (or create the tables with the DDL from `replicator plan`)",
        )
    return SinkError(message, hint="run `replicator plan` to see the SQL it runs")


class SnowflakeSink(SQLSink):
    """What Snowflake supplies to the one SQL sink: the connection (one session: one
    transaction at a time) and how the connector's errors sort."""

    dialect = SNOWFLAKE
    one_transaction_at_a_time = True

    def __init__(self, pipeline: Pipeline, plan: Plan, *, connection: Any = None) -> None:
        # With target.snowflake.stage the change files are COPYed from that external stage
        # over engine.landing (plan.statements.stage_copy), named relative to the landing.
        self.dialect = pipeline_dialect(pipeline)
        if self.dialect.external_stage:
            landing = pipeline.engine.landing or ""
            # A local landing zone as the executors resolve it (``engine.landing``).
            self.stage_root = landing if "://" in landing else os.path.abspath(landing)
        # Only a session this sink opened is re-opened after a transient error.
        self._pipeline = pipeline if connection is None else None
        if connection is None:
            connection = _connect(pipeline)
        super().__init__(pipeline.name, plan, connection)

    def reopen(self) -> Any:
        # A lost connection may have ended the session (its token, its transaction): the
        # retried batch starts on a new one. A failed login here is a SinkError again
        # (transient while the network is down), so the retry loop goes on.
        return _connect(self._pipeline) if self._pipeline is not None else None

    def driver_errors(self) -> tuple[type[BaseException], ...]:
        from snowflake.connector import errors

        return (errors.Error,)

    def sink_error(self, exc: BaseException, doing: str) -> SinkError:
        return _sink_error(exc, doing)

    @staticmethod
    def described_type(column: Any) -> str | None:
        """A cursor description row's type, for the fixed-point kind only (type code 0, with
        its precision and scale): the only kind the setup widens."""
        if getattr(column, "type_code", None) == 0 and column.precision is not None:
            return f"NUMBER({column.precision},{column.scale or 0})"
        return None

    def missing_table(self, exc: BaseException) -> bool:
        from snowflake.connector import errors

        return isinstance(exc, errors.ProgrammingError) and getattr(exc, "errno", None) == 2003

    def session_id(self) -> str | None:
        session = getattr(self._connection, "session_id", None)
        return None if session is None else str(session)

    def abort_in(self, cursor: Any, session: str) -> list[str]:
        """SHOW TRANSACTIONS lists this user's open transactions with their sessions;
        SYSTEM$ABORT_TRANSACTION rolls one back (its owner may, no other privilege needed)."""
        cursor.execute(SHOW_TRANSACTIONS)
        columns = [column[0].lower() for column in cursor.description]
        listed = [dict(zip(columns, row, strict=True)) for row in cursor.fetchall()]
        aborted = [str(row["id"]) for row in listed
                   if str(row.get("session")) == session and row["id"] is not None]
        for transaction in aborted:
            cursor.execute(ABORT_TRANSACTION, [int(transaction)])
        cursor.execute(program.ROLLBACK)  # end this session's own read
        return aborted


def _connect(pipeline: Pipeline) -> Any:
    import snowflake.connector

    target = pipeline.target.warehouse
    if not isinstance(target, SnowflakeTarget):
        raise SinkError(f"pipeline {pipeline.name} does not target Snowflake")
    parameters = connection_parameters(
        target, pipeline.name, named=_named_connection(target.connection),
        identifier_case=pipeline.target.identifier_case,
    )
    try:
        return snowflake.connector.connect(**parameters)
    except snowflake.connector.errors.Error as exc:
        raise _sink_error(exc, f"connect to account {parameters.get('account')!r}") from None


# Executor side (``engine.job.stage_put``): one connection per Python worker process and target,
# reused by its later tasks (a login per landed file would cost more than its PUT).
_EXECUTOR_CONNECTIONS: dict[tuple[SnowflakeTarget, str, str], Any] = {}


def put_from_executor(target: SnowflakeTarget, pipeline_name: str,
                      identifier_case: IdentifierCase, statements: list[str]) -> None:
    """Run PUT statements (``stage_copy.put_landed``) from an executor task. ``target``
    carries no secret: the credential comes from where the connector itself looks on the
    executor's host (the named connection in ``connections.toml``, ``SNOWFLAKE_*``
    variables, a private key file), as for the driver; none travels with the task."""
    import snowflake.connector

    key = (target, pipeline_name, identifier_case)
    connection = _EXECUTOR_CONNECTIONS.get(key)
    if connection is None or connection.is_closed():
        parameters = connection_parameters(target, pipeline_name,
                                           named=_named_connection(target.connection),
                                           identifier_case=identifier_case)
        try:
            connection = snowflake.connector.connect(**parameters)
        except snowflake.connector.errors.Error as exc:
            raise _sink_error(exc, f"connect to account {parameters.get('account')!r} from "
                              "an executor (to PUT landed files)") from None
        _EXECUTOR_CONNECTIONS[key] = connection
    cursor = connection.cursor()
    for sql in statements:
        try:
            cursor.execute(sql)
        except snowflake.connector.errors.Error as exc:
            _EXECUTOR_CONNECTIONS.pop(key, None)
            raise _sink_error(exc, "PUT a landed file to the stage") from None
