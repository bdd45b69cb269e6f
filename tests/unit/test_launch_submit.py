"""The spark-submit command ``replicator run --master <cluster>`` builds, per master kind,
and ``--dry-run`` printing it (no Spark, no server: nothing is submitted)."""

from __future__ import annotations

import shlex
import zipfile
from pathlib import Path

import pytest
from typer.testing import CliRunner

from replicator.cli.main import app
from replicator.engine.job.launch import (
    SUBMIT_MAIN,
    master_kind,
    package_zip,
    submit_command,
)
from replicator.errors import UsageError

PIPELINE = """\
version: 1
name: shop
source:
  mysql: {host: db.internal, port: 3306, user: replicator, password: "${PW}"}
target:
  duckdb: {path: "%s/warehouse.duckdb"}
engine:
  checkpoint: %s/checkpoint
  conf: {spark.executor.memory: 2g}
tables:
  - source: shop.orders
"""


def _conf(argv: list[str]) -> dict[str, str]:
    pairs = [argv[i + 1] for i, arg in enumerate(argv) if arg == "--conf"]
    return dict(pair.split("=", 1) for pair in pairs)


def _submit_part(argv: list[str]) -> list[str]:
    """The spark-submit options, before the entry script."""
    return argv[: argv.index(str(SUBMIT_MAIN))]


@pytest.mark.parametrize(
    ("master", "kind"),
    [("local[4]", "local"), ("local", "local"), ("spark://h:7077", "standalone"),
     ("yarn", "yarn"), ("k8s://https://api:6443", "kubernetes")],
)
def test_master_kinds(master, kind):
    assert master_kind(master) == kind


def test_an_unknown_master_is_a_usage_error():
    with pytest.raises(UsageError) as caught:
        master_kind("mesos://h:5050")
    assert "spark://" in caught.value.hint


def test_standalone_is_client_mode_with_the_zip_shipped_and_on_the_driver_path(tmp_path):
    code_zip = tmp_path / "replicator-1.zip"
    command = submit_command("spark://10.0.0.5:7077", {"spark.executor.memory": "2g"},
                             ["--until-caught-up"], code_zip=code_zip,
                             pipeline_file=tmp_path / "p.yaml", spark_submit="spark-submit",
                             python="/opt/venv/bin/python")
    argv = command.argv
    options = _submit_part(argv)
    assert argv[0] == "spark-submit"
    assert options[options.index("--master") + 1] == "spark://10.0.0.5:7077"
    assert options[options.index("--deploy-mode") + 1] == "client"
    assert options[options.index("--py-files") + 1] == str(code_zip)
    conf = _conf(options)
    assert conf["spark.executor.memory"] == "2g"
    assert conf["spark.pyspark.python"] == "/opt/venv/bin/python"
    assert conf["spark.pyspark.driver.python"] == "/opt/venv/bin/python"
    # the driver's data-source planner inherits spark-submit's PYTHONPATH
    assert command.env["PYTHONPATH"].split(":")[0] == str(code_zip)
    job = argv[argv.index(str(SUBMIT_MAIN)) + 1:]
    assert job == [str((tmp_path / "p.yaml").resolve()), "--until-caught-up",
                   "--master", "spark://10.0.0.5:7077"]


def test_a_python_named_by_the_user_wins(tmp_path):
    command = submit_command(
        "spark://h:7077",
        {"spark.pyspark.python": "./environment/bin/python",
         "spark.archives": "env.tar.gz#environment"},
        [], code_zip=tmp_path / "r.zip", pipeline_file=tmp_path / "p.yaml",
        spark_submit="spark-submit", python="/opt/venv/bin/python")
    conf = _conf(command.argv)
    assert conf["spark.pyspark.python"] == "./environment/bin/python"
    assert conf["spark.archives"] == "env.tar.gz#environment"
    assert conf["spark.pyspark.driver.python"] == "/opt/venv/bin/python"


def test_yarn_cluster_mode_uploads_the_pipeline_and_sets_the_driver_path(tmp_path):
    code_zip = tmp_path / "replicator-1.zip"
    command = submit_command("yarn", {"spark.submit.deployMode": "cluster"}, [],
                             code_zip=code_zip, pipeline_file=tmp_path / "p.yaml",
                             spark_submit="spark-submit", python="python3")
    options = _submit_part(command.argv)
    assert options[options.index("--deploy-mode") + 1] == "cluster"
    assert options[options.index("--files") + 1] == str((tmp_path / "p.yaml").resolve())
    conf = _conf(options)
    assert "spark.submit.deployMode" not in conf  # said once, as --deploy-mode
    assert conf["spark.yarn.appMasterEnv.PYTHONPATH"] == "replicator-1.zip"
    assert "PYTHONPATH" not in command.env
    assert command.argv[command.argv.index(str(SUBMIT_MAIN)) + 1] == "p.yaml"


