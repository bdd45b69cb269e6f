"""Starting the Spark session a pipeline runs in: local by default, any master by URL.

Two measured pitfalls of Python tasks decide the environment set here, before the JVM starts
(it inherits the environment once, at launch):

- a task's Python worker, started by the JVM, unpickles our task functions by module path
  (``engine.job.binlog_batches``, ``engine.snapshot``), so ``replicator`` must be on its
  ``PYTHONPATH`` (an editable install is not enough when the code is run from a checkout);
- executors run the tasks in Python workers started with ``PYSPARK_PYTHON``: it must be an
  interpreter that has replicator and its dependencies. Locally that is this interpreter.
"""

from __future__ import annotations

import contextlib
import os
import subprocess
import sys
import threading
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Any

import replicator
from replicator.engine.job import class_sharing, python_workers

if TYPE_CHECKING:
    from pyspark import SparkContext
    from pyspark.sql import SparkSession

# Arrow's allocator in every process of a run (read by pyarrow once, when it is imported).
# pyarrow's default, mimalloc, keeps freed pages: measured on the 1M-row transaction, the
# driver's apply peaked ~150 MiB higher with it and the decode worker ~40 MiB higher, at the
# same speed (decode 7.1-7.2 s vs 7.4-9.9 s, apply 3.0 vs 3.1 s; bench/README.md, session 7).
ARROW_POOL_ENV = "ARROW_DEFAULT_MEMORY_POOL"
ARROW_POOL = "system"


def prefer_system_allocator() -> None:
    """Arrow allocates with the C library's malloc in this process, if pyarrow is not
    imported yet, and in the processes it starts (Spark's Python workers inherit it); a
    user's own ``ARROW_DEFAULT_MEMORY_POOL`` wins."""
    os.environ.setdefault(ARROW_POOL_ENV, ARROW_POOL)


# Small shuffles: a micro-batch is thousands to a few hundred thousand rows, not terabytes.
DEFAULT_CONF: Mapping[str, str] = {
    "spark.ui.enabled": "false",
    "spark.ui.showConsoleProgress": "false",
    "spark.sql.shuffle.partitions": "4",
    "spark.sql.execution.arrow.pyspark.enabled": "true",
    # Python workers are reused between tasks, so the per-task import cost is paid once.
    "spark.python.worker.reuse": "true",
    # Whatever Hadoop's local file system creates: user-only. It chmods what it creates to
    # 0666/0777 minus *this* umask (default 022), not the process's.
    "spark.hadoop.fs.permissions.umask-mode": "077",
}

def package_root() -> str:
    """The directory that holds the ``replicator`` package (for PYTHONPATH)."""
    return str(Path(replicator.__file__).resolve().parent.parent)


LOG4J_CONFIG = Path(__file__).with_name("log4j2.properties")

# Where the JVM's own stdout/stderr go when this process starts it (``route_jvm_output``):
# None keeps them on the terminal (tests, embedding); ``replicator run`` sets a file.
_jvm_output: Path | None = None


def route_jvm_output(path: Path | None) -> None:
    """Send the output of the JVM this process starts next to ``path`` (appended).

    The JVM writes start-up chatter straight to the file descriptors it inherits, before any
    log4j setting applies (``WARNING: Using incubator modules``, Spark's ``Setting default log
    level``), and so do the Python workers it forks. Users read those lines as "something is
    wrong", so ``replicator run`` gives the JVM a log file in the checkpoint directory
    instead of its own stderr; errors reach the user as replicator's translated error line.
    A JVM already running in this process (a test's session) keeps its output where it is.
    """
    global _jvm_output
    _jvm_output = path


# A run that ends once caught up (`--until-caught-up`: a scheduled job, a backfill) lives for
# seconds to minutes, and the JVM's C2 compiler costs more CPU in that time than its faster
# code saves: the C1 compiler alone. Measured on the 2-core machine (session 8, A/B, one run
# each: `bench/run --only e2e --changes 100000`): 9.2 s wall instead of 9.9 s, the JVM's CPU
# 4.7 s instead of 8.5 s; a 60 s stream at 1k changes/s (`--only latency`, twice each) had the
# same latency (p50 0.78-0.80 s vs 0.80-0.81 s) with 11 s of JVM CPU instead of 20 s. A stream
# that runs for days keeps the JVM's default, where C2's code pays back its compilation.
# Through JDK_JAVA_OPTIONS, so a user's own setting of it wins.
BOUNDED_JAVA_OPTIONS = "-XX:TieredStopAtLevel=1"


