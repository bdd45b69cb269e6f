"""Connecting to MySQL, and turning driver errors into errors a user can act on.

Every failure leaves here as a ``SourceError`` whose hint names the fix (the GRANT, the
setting, the password variable), or as a ``TransientSourceError`` when a reconnect with
backoff can help (server restarting, network). The engine decides about retries; this module
only classifies.
"""

from __future__ import annotations

import dataclasses
import functools
from typing import TYPE_CHECKING, Any

from replicator.errors import BinlogGoneError, SourceError, TransientSourceError
from replicator.model.pipeline import MySQLSource

if TYPE_CHECKING:
    import ssl

    import pymysql

# MySQL/MariaDB error codes (https://mariadb.com/kb/en/mariadb-error-code-reference/).
ER_ACCESS_DENIED = 1045  # wrong user/password
ER_DBACCESS_DENIED = 1044
ER_BAD_DB = 1049
ER_TABLEACCESS_DENIED = 1142
ER_COLUMNACCESS_DENIED = 1143
ER_SPECIFIC_ACCESS_DENIED = 1227  # "you need (at least one of) the X privilege(s)"
ER_NO_SUCH_TABLE = 1146
ER_MASTER_FATAL_READING_BINLOG = 1236  # purged file, bad position, duplicate replica (MySQL)
ER_SLAVE_SAME_ID = 4052  # MariaDB: another replica connected with the same server_id
ER_SERVER_SHUTDOWN = 1053
ER_CON_COUNT = 1040
ER_LOCK_WAIT_TIMEOUT = 1205
ER_LOCK_DEADLOCK = 1213
ER_QUERY_INTERRUPTED = 1317
ER_CONNECTION_KILLED = 1927  # MariaDB
CR_CONNECTION_ERROR = 2002
CR_CONN_HOST_ERROR = 2003
CR_SERVER_GONE = 2006
CR_SERVER_LOST = 2013
CR_SSL_CONNECTION_ERROR = 2026  # PyMySQL: TLS required, the server does not offer it

TRANSIENT_CODES = frozenset(
    {
        ER_SERVER_SHUTDOWN, ER_CON_COUNT, ER_LOCK_WAIT_TIMEOUT, ER_LOCK_DEADLOCK,
        ER_QUERY_INTERRUPTED, ER_CONNECTION_KILLED, CR_CONNECTION_ERROR, CR_CONN_HOST_ERROR,
        CR_SERVER_GONE, CR_SERVER_LOST,
    }
)
PRIVILEGE_CODES = frozenset(
    {ER_DBACCESS_DENIED, ER_TABLEACCESS_DENIED, ER_COLUMNACCESS_DENIED, ER_SPECIFIC_ACCESS_DENIED}
)


def grant_statement(user: str = "replicator", host: str = "%", *, mariadb: bool | None = None) -> str:
    """The least-privilege GRANT replicator needs, in the flavour of the server.

    MariaDB >= 10.5 split BINLOG MONITOR (SHOW MASTER STATUS / SHOW BINARY LOGS) out of
    REPLICATION CLIENT; MySQL keeps REPLICATION CLIENT. ``mariadb=None``: both spelled out.
    """
    target = f"'{user}'@'{host}'"
    mysql = f"GRANT REPLICATION SLAVE, REPLICATION CLIENT, SELECT ON *.* TO {target};"
    maria = f"GRANT REPLICATION SLAVE, BINLOG MONITOR, SELECT ON *.* TO {target};"
    if mariadb is None:
        return f"{mysql}  (MariaDB 10.5+: {maria})"
    return maria if mariadb else mysql


def _where(source: MySQLSource) -> str:
    return f"{source.user}@{source.host}:{source.port}"