def test_yarn_defaults_to_client_mode(tmp_path):
    command = submit_command("yarn", {}, [], code_zip=tmp_path / "r.zip",
                             pipeline_file=tmp_path / "p.yaml", spark_submit="spark-submit")
    assert command.argv[command.argv.index("--deploy-mode") + 1] == "client"
    assert "PYTHONPATH" in command.env


def test_kubernetes_needs_an_image_and_passes_it(tmp_path):
    with pytest.raises(UsageError) as caught:
        submit_command("k8s://https://api:6443", {}, [], code_zip=tmp_path / "r.zip",
                       pipeline_file=tmp_path / "p.yaml", spark_submit="spark-submit")
    assert "spark.kubernetes.container.image" in caught.value.hint
    command = submit_command(
        "k8s://https://api:6443",
        {"spark.kubernetes.container.image": "repo/replicator:1",
         "spark.submit.deployMode": "cluster"},
        [], code_zip=tmp_path / "r.zip", pipeline_file=tmp_path / "p.yaml",
        spark_submit="spark-submit")
    conf = _conf(command.argv)
    assert conf["spark.kubernetes.container.image"] == "repo/replicator:1"
    assert conf["spark.kubernetes.driverEnv.PYTHONPATH"] == "r.zip"


def test_standalone_cluster_mode_and_local_masters_are_refused(tmp_path):
    kwargs = {"code_zip": tmp_path / "r.zip", "pipeline_file": tmp_path / "p.yaml",
              "spark_submit": "spark-submit"}
    with pytest.raises(UsageError):
        submit_command("spark://h:7077", {"spark.submit.deployMode": "cluster"}, [], **kwargs)
    with pytest.raises(UsageError):
        submit_command("local[2]", {}, [], **kwargs)


def test_the_zip_holds_the_package_without_bytecode(tmp_path):
    built = package_zip(tmp_path)
    names = zipfile.ZipFile(built).namelist()
    assert "replicator/engine/job/binlog_batches.py" in names
    assert "replicator/engine/job/log4j2.properties" in names
    assert not [name for name in names if "__pycache__" in name or name.endswith(".pyc")]
    assert package_zip(tmp_path) == built  # reused when nothing changed


def _pipeline(tmp_path: Path) -> Path:
    path = tmp_path / "shop.yaml"
    path.write_text(PIPELINE % (tmp_path, tmp_path))
    return path


def test_dry_run_prints_the_command_and_exits_0(tmp_path, monkeypatch):
    monkeypatch.setenv("PW", "secret-pw")
    monkeypatch.delenv("REPLICATOR_SUBMITTED", raising=False)
    result = CliRunner().invoke(app, [
        "run", str(_pipeline(tmp_path)), "--master", "spark://10.0.0.5:7077",
        "--conf", "spark.executor.cores=2", "--decode-partitions", "3", "--until-caught-up",
        "--dry-run"])
    assert result.exit_code == 0, result.output
    line = result.stdout.strip().splitlines()[-1]
    words = shlex.split(line)
    assert words[0].startswith("PYTHONPATH=") and "spark-submit" in words[1]
    conf = _conf(words)
    assert conf["spark.executor.memory"] == "2g"  # engine.conf
    assert conf["spark.executor.cores"] == "2"  # --conf
    job = words[words.index(str(SUBMIT_MAIN)) + 1:]
    assert job[0] == str((tmp_path / "shop.yaml").resolve())
    assert job[job.index("--decode-partitions") + 1] == "3"
    assert "--until-caught-up" in job and "--dry-run" not in job
    assert "secret-pw" not in result.output
    code_zip = Path(words[words.index("--py-files") + 1])
    assert code_zip.parent == tmp_path / "checkpoint" / "package" and code_zip.exists()


def test_dry_run_of_a_local_master_says_it_runs_in_process(tmp_path, monkeypatch):
    monkeypatch.setenv("PW", "x")
    result = CliRunner().invoke(app, ["run", str(_pipeline(tmp_path)), "--master", "local[2]",
                                      "--dry-run"])
    assert result.exit_code == 0, result.output
    assert "spark-submit" not in result.stdout
    assert "in" in result.output and "process" in result.output


def test_package_command_writes_the_zip_and_prints_the_arguments(tmp_path):
    result = CliRunner().invoke(app, ["package", "--output", str(tmp_path)])
    assert result.exit_code == 0, result.output
    built = sorted(tmp_path.glob("replicator-*.zip"))
    assert len(built) == 1
    assert f"--py-files {built[0]}" in result.stdout
