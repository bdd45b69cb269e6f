"""How a run reaches a Spark cluster: the ``spark-submit`` command line and the code archive.

``local[N]`` runs in this process (``session.spark_session``). Every other master (standalone
``spark://``, ``yarn``, ``k8s://``) goes through ``spark-submit``, the way Spark users expect:

- the ``replicator`` package (pure Python) travels as a zip on ``--py-files``; executors get
  it on their ``sys.path`` from there;
- the driver's data-source planner is a Python process the driver JVM starts with the JVM's
  own ``PYTHONPATH`` (measured: without the package on it, ``ModuleNotFoundError``), so the
  zip is put on ``PYTHONPATH`` of ``spark-submit`` itself in client mode, and on the driver's
  environment settings (``spark.yarn.appMasterEnv.*``, ``spark.kubernetes.driverEnv.*``) in
  cluster mode;
- dependencies (pymysqlreplication, pyarrow, duckdb ...) are the cluster's Python environment:
  ``spark.pyspark.python`` defaults to this interpreter's path (the same virtualenv installed
  at the same path on every worker), or a packed virtualenv given with ``--conf
  spark.archives=env.tar.gz#environment --conf spark.pyspark.python=./environment/bin/python``;
- the job itself is ``replicator/engine/job/submit_main.py`` with the ``run`` arguments: it runs
  the same ``replicator run`` code, in-process, inside the driver that spark-submit started.
"""

from __future__ import annotations

import contextlib
import os
import shlex
import sys
import zipfile
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Literal

import replicator
from replicator import __version__
from replicator.errors import UsageError

MasterKind = Literal["local", "standalone", "yarn", "kubernetes"]
SUBMIT_MAIN = Path(__file__).with_name("submit_main.py")
# Set by submit_main.py: the run is already inside spark-submit, start Spark in-process.
SUBMITTED_ENV = "REPLICATOR_SUBMITTED"
LOG4J_CONFIG = Path(__file__).with_name("log4j2.properties")


def master_kind(master: str) -> MasterKind:
    """Which kind of cluster a master URL names; anything else is a usage error."""
    if master == "local" or master.startswith("local["):
        return "local"
    if master.startswith("spark://"):
        return "standalone"
    if master == "yarn":
        return "yarn"
    if master.startswith("k8s://"):
        return "kubernetes"
    raise UsageError(
        f"unknown Spark master {master!r}",
        hint="use local[N], spark://HOST:PORT, yarn or k8s://https://HOST:PORT",
    )


def spark_submit_path() -> str:
    """``$SPARK_HOME/bin/spark-submit``, else the one shipped in the pyspark wheel."""
    home = os.environ.get("SPARK_HOME")
    if home:
        return str(Path(home) / "bin" / "spark-submit")
    import importlib.util

    spec = importlib.util.find_spec("pyspark")
    if spec is None or spec.origin is None:
        raise UsageError("pyspark is not installed, so there is no spark-submit",
                         hint="pip install 'replicator[spark]', or set SPARK_HOME")
    return str(Path(spec.origin).parent / "bin" / "spark-submit")


def package_root() -> Path:
    """The directory that holds the ``replicator`` package."""
    return Path(replicator.__file__).resolve().parent.parent


def package_zip(output_dir: Path) -> Path:
    """Write ``replicator-<version>.zip`` (the package, its data files, no bytecode) and
    return its path. Rewritten only when a source file is newer than the zip."""
    root = package_root()
    files = sorted(
        path for path in (root / "replicator").rglob("*")
        if path.is_file() and "__pycache__" not in path.parts and path.suffix != ".pyc"
    )
    output_dir.mkdir(parents=True, exist_ok=True)
    target = output_dir / f"replicator-{__version__}.zip"
    if target.exists():
        built = target.stat().st_mtime
        if all(path.stat().st_mtime <= built for path in files):
            with zipfile.ZipFile(target) as existing:
                if len(existing.namelist()) == len(files):
                    return target
    partial = target.with_suffix(".zip.partial")
    with zipfile.ZipFile(partial, "w", compression=zipfile.ZIP_DEFLATED) as archive:
        for path in files:
            archive.write(path, path.relative_to(root).as_posix())
    partial.replace(target)
    return target


@dataclass(frozen=True)
class SubmitCommand:
    """A spark-submit invocation: ``env`` is added to the environment it runs in."""

    argv: list[str]
    env: dict[str, str] = field(default_factory=dict)

    def shell(self) -> str:
        """One line a user can paste into a POSIX shell."""
        prefix = [f"{key}={shlex.quote(value)}" for key, value in sorted(self.env.items())]
        return " ".join([*prefix, *(shlex.quote(part) for part in self.argv)])