def classify_error(exc: BaseException, source: MySQLSource, *, doing: str,
                   server_id: int | None = None) -> SourceError:
    """A driver exception -> the SourceError subclass and hint a user can act on."""
    import pymysql

    if isinstance(exc, SourceError):
        return exc
    code = exc.args[0] if exc.args and isinstance(exc.args[0], int) else None
    text = str(exc.args[1]) if len(exc.args) > 1 else str(exc)
    where = _where(source)
    if code == ER_ACCESS_DENIED:
        return SourceError(
            f"MySQL refused the login of {where} while {doing}: {text}",
            hint="check source.mysql.user and the password (usually ${MYSQL_PASSWORD}); "
            f"the user needs: CREATE USER '{source.user}'@'%' IDENTIFIED BY '...'; "
            + grant_statement(source.user),
        )
    if code in PRIVILEGE_CODES:
        return SourceError(
            f"{where} lacks a privilege while {doing}: {text}",
            hint=grant_statement(source.user),
        )
    tls_error = _tls_error(exc, text, source, doing)
    if tls_error is not None:
        return tls_error
    if code == ER_BAD_DB:
        return SourceError(f"{doing}: {text}", hint="check the database name in `tables:`")
    lowered = text.lower()
    if code == ER_SLAVE_SAME_ID or "same server_uuid/server_id" in lowered or (
        "same server_id" in lowered
    ):
        return SourceError(
            f"another binlog reader connected with server_id {server_id} and MySQL dropped "
            f"this one ({text})",
            hint="give every pipeline (and every parallel reader) a distinct "
            "source.mysql.server_id; it must also differ from the server's own server_id "
            "and its replicas'",
        )
    if code == ER_MASTER_FATAL_READING_BINLOG and (
        "could not find first log file" in lowered or "purged" in lowered
        or "not find" in lowered
    ):
        return BinlogGoneError(
            f"the binlog to resume from is gone from the server ({text})",
            hint="the changes since the last checkpoint are lost to replication; re-snapshot "
            "with `replicator run PIPELINE.yaml --snapshot always`, and keep binlogs longer "
            "(binlog_expire_logs_seconds / expire_logs_days)",
        )
    if code in TRANSIENT_CODES or isinstance(exc, (ConnectionError, TimeoutError)) or (
        isinstance(exc, pymysql.err.OperationalError) and code is not None and code >= 2000
    ):
        return TransientSourceError(
            f"lost the MySQL connection to {where} while {doing}: {text}",
            hint="replicator retries with backoff; check that the server is up and reachable",
        )
    return SourceError(f"MySQL error while {doing} ({where}): {text}")


def _tls_error(exc: BaseException, text: str, source: MySQLSource,
               doing: str) -> SourceError | None:
    """A failed TLS handshake is not transient (retrying cannot make a certificate valid):
    a SourceError naming the setting that decides, or None when ``exc`` is no TLS failure."""
    import ssl

    where = _where(source)
    mode = source.tls_mode
    cause = exc.__cause__ or exc.__context__
    if isinstance(exc, ssl.SSLCertVerificationError) or isinstance(
        cause, ssl.SSLCertVerificationError
    ) or "CERTIFICATE_VERIFY_FAILED" in text:
        trusted = f"the CA in source.mysql.ssl_ca ({source.ssl_ca})" if source.ssl_ca \
            else "the system's trusted CAs"
        if "mismatch" in text.lower():
            return SourceError(
                f"the TLS certificate of {where} does not name the host {source.host!r} "
                f"(ssl_mode {mode}) while {doing}: {text}",
                hint="connect by the name the certificate was issued for (source.mysql.host), "
                "or set source.mysql.ssl_mode: VERIFY_CA to check the CA only",
            )
        return SourceError(
            f"the TLS certificate of {where} is not signed by {trusted} (ssl_mode {mode}) "
            f"while {doing}: {text}",
            hint="give the CA that signed the server's certificate in source.mysql.ssl_ca (the "
            "RDS bundle for Amazon RDS: https://truststore.pki.rds.amazonaws.com/global/"
            "global-bundle.pem), or ssl_mode: REQUIRED to encrypt without verifying",
        )
    code = exc.args[0] if exc.args and isinstance(exc.args[0], int) else None
    if code == CR_SSL_CONNECTION_ERROR or isinstance(exc, ssl.SSLError) or isinstance(
        cause, ssl.SSLError
    ):
        return SourceError(
            f"TLS with {where} failed (ssl_mode {mode}) while {doing}: {text}",
            hint="enable TLS on the server (ssl_cert/ssl_key in its my.cnf; SHOW VARIABLES "
            "LIKE 'have_ssl' says YES), or set source.mysql.ssl_mode: PREFERRED / DISABLED",
        )
    return None


def connection_settings(source: MySQLSource, *, database: str | None = None) -> dict[str, Any]:
    """Keyword arguments for ``pymysql.connect`` (also used by the binlog stream)."""
    settings: dict[str, Any] = {
        "host": source.host,
        "port": source.port,
        "user": source.user,
        "password": source.password or "",
        "charset": "utf8mb4",
        "connect_timeout": max(1, int(source.connect_timeout_s)),
        "autocommit": True,
    }
    if database:
        settings["database"] = database
    mode = source.tls_mode
    if mode == "DISABLED":
        # Without it PyMySQL builds an SSL context on every connect to offer TLS
        # (measured 0.13 s per connect under load).
        settings["ssl_disabled"] = True
    elif mode != "PREFERRED":  # PREFERRED: PyMySQL's own default, TLS only when offered
        # An SSLContext (not PyMySQL's dict) makes PyMySQL refuse a server without TLS, and
        # verifies exactly as the context says. (A dict like {"check_hostname": False}
        # without a CA makes PyMySQL encrypt WITHOUT verifying, which a man in the middle
        # passes.) The binlog streams and the snapshot connect with these settings too.
        settings["ssl"] = tls_context(source)
    return settings


