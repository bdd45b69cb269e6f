"""A throwaway MariaDB server for tests, the quickstart and the benchmark.

Debian's ``mariadb-server`` runs as an unprivileged-looking local instance: its own datadir
in a temporary directory, a free TCP port on 127.0.0.1, a unix socket for root, and the
binlog configured the way replicator needs it (ROW, FULL row image, FULL row metadata).

Initialising a datadir (``mariadb-install-db``) takes ~1 s, so it is done once per machine
into a cached *template* that every server copies; a start is then a copy plus the server's
own start-up (~0.2 s measured).

The ``replicator`` user gets the least privileges the tool needs: REPLICATION SLAVE to
stream the binlog, BINLOG MONITOR (MariaDB's name for what MySQL calls REPLICATION CLIENT)
for SHOW MASTER STATUS / SHOW BINARY LOGS, SELECT for the catalog and the snapshot.
"""

from __future__ import annotations

import atexit
import contextlib
import fcntl
import hashlib
import os
import shutil
import socket
import subprocess
import sys
import tempfile
import time
import weakref
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from replicator.errors import SourceError
from replicator.model.pipeline import MySQLSource

if TYPE_CHECKING:
    import pymysql

REPLICATOR_USER = "replicator"
REPLICATOR_PASSWORD = "replicator-test-password"  # a throwaway server on 127.0.0.1 only
REPLICATOR_GRANTS = "REPLICATION SLAVE, BINLOG MONITOR, SELECT"

START_TIMEOUT_S = 30.0
STOP_TIMEOUT_S = 15.0
# A small redo log keeps the template (and every copy of it) small; set at install time and
# at every start so the server never has to resize it.
_INNODB_LOG_FILE_SIZE = "16M"

_SERVER_NAMES = ("mariadbd", "mysqld")
_INSTALL_NAMES = ("mariadb-install-db", "mysql_install_db")
_SEARCH_DIRS = ("/usr/sbin", "/usr/bin", "/usr/local/sbin", "/usr/local/bin", "/usr/libexec")

# Servers still running when the interpreter exits are stopped (a crashed test run must not
# leave mariadbd processes behind).
_RUNNING: weakref.WeakSet[ThrowawayMariaDB] = weakref.WeakSet()


@atexit.register
def _stop_leftovers() -> None:
    for server in list(_RUNNING):
        with contextlib.suppress(Exception):
            server.stop()


def _find(names: Sequence[str]) -> str | None:
    for name in names:
        found = shutil.which(name)
        if found:
            return found
        for directory in _SEARCH_DIRS:
            candidate = os.path.join(directory, name)
            if os.access(candidate, os.X_OK):
                return candidate
    return None


def _install_mariadb_server() -> None:
    """Install Debian's mariadb-server (only possible as root; otherwise say how)."""
    if os.geteuid() != 0 or not shutil.which("apt-get"):
        raise SourceError(
            "MariaDB server (mariadbd) is not installed",
            hint="sudo apt-get install -y mariadb-server   (or run scripts/bootstrap)",
        )
    env = {**os.environ, "DEBIAN_FRONTEND": "noninteractive"}
    subprocess.run(["apt-get", "update", "-qq"], check=True, env=env)
    subprocess.run(
        ["apt-get", "install", "-y", "-qq", "--no-install-recommends", "mariadb-server"],
        check=True,
        env=env,
    )


def server_binaries() -> tuple[str, str]:
    """(mariadbd, mariadb-install-db) paths, installing Debian's package when missing."""
    server, install = _find(_SERVER_NAMES), _find(_INSTALL_NAMES)
    if not server or not install:
        _install_mariadb_server()
        server, install = _find(_SERVER_NAMES), _find(_INSTALL_NAMES)
    if not server or not install:
        raise SourceError(
            "mariadbd or mariadb-install-db not found after installing mariadb-server",
            hint="check that /usr/sbin is on PATH",
        )
    return server, install


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def _cache_dir() -> Path:
    configured = os.environ.get("REPLICATOR_MARIADB_CACHE")
    if configured:
        return Path(configured)
    return Path(tempfile.gettempdir()) / f"replicator-mariadb-cache-{os.geteuid()}"


def _root_args() -> list[str]:
    # mariadbd refuses to run as root unless told to; as another user it runs as that user.
    return ["--user=root"] if os.geteuid() == 0 else []


