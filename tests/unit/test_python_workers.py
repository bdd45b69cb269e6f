"""The local workers' interpreter script (engine/job/python_workers.py): it drops exactly Spark's
zipped pyspark and py4j from PYTHONPATH, and is used only where that is safe."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pyspark

from replicator.engine.job.python_workers import DAEMON_MODULE_KEY, worker_conf, worker_python

LIB = Path(pyspark.__file__).parent / "python" / "lib"


def _env(tmp_path: Path, **extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items()
           if k not in ("PYSPARK_PYTHON", "PYSPARK_DRIVER_PYTHON", "SPARK_HOME")}
    return {**env, "XDG_CACHE_HOME": str(tmp_path / "cache"), **extra}


def test_the_script_drops_sparks_zips_and_keeps_every_other_entry(tmp_path: Path) -> None:
    env = _env(tmp_path)
    script = worker_python("local[2]", env)
    assert script is not None and Path(script).parent == tmp_path / "cache" / "replicator"
    zips = sorted(str(p) for p in LIB.glob("*.zip"))
    assert any(z.endswith("pyspark.zip") for z in zips)
    kept = [str(tmp_path / "a dir with spaces"), str(tmp_path / "other.zip")]
    env["PYTHONPATH"] = os.pathsep.join([*zips, *kept])
    out = subprocess.run(
        [script, "-c", "import os, sys, pyspark; print(os.environ['PYTHONPATH']);"
                       "print(sys.executable); print(pyspark.__file__)"],
        env=env, capture_output=True, text=True, check=True).stdout.splitlines()
    assert out[0] == os.pathsep.join(kept)
    assert out[1] == sys.executable
    assert out[2] == pyspark.__file__  # the installed package, not the zip's copy
    # written once: the next run finds the same script
    assert worker_python("local[*]", env) == script


def test_left_to_spark_where_the_zip_may_differ_or_the_user_chose(tmp_path: Path) -> None:
    assert worker_python("spark://master:7077", _env(tmp_path)) is None  # the cluster's Python
    assert worker_python("local", _env(tmp_path, PYSPARK_PYTHON="/usr/bin/python3")) is None
    assert worker_python("local", _env(tmp_path, PYSPARK_DRIVER_PYTHON="/usr/bin/python3")) is None
    assert worker_python("local", _env(tmp_path, SPARK_HOME=str(tmp_path / "spark"))) is None
    assert worker_python("local", _env(tmp_path, SPARK_HOME=str(LIB.parent.parent))) is not None


def test_no_writable_cache_means_sparks_default(tmp_path: Path) -> None:
    blocked = tmp_path / "file"
    blocked.write_text("")
    assert worker_python("local", _env(tmp_path, XDG_CACHE_HOME=str(blocked))) is None


def test_a_local_runs_daemon_preimports_the_decode_stack_a_clusters_keeps_sparks() -> None:
    assert worker_conf("local[2]") == {DAEMON_MODULE_KEY: "replicator.engine.job.python_daemon"}
    assert worker_conf("spark://master:7077") == {}