def tls_context(source: MySQLSource) -> ssl.SSLContext:
    """The TLS context of ``source.tls_mode`` (not DISABLED/PREFERRED); SourceError naming
    the setting when a certificate file cannot be read."""
    import ssl

    try:
        return _tls_context(source.tls_mode, source.ssl_ca, source.ssl_cert, source.ssl_key)
    except (OSError, ssl.SSLError, ValueError) as exc:
        files = {"ssl_ca": source.ssl_ca, "ssl_cert": source.ssl_cert, "ssl_key": source.ssl_key}
        given = ", ".join(f"{key}: {value}" for key, value in files.items() if value)
        raise SourceError(
            f"cannot load the TLS files of source.mysql ({given}): {exc}",
            hint="each must be a readable PEM file: ssl_ca the CA certificate(s), ssl_cert the "
            "client certificate and ssl_key its unencrypted private key",
        ) from None


@functools.cache
def _tls_context(mode: str, ca: str | None, cert: str | None,
                 key: str | None) -> ssl.SSLContext:
    """One context per settings and process (loading the CA store is the costly part)."""
    import ssl

    if mode == "REQUIRED":  # encrypted, not verified (MySQL's REQUIRED)
        context = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
        context.check_hostname = False
        context.verify_mode = ssl.CERT_NONE
    else:
        # VERIFY_CA: the certificate chains to ``ca`` (or the system's CAs); VERIFY_IDENTITY:
        # and names the host we connect to.
        context = ssl.create_default_context(cafile=ca)
        context.check_hostname = mode == "VERIFY_IDENTITY"
        context.verify_mode = ssl.CERT_REQUIRED
    if cert:
        context.load_cert_chain(cert, key)
    return context


def connect(source: MySQLSource, *, database: str | None = None) -> pymysql.Connection:
    """An autocommit utf8mb4 connection; errors -> SourceError with hints."""
    import pymysql

    if several_hosts(source):
        source = pin_writer(source)
    try:
        return pymysql.connect(**connection_settings(source, database=database))
    except pymysql.err.MySQLError as exc:
        raise classify_error(exc, source, doing="connecting") from exc
    except OSError as exc:
        raise classify_error(exc, source, doing="connecting") from exc


def is_mariadb(connection: pymysql.Connection) -> bool:
    return "mariadb" in str(connection.get_server_info()).lower()


def server_variables(connection: pymysql.Connection, *names: str) -> dict[str, str]:
    """Global variables by (lower-case) name; absent ones are simply missing."""
    with connection.cursor() as cursor:
        # SHOW works on MySQL 5.7/8.x and MariaDB alike (information_schema.GLOBAL_VARIABLES
        # is gone from MySQL 8).
        cursor.execute("SHOW GLOBAL VARIABLES")
        wanted = {name.lower() for name in names}
        return {
            str(name).lower(): str(value)
            for name, value in cursor.fetchall()
            if not wanted or str(name).lower() in wanted
        }


# -- several hosts: follow the writer (source.gtid) -------------------------------------------


def candidates(source: MySQLSource) -> list[MySQLSource]:
    """``host: db1:3306,db2`` -> one source per host (the port defaults to source.port)."""
    result = []
    for item in source.host.split(","):
        item = item.strip()
        if not item:
            continue
        host, _, port = item.rpartition(":") if item.count(":") == 1 else (item, "", "")
        if not host:
            host, port = item, ""
        try:
            result.append(dataclasses.replace(source, host=host,
                                              port=int(port) if port else source.port))
        except ValueError:
            raise SourceError(f"source.mysql.host: not a host[:port]: {item!r}",
                              hint="list hosts comma-separated: host: db1:3306,db2:3306") from None
    return result


def several_hosts(source: MySQLSource) -> bool:
    return "," in source.host


def pin_writer(source: MySQLSource) -> MySQLSource:
    """The one writable server among ``source.host``'s list (itself when it names one)."""
    import pymysql

    if not several_hosts(source):
        return source
    seen = []
    for candidate in candidates(source):
        try:
            with connect(candidate) as connection, connection.cursor() as cursor:
                cursor.execute("SELECT @@GLOBAL.read_only")
                row = cursor.fetchone()
        except (SourceError, pymysql.err.MySQLError) as exc:
            seen.append(f"{candidate.host}:{candidate.port} ({_short(exc)})")
            continue
        if row and not int(row[0]):
            return candidate
        seen.append(f"{candidate.host}:{candidate.port} (read_only)")
    raise TransientSourceError(
        f"no writable server among source.mysql.host: {'; '.join(seen)}",
        hint="replicator waits for one to be promoted (SET GLOBAL read_only = 0 on the new "
        "primary); check source.mysql.host lists it",
    )


def _short(exc: BaseException) -> str:
    text = getattr(exc, "message", None) or str(exc)
    return text.split(":", 1)[0] if len(text) > 80 else text