def submit_command(
    master: str,
    conf: Mapping[str, str],
    run_args: Sequence[str],
    *,
    code_zip: Path,
    pipeline_file: Path,
    app_name: str = "replicator",
    spark_submit: str | None = None,
    python: str | None = None,
) -> SubmitCommand:
    """The spark-submit command that runs ``replicator run PIPELINE_FILE *run_args`` on
    ``master``. ``conf`` is the pipeline's ``engine.conf`` with ``--conf`` on top; the deploy
    mode is client unless ``spark.submit.deployMode=cluster`` is in it."""
    kind = master_kind(master)
    if kind == "local":
        raise UsageError(f"{master} runs in this process, not through spark-submit",
                         hint="use a cluster master (spark://, yarn, k8s://) with --dry-run")
    settings = dict(conf)
    deploy_mode = settings.pop("spark.submit.deployMode", "client")
    if deploy_mode not in ("client", "cluster"):
        raise UsageError(f"spark.submit.deployMode={deploy_mode!r}",
                         hint="client (the default) or cluster")
    cluster = deploy_mode == "cluster"
    if kind == "kubernetes" and "spark.kubernetes.container.image" not in settings:
        raise UsageError("Kubernetes needs the image executors (and a cluster-mode driver) run",
                         hint="--conf spark.kubernetes.container.image=REPO/IMAGE:TAG (Spark 4 "
                         "with Python and replicator's dependencies)")
    if cluster and kind == "standalone":
        raise UsageError("cluster deploy mode is not supported for Python jobs on a "
                         "standalone cluster (a Spark limitation)",
                         hint="leave spark.submit.deployMode unset (client mode)")
    python = python or sys.executable
    # Executors: this interpreter's path unless the user named one (or a packed env).
    settings.setdefault("spark.pyspark.python", python)
    env: dict[str, str] = {}
    if cluster:
        # The driver runs on the cluster: it finds the zip and the pipeline file in its
        # working directory (spark-submit uploads --py-files and --files there).
        zip_on_driver = code_zip.name
        settings.setdefault("spark.pyspark.driver.python", settings["spark.pyspark.python"])
        driver_env = ("spark.yarn.appMasterEnv" if kind == "yarn"
                      else "spark.kubernetes.driverEnv")
        settings.setdefault(f"{driver_env}.PYTHONPATH", zip_on_driver)
        pipeline_arg = pipeline_file.name
    else:
        # The driver is spark-submit's child on this machine, so is the planner it starts.
        settings.setdefault("spark.pyspark.driver.python", python)
        existing = os.environ.get("PYTHONPATH", "")
        env["PYTHONPATH"] = os.pathsep.join(p for p in (str(code_zip), existing) if p)
        if kind == "standalone" and master.startswith("spark://127.0.0.1"):
            env["SPARK_LOCAL_IP"] = os.environ.get("SPARK_LOCAL_IP", "127.0.0.1")
        pipeline_arg = str(pipeline_file.resolve())
    argv = [
        spark_submit or spark_submit_path(),
        "--master", master,
        "--deploy-mode", deploy_mode,
        "--name", app_name,
        "--py-files", str(code_zip),
    ]
    if cluster:
        argv += ["--files", str(pipeline_file.resolve())]
    elif LOG4J_CONFIG.exists():
        argv += ["--driver-java-options", f"-Dlog4j.configurationFile=file:{LOG4J_CONFIG}"]
    for key, value in sorted(settings.items()):
        argv += ["--conf", f"{key}={value}"]
    argv += [str(SUBMIT_MAIN), pipeline_arg, *run_args, "--master", master]
    return SubmitCommand(argv=argv, env=env)


def run_submit(command: SubmitCommand) -> int:
    """Run spark-submit as a child and return its exit status, with this process's signals
    keeping their meaning for the job.

    The Java launcher would otherwise exit on the first Ctrl-C/SIGTERM and take the Python
    driver under it down mid-batch. So spark-submit starts with SIGINT/SIGTERM ignored (a JVM
    keeps ignored shutdown signals ignored), in its own session, and dies with this process
    (``PR_SET_PDEATHSIG``; the driver does the same under the JVM: ``submit_main``): a SIGINT
    or SIGTERM here is forwarded once to the Python driver, which finishes the batch in
    progress and stops, a second one stops it at once, as for a local run; a SIGKILL here
    takes the whole job down, as it does a local run.
    """
    import signal
    import subprocess

    def child_setup() -> None:
        signal.signal(signal.SIGINT, signal.SIG_IGN)
        signal.signal(signal.SIGTERM, signal.SIG_IGN)
        die_with_parent()

    sys.stdout.flush()
    sys.stderr.flush()
    process = subprocess.Popen(command.argv, env={**os.environ, **command.env},
                               preexec_fn=child_setup, start_new_session=True)

    def forward(signum: int, frame: object) -> None:
        for pid in _driver_pids(process.pid):
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signum)

    previous = {sig: signal.signal(sig, forward) for sig in (signal.SIGINT, signal.SIGTERM)}
    try:
        while True:
            try:
                return process.wait()
            except InterruptedError:  # pragma: no cover - PEP 475 retries; kept for clarity
                continue
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)


def die_with_parent() -> None:
    """Ask Linux to SIGKILL this process when its parent exits (no-op elsewhere)."""
    import ctypes
    import signal

    with contextlib.suppress(OSError, AttributeError):
        ctypes.CDLL("libc.so.6", use_errno=True).prctl(1, int(signal.SIGKILL))  # PR_SET_PDEATHSIG


def _driver_pids(root: int) -> list[int]:
    """The Python driver(s) (``submit_main.py``) among the descendants of ``root``."""
    children: dict[int, list[int]] = {}
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_text()
        except OSError:
            continue
        parent = int(stat.rsplit(")", 1)[1].split()[1])
        children.setdefault(parent, []).append(int(entry.name))
    found, stack = [], list(children.get(root, []))
    while stack:
        pid = stack.pop()
        stack.extend(children.get(pid, []))
        try:
            cmdline = Path(f"/proc/{pid}/cmdline").read_bytes()
        except OSError:
            continue
        if SUBMIT_MAIN.name.encode() in cmdline and b"java" not in cmdline.split(b"\0")[0]:
            found.append(pid)
    return found
