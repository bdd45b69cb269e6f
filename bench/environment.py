"""The machine and software a run measured, so runs can be compared."""

from __future__ import annotations

import datetime as dt
import os
import platform
import subprocess
import sys
from importlib import metadata
from typing import Any

from bench.context import REPO_ROOT

PACKAGES = ("mysql-replication", "PyMySQL", "pyspark", "duckdb", "fakesnow",
            "snowflake-connector-python", "pyarrow", "pandas")


def _git(*args: str) -> str | None:
    try:
        return subprocess.run(["git", *args], cwd=REPO_ROOT, capture_output=True, text=True,
                              check=True).stdout.strip()
    except (OSError, subprocess.CalledProcessError):
        return None


def _version(package: str) -> str | None:
    try:
        return metadata.version(package)
    except metadata.PackageNotFoundError:
        return None


def _memory_total_mib() -> int | None:
    try:
        with open("/proc/meminfo") as handle:
            for line in handle:
                if line.startswith("MemTotal:"):
                    return int(line.split()[1]) // 1024
    except OSError:
        pass
    return None


def _java_version() -> str | None:
    try:
        completed = subprocess.run(["java", "-version"], capture_output=True, text=True, check=False)
    except OSError:
        return None
    return (completed.stderr or completed.stdout).splitlines()[0] if completed.returncode == 0 else None


def describe(server_version: str | None) -> dict[str, Any]:
    import replicator

    status = _git("status", "--porcelain", "--", "replicator", "bench")
    return {
        "date": dt.datetime.now(dt.UTC).isoformat(timespec="seconds"),
        "git_commit": _git("rev-parse", "HEAD"),
        "git_dirty": bool(status) if status is not None else None,
        "cores": os.cpu_count(),
        "load_average_start": [round(x, 2) for x in os.getloadavg()],
        "memory_total_mib": _memory_total_mib(),
        "platform": platform.platform(),
        "python": sys.version.split()[0],
        "java": _java_version(),
        "replicator": replicator.__version__,
        "mariadb": server_version,
        "packages": {name: _version(name) for name in PACKAGES},
    }
