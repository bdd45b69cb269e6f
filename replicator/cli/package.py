"""``replicator package [--output DIR]``: the archive of replicator's code for clusters that
run ``spark-submit`` themselves (an Airflow operator, a YARN gateway, a Kubernetes job).

``replicator run --master <cluster>`` builds the same zip and submits by itself; this command
is for when someone else submits. It prints the spark-submit arguments that go with it.
"""

from __future__ import annotations

import shlex
from pathlib import Path
from typing import Annotated

import typer

COMMAND_SETTINGS = {"help": "Build the code zip for spark-submit and print how to pass it."}


def command(
    output: Annotated[
        Path, typer.Option("--output", "-o", help="Directory to write the archive into.")
    ] = Path("dist/spark"),
) -> None:
    # Off every command's start-up (cli/main imports every command module): zipfile, ~3 ms.
    from replicator.engine.job.launch import SUBMIT_MAIN, package_zip

    code_zip = package_zip(output).resolve()
    print(code_zip)
    print()
    print("spark-submit arguments (client mode; see docs/cluster.md for cluster mode):")
    print(f"  PYTHONPATH={shlex.quote(str(code_zip))} spark-submit --master URL \\")
    print(f"    --py-files {shlex.quote(str(code_zip))} \\")
    print("    --conf spark.pyspark.python=PYTHON_WITH_DEPENDENCIES \\")
    print(f"    {shlex.quote(str(SUBMIT_MAIN))} PIPELINE.yaml --master URL [run options]")
    print()
    print("PYTHONPATH makes the package importable by the driver's data-source planner; "
          "--py-files ships it to executors. Dependencies come from PYTHON_WITH_DEPENDENCIES "
          "(installed on every worker) or a packed virtualenv: --archives env.tar.gz#environment "
          "--conf spark.pyspark.python=./environment/bin/python.")