def template_datadir(server: str, install: str) -> Path:
    """An initialised datadir for this server version, created once per machine and user.

    Created under a lock into a scratch directory and renamed into place, so parallel test
    sessions never see a half-written template.
    """
    version = subprocess.run(
        [server, "--version"], check=True, capture_output=True, text=True
    ).stdout.strip()
    digest = hashlib.sha256(f"{version}|{_INNODB_LOG_FILE_SIZE}".encode()).hexdigest()[:12]
    cache = _cache_dir()
    cache.mkdir(parents=True, exist_ok=True)
    template = cache / f"template-{digest}"
    if template.is_dir():
        return template
    with open(cache / ".lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if template.is_dir():
            return template
        scratch = Path(tempfile.mkdtemp(prefix="template-", dir=cache))
        datadir = scratch / "data"
        result = subprocess.run(
            [
                install,
                "--no-defaults",
                "--auth-root-authentication-method=normal",
                f"--datadir={datadir}",
                "--skip-test-db",
                *_root_args(),
                f"--innodb-log-file-size={_INNODB_LOG_FILE_SIZE}",
            ],
            capture_output=True,
            text=True,
        )
        if result.returncode != 0:
            shutil.rmtree(scratch, ignore_errors=True)
            raise SourceError(
                f"mariadb-install-db failed (exit {result.returncode}): "
                + (result.stderr or result.stdout).strip()[-2000:],
                hint="run scripts/bootstrap to (re)install mariadb-server",
            )
        datadir.rename(template)
        shutil.rmtree(scratch, ignore_errors=True)
    return template


class ThrowawayMariaDB:
    """A MariaDB server in a temporary directory; a context manager.

    ``datadir`` given: the server uses (and keeps) that directory, initialising it from the
    template when it is empty. ``extra_args`` come after the defaults, so they override them
    (``--binlog-format=STATEMENT``, ``--skip-log-bin``, ``--expire-logs-days=1``).
    """

    def __init__(
        self,
        *,
        port: int | None = None,
        datadir: str | None = None,
        server_id: int = 1,
        extra_args: Sequence[str] = (),
        workdir: str | None = None,
    ) -> None:
        self._requested_port = port
        # A given datadir or workdir belongs to the caller: kept on stop.
        self._keep_datadir = datadir is not None or workdir is not None
        self._requested_datadir = datadir
        self.server_id = server_id
        self.extra_args = tuple(extra_args)
        self.port: int = port or 0
        self.socket: str = ""
        self.datadir: str = datadir or ""
        self.workdir: str = workdir or ""
        self.start_seconds: float = 0.0  # how long the last start() took
        self._process: subprocess.Popen[bytes] | None = None

    # -- lifecycle -------------------------------------------------------------------------

    def start(self) -> ThrowawayMariaDB:
        if self._process is not None:
            return self
        started = time.monotonic()
        server, install = server_binaries()
        template = template_datadir(server, install)
        if not self.workdir:
            self.workdir = tempfile.mkdtemp(prefix="replicator-mariadb-")
        os.makedirs(self.workdir, exist_ok=True)
        if not self.datadir:
            self.datadir = os.path.join(self.workdir, "data")
        if not os.path.isdir(self.datadir) or not os.listdir(self.datadir):
            if os.path.isdir(self.datadir):
                os.rmdir(self.datadir)
            shutil.copytree(template, self.datadir, symlinks=True)
        # A unix socket path is limited to ~108 bytes: keep it in the short work dir.
        self.socket = os.path.join(self.workdir, "mysql.sock")
        self.port = self._requested_port or self.port or free_port()
        command = [
            server,
            "--no-defaults",
            f"--datadir={self.datadir}",
            f"--port={self.port}",
            f"--socket={self.socket}",
            f"--pid-file={os.path.join(self.workdir, 'mariadbd.pid')}",
            f"--log-error={self.error_log}",
            "--bind-address=127.0.0.1",
            "--log-bin=mysql-bin",
            "--binlog-format=ROW",
            "--binlog-row-image=FULL",
            "--binlog-row-metadata=FULL",
            f"--server-id={self.server_id}",
            "--character-set-server=utf8mb4",
            "--collation-server=utf8mb4_unicode_ci",
            "--skip-name-resolve",
            f"--innodb-log-file-size={_INNODB_LOG_FILE_SIZE}",
            "--innodb-buffer-pool-size=64M",
            # A test server: durability of the server itself is not under test.
            "--innodb-flush-log-at-trx-commit=2",
            "--performance-schema=OFF",
            *_root_args(),
            *self.extra_args,
        ]
        self._process = subprocess.Popen(
            command,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            start_new_session=True,  # Ctrl-C in the test runner must not kill it uncleanly
        )
        _RUNNING.add(self)
        try:
            self._wait_until_ready()
            self._create_replicator_user()
        except BaseException:
            self._kill()
            raise
        self.start_seconds = time.monotonic() - started
        return self

    def _wait_until_ready(self) -> None:
        import pymysql

        deadline = time.monotonic() + START_TIMEOUT_S
        while True:
            assert self._process is not None
            if self._process.poll() is not None:
                raise SourceError(
                    f"the throwaway MariaDB exited during start-up (exit {self._process.returncode}): "
                    + self._error_log_tail(),
                    hint=f"see {self.error_log}",
                )
            if os.path.exists(self.socket):
                try:
                    pymysql.connect(unix_socket=self.socket, user="root", connect_timeout=2).close()
                    return
                except pymysql.err.OperationalError:
                    pass
            if time.monotonic() > deadline:
                raise SourceError(
                    f"the throwaway MariaDB did not accept connections within {START_TIMEOUT_S:.0f} s: "
                    + self._error_log_tail(),
                    hint=f"see {self.error_log}",
                )
            time.sleep(0.02)

    def _create_replicator_user(self) -> None:
        with self.root_connection() as connection, connection.cursor() as cursor:
            cursor.execute(
                f"CREATE USER IF NOT EXISTS '{REPLICATOR_USER}'@'%%' IDENTIFIED BY %s",
                (REPLICATOR_PASSWORD,),
            )
            cursor.execute(f"GRANT {REPLICATOR_GRANTS} ON *.* TO '{REPLICATOR_USER}'@'%'")

    def stop(self) -> None:
        """Shut down cleanly (SQL SHUTDOWN), kill on timeout, remove the temporary files."""
        process = self._process
        if process is not None:
            if process.poll() is None:
                with (
                    contextlib.suppress(Exception),
                    self.root_connection() as connection,
                    connection.cursor() as cursor,
                ):
                    cursor.execute("SHUTDOWN")
                try:
                    process.wait(timeout=STOP_TIMEOUT_S)
                except subprocess.TimeoutExpired:
                    self._kill()
            self._process = None
        _RUNNING.discard(self)
        if self.workdir:
            if not self._keep_datadir:
                shutil.rmtree(self.workdir, ignore_errors=True)
            else:
                for leftover in ("mysql.sock", "mariadbd.pid"):
                    with contextlib.suppress(OSError):
                        os.unlink(os.path.join(self.workdir, leftover))
            if not self._keep_datadir:
                self.workdir = ""
                self.datadir = ""

    def restart(self) -> None:
        """Stop and start again on the same port and datadir (the binlog is kept)."""
        keep = self._keep_datadir
        self._keep_datadir = True
        try:
            self.stop()
        finally:
            self._keep_datadir = keep
        self._requested_port = self.port
        self.start()

    def detach(self) -> None:
        """Leave the server running after this process exits (``scripts/mariadb start``)."""
        _RUNNING.discard(self)
        self._process = None

    def _kill(self) -> None:
        if self._process is not None and self._process.poll() is None:
            self._process.kill()
            self._process.wait(timeout=STOP_TIMEOUT_S)

    @property
    def running(self) -> bool:
        return self._process is not None and self._process.poll() is None

    @property
    def pid(self) -> int | None:
        return self._process.pid if self._process is not None else None

    @property
    def error_log(self) -> str:
        return os.path.join(self.workdir, "mariadbd.err")

    def _error_log_tail(self, lines: int = 8) -> str:
        try:
            return " | ".join(Path(self.error_log).read_text(errors="replace").splitlines()[-lines:])
        except OSError:
            return "(no error log)"

    def __enter__(self) -> ThrowawayMariaDB:
        return self.start()

    def __exit__(self, *exc: Any) -> None:
        self.stop()

    # -- connections -----------------------------------------------------------------------

    def root_connection(self, database: str | None = None) -> pymysql.Connection:
        """A root connection over the unix socket, autocommit, utf8mb4."""
        import pymysql

        return pymysql.connect(
            unix_socket=self.socket,
            user="root",
            database=database,
            charset="utf8mb4",
            autocommit=True,
        )

    def source(self, **overrides: Any) -> MySQLSource:
        """The pipeline source for the least-privileged ``replicator`` user."""
        fields: dict[str, Any] = {
            "host": "127.0.0.1",
            "port": self.port,
            "user": REPLICATOR_USER,
            "password": REPLICATOR_PASSWORD,
        }
        fields.update(overrides)
        return MySQLSource(**fields)

    def environment(self) -> dict[str, str]:
        """Connection settings as environment variables (for humans and the quickstart)."""
        return {
            "MYSQL_HOST": "127.0.0.1",
            "MYSQL_PORT": str(self.port),
            "MYSQL_USER": REPLICATOR_USER,
            "MYSQL_PASSWORD": REPLICATOR_PASSWORD,
            "MYSQL_SOCKET": self.socket,
        }


# -- scripts/mariadb: a long-lived local server for humans ---------------------------------


def _state_dir() -> Path:
    return Path(os.environ.get("REPLICATOR_MARIADB_DIR", ".replicator/mariadb")).resolve()


def _print_environment(environment: dict[str, str]) -> None:
    for name, value in environment.items():
        print(f"export {name}={value}")


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except OSError:
        return False
    return True


def main(argv: Sequence[str] | None = None) -> int:
    """``start [--port N]`` | ``stop`` | ``status``: one server kept in .replicator/mariadb."""
    import argparse
    import json

    parser = argparse.ArgumentParser(prog="scripts/mariadb", description=main.__doc__)
    parser.add_argument("action", choices=["start", "stop", "status"])
    parser.add_argument("--port", type=int, default=None, help="default: 3306 if free")
    args = parser.parse_args(argv)
    state_dir = _state_dir()
    state_file = state_dir / "state.json"
    state = json.loads(state_file.read_text()) if state_file.exists() else None
    if state is not None and not _alive(int(state["pid"])):
        state = None  # not running
    if args.action == "status":
        return _status(state, state_dir)
    if args.action == "start":
        return _start(state, state_dir, state_file, args.port)
    return _stop(state, state_dir, state_file)


def _status(state: dict[str, Any] | None, state_dir: Path) -> int:
    if state is None:
        print("mariadb: not running")
        return 1
    print(
        f"mariadb: running, pid {state['pid']}, port {state['port']}, dir {state_dir}",
        file=sys.stderr,
    )
    _print_environment(state["environment"])
    return 0


def _start(state: dict[str, Any] | None, state_dir: Path, state_file: Path,
           port: int | None) -> int:
    import json

    if state is not None:
        print(f"mariadb: already running on port {state['port']}", file=sys.stderr)
        _print_environment(state["environment"])
        return 0
    if port is None:
        try:
            with socket.socket() as probe:
                probe.bind(("127.0.0.1", 3306))
            port = 3306
        except OSError:
            port = free_port()
    server = ThrowawayMariaDB(
        port=port, workdir=str(state_dir), datadir=str(state_dir / "data")
    ).start()
    state_file.write_text(
        json.dumps({"pid": server.pid, "port": server.port, "environment": server.environment()})
    )
    print(
        f"mariadb: started in {server.start_seconds:.2f} s, port {server.port}, dir {state_dir}",
        file=sys.stderr,
    )
    _print_environment(server.environment())
    server.detach()
    return 0


def _stop(state: dict[str, Any] | None, state_dir: Path, state_file: Path) -> int:
    import signal

    if state is None:
        print("mariadb: not running")
        return 0
    pid = int(state["pid"])
    with contextlib.suppress(Exception):
        import pymysql

        with pymysql.connect(unix_socket=state["environment"]["MYSQL_SOCKET"], user="root") as c:
            c.cursor().execute("SHUTDOWN")
    deadline = time.monotonic() + STOP_TIMEOUT_S
    while _alive(pid) and time.monotonic() < deadline:
        time.sleep(0.05)
    if _alive(pid):
        os.kill(pid, signal.SIGKILL)
    state_file.unlink(missing_ok=True)
    print(f"mariadb: stopped (data kept in {state_dir / 'data'}; delete it for a fresh server)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