def prepare_environment(master: str = "local[*]", *, bounded: bool = False) -> None:
    """Make the package importable by Spark's Python processes (see the module docstring),
    keep Spark's log chatter out of the run's output, and keep a local driver on 127.0.0.1.
    ``bounded``: a run that ends once caught up starts its local JVM with
    ``BOUNDED_JAVA_OPTIONS``."""
    if "PYSPARK_SUBMIT_ARGS" not in os.environ and LOG4J_CONFIG.exists():
        # Read by the launcher before the JVM starts (builder settings come too late). The
        # driver JVM maps Spark's classes from an archive when there is one, and a run
        # (whose JVM output this process routes) records one (class_sharing).
        options = [f"-Dlog4j.configurationFile=file:{LOG4J_CONFIG}",
                   *class_sharing.java_options(record=_jvm_output is not None)]
        os.environ["PYSPARK_SUBMIT_ARGS"] = (
            f'--driver-java-options "{" ".join(options)}" pyspark-shell'
        )
    if master.startswith("local"):
        os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
        if bounded:
            os.environ.setdefault("JDK_JAVA_OPTIONS", BOUNDED_JAVA_OPTIONS)
        prefer_system_allocator()  # the JVM's Python processes inherit it
    root = package_root()
    paths = [p for p in os.environ.get("PYTHONPATH", "").split(os.pathsep) if p]
    if root not in paths:
        os.environ["PYTHONPATH"] = os.pathsep.join([root, *paths])
    # The JVM starts the executors' workers with PYSPARK_PYTHON, and any driver-side Python
    # process of its own with PYSPARK_DRIVER_PYTHON.
    python = python_workers.worker_python(master) or sys.executable
    os.environ.setdefault("PYSPARK_PYTHON", python)
    os.environ.setdefault("PYSPARK_DRIVER_PYTHON", python)


def spark_session(
    master: str = "local[*]",
    conf: Mapping[str, str] | None = None,
    *,
    app_name: str = "replicator",
    log_level: str = "ERROR",
    bounded: bool = False,
) -> SparkSession:
    """A Spark session for a pipeline; ``conf`` entries override the defaults. ``bounded``:
    the run ends once caught up (``BOUNDED_JAVA_OPTIONS``)."""
    return SessionStart(master, conf, app_name=app_name, log_level=log_level,
                        bounded=bounded).session()


class SessionStart:
    """``spark_session``, starting in a thread of its own while the driver does the rest of
    its start-up.

    Starting the JVM and Spark takes seconds (2.3-2.5 s measured on the 2-core machine, C1 only),
    and so does the driver's own start-up on a remote warehouse: the login and the setup's DDL
    round trips (1.3 s against the local fakesnow server; Snowflake's own latency is larger).
    Neither needs the other until the stream starts. ``session()`` waits for the session and
    raises what starting it raised. A run that fails before asking leaves the thread to
    finish; the JVM ends with the process (it exits when its stdin, our pipe, closes).

    ``sql=False`` starts the SparkContext alone: RDD jobs (the snapshot's chunk reads, the
    stream's decode tasks) need no Spark SQL, and its session costs the JVM ~1.1 s of CPU and the
    start 1.4-2.9 s of wall on the 2-core machine at load 5-6
    (docs/decisions/spark-context-and-warm-workers.md).
    ``context()`` is then ready that much sooner; ``session()`` still works, building the
    session on that context when first asked.

    ``warm`` (local masters): once the context is up, a job of one empty task per core starts
    Spark's Python daemon and forks its workers while the driver finishes its own start-up
    (the sink's setup, the lease, the stream's first cut), so the first real job finds them
    running. The daemon imports the decode stack before it forks (``python_daemon``): ~1 s of
    a run's first job on the 2-core machine otherwise."""

    def __init__(self, master: str = "local[*]", conf: Mapping[str, str] | None = None, *,
                 app_name: str = "replicator", log_level: str = "ERROR",
                 bounded: bool = False, sql: bool = True, warm: bool = False) -> None:
        # The environment the JVM inherits is set here, before any other thread may start
        # processes, and the JVM output's destination is read now (``route_jvm_output``).
        prepare_environment(master, bounded=bounded)
        self._settings = {**DEFAULT_CONF, **python_workers.worker_conf(master), **(conf or {})}
        self._context: SparkContext | None = None
        self._session: SparkSession | None = None
        self._error: BaseException | None = None
        self._asked = threading.Lock()  # one session, however many threads ask
        self._ready = threading.Event()  # the context is up (or failed): the warm-up may run on
        warm = warm and master.startswith("local")
        self._thread = threading.Thread(
            target=self._start, args=(master, app_name, log_level, _jvm_output, sql, warm),
            name="replicator-spark-start", daemon=True)
        self._thread.start()

    def _start(self, master: str, app_name: str, log_level: str, output: Path | None,
               sql: bool, warm: bool) -> None:
        try:
            self._context = _context(master, self._settings, app_name, log_level, output)
            if sql:
                self._session = _session(self._context, self._settings)
        except BaseException as exc:  # raised again in the thread that asks for the session
            self._error = exc
            return
        finally:
            self._ready.set()
        if warm:
            _warm_workers(self._context)

    def context(self) -> SparkContext:
        """The SparkContext, once started (what starting it raised, if it failed)."""
        self._ready.wait()
        if self._error is not None:
            raise self._error
        assert self._context is not None
        return self._context

    def session(self) -> SparkSession:
        """The session, on ``context()``: built in the start's thread (``sql``), else now."""
        context = self.context()
        with self._asked:
            if self._session is None:
                self._session = _session(context, self._settings)
            return self._session


def _nothing(_: int) -> None:
    """A warm-up task: its worker's start is the point."""


def _warm_workers(context: SparkContext) -> None:
    """One empty task per core (``SessionStart``'s ``warm``); never fails a run."""
    parts = max(1, context.defaultParallelism)
    with contextlib.suppress(Exception):  # the run's own first job reports a real problem
        context.parallelize(range(parts), parts).foreach(_nothing)


def spark_context(spark: Any) -> SparkContext:
    """The SparkContext of ``spark``: a SparkContext, or a SparkSession (tests and embedding
    callers hand the run a session; the run itself starts a context alone)."""
    return getattr(spark, "sparkContext", spark)


def _context(master: str, settings: Mapping[str, str], app_name: str, log_level: str,
             output: Path | None) -> SparkContext:
    """The JVM (``_launch_jvm``) and its SparkContext with ``settings``; the one already
    running when there is one (a test's, spark-submit's on a cluster's driver), as
    ``SparkSession.builder`` does."""
    from pyspark import SparkConf, SparkContext

    _launch_jvm(master, app_name, settings, output)
    # loadDefaults: spark-submit's own --conf arrive as the JVM's system properties.
    spark_conf = SparkConf().setMaster(master).setAppName(app_name)
    for key, value in settings.items():
        spark_conf.set(key, value)
    context = SparkContext.getOrCreate(spark_conf)
    context.setLogLevel(log_level)
    return context


def _session(context: SparkContext, settings: Mapping[str, str]) -> SparkSession:
    """The Spark session on ``context`` (Spark SQL's settings applied)."""
    from pyspark.sql import SparkSession

    builder = SparkSession.builder
    for key, value in settings.items():
        builder = builder.config(key, value)
    spark = builder.getOrCreate()  # on the active context: ``context``, master and name set
    return spark


def _launch_jvm(master: str, app_name: str, conf: Mapping[str, str],
                output: Path | None) -> None:
    """Start the JVM (py4j gateway) the way the builder would start it (same master, app
    name and settings on spark-submit's command line, so launch-time settings such as
    ``spark.driver.memory`` still apply), with its stdout/stderr in ``output`` when given
    (PySpark documents ``popen_kwargs`` of ``launch_gateway`` for capturing them)."""
    from pyspark import SparkConf, SparkContext
    from pyspark.java_gateway import launch_gateway

    if SparkContext._gateway is not None or "PYSPARK_GATEWAY_PORT" in os.environ:
        return  # a JVM is already up: this process's, or spark-submit's (cluster masters)
    spark_conf = SparkConf(loadDefaults=False).setMaster(master).setAppName(app_name)
    for key, value in conf.items():
        spark_conf.set(key, value)
    log = None
    if output is not None:
        output.parent.mkdir(parents=True, exist_ok=True)
        # The JVM (and the Python workers it forks) keep the descriptor; ours is closed after.
        log = os.open(output, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o600)
    try:
        if log is not None:
            os.write(log, f"--- JVM started by replicator (pid {os.getpid()})\n".encode())
        with _jvm_in_its_own_process_group():
            gateway = launch_gateway(
                spark_conf, popen_kwargs={} if log is None else {"stdout": log, "stderr": log})
    finally:
        if log is not None:
            os.close(log)
    SparkContext._ensure_initialized(gateway=gateway)


_popen_lock = threading.Lock()


@contextmanager
def _jvm_in_its_own_process_group() -> Iterator[None]:
    """``launch_gateway`` keeps a terminal's Ctrl-C from the JVM with a ``preexec_fn`` that
    ignores SIGINT. A ``preexec_fn`` runs Python in the forked child, which the subprocess
    docs call unsafe once the process has other threads; ours has them (this start runs in a
    thread, beside DuckDB's, Arrow's and the connector's), and the forked child segfaulted
    (JAVA_GATEWAY_EXITED) in a test process whose earlier tests had left such threads. The
    JVM starts in a process group of its own instead: Ctrl-C reaches the terminal's
    foreground group only, as before, and nothing runs in the child before exec. The JVM
    still ends with us: it exits when its stdin, our pipe, closes."""
    import pyspark.java_gateway as java_gateway

    def popen(command: list[str], **kwargs: Any) -> subprocess.Popen[bytes]:
        kwargs.pop("preexec_fn", None)
        return subprocess.Popen(command, process_group=0, **kwargs)

    with _popen_lock:
        java_gateway.Popen = popen  # the module's name for subprocess.Popen, read per call
        try:
            yield
        finally:
            java_gateway.Popen = subprocess.Popen
