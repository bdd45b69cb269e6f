"""Secrets never reach the output: a MySQL password, a Snowflake token and a key passphrase
set through environment variables, then validate / check / plan / run / status / verify in
text and --format json (successes and failures alike); every byte of stdout and stderr is
searched for the secret values."""

from __future__ import annotations

import json
import os
import re
import secrets
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from replicator.demo.workload import create_schema, seed

pytestmark = [pytest.mark.mysql, pytest.mark.spark, pytest.mark.slow]

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture
def setup(mariadb, fresh_database, tmp_path):
    password = "pw-" + secrets.token_hex(12)
    token = "tok-" + secrets.token_hex(16)
    passphrase = "kp-" + secrets.token_hex(12)
    user = f"sec_{secrets.token_hex(3)}"
    with mariadb.root_connection() as root:
        with root.cursor() as cursor:
            cursor.execute(f"CREATE USER '{user}'@'%%' IDENTIFIED BY %s", [password])
            cursor.execute("GRANT REPLICATION SLAVE, BINLOG MONITOR, SELECT ON *.* "
                           f"TO '{user}'@'%'")
        create_schema(root, fresh_database)
        seed(root, fresh_database, customers=5, orders=10, awkward=5)
    source = textwrap.dedent(f"""\
        source:
          mysql:
            host: 127.0.0.1
            port: {mariadb.port}
            user: {user}
            password: ${{MYSQL_PASSWORD}}
        """)
    tables = f"tables:\n  - source: {fresh_database}.customers\n  - source: {fresh_database}.awkward\n"
    duck = tmp_path / "duck.yaml"
    duck.write_text(f"version: 1\nname: secrets-duck\n{source}"
                    f"target: {{duckdb: {{path: {tmp_path / 'w.duckdb'}}}}}\n"
                    f"engine: {{checkpoint: {tmp_path / 'checkpoint'}, master: 'local[1]'}}\n"
                    + tables)
    snow = tmp_path / "snow.yaml"
    snow.write_text(f"version: 1\nname: secrets-snow\n{source}" + textwrap.dedent("""\
        target:
          snowflake:
            account: nowhere
            user: someone
            database: DB
            schema: RAW
            authenticator: oauth
            token: ${SNOWFLAKE_TOKEN}
            private_key_file_pwd: ${SNOWFLAKE_KEY_PASSPHRASE}
        """) + tables)
    wrong_type = tmp_path / "wrong.yaml"  # a secret interpolated where a number belongs
    wrong_type.write_text(duck.read_text().replace(f"port: {mariadb.port}",
                                                   "port: ${MYSQL_PASSWORD}"))
    env = {**os.environ, "MYSQL_PASSWORD": password, "SNOWFLAKE_TOKEN": token,
           "SNOWFLAKE_KEY_PASSPHRASE": passphrase, "NO_COLOR": "1"}
    for name in list(env):
        if name.startswith("SNOWFLAKE_") and name not in ("SNOWFLAKE_TOKEN",
                                                          "SNOWFLAKE_KEY_PASSPHRASE"):
            del env[name]
    yield {"duck": duck, "snow": snow, "wrong": wrong_type, "env": env,
           "secrets": (password, token, passphrase)}
    with mariadb.root_connection() as root, root.cursor() as cursor:
        cursor.execute(f"DROP USER '{user}'@'%'")


def _replicator(env, *args, timeout=300) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "replicator", *map(str, args)], env=env,
                          cwd=ROOT, capture_output=True, text=True, timeout=timeout)


def test_no_secret_in_any_output(setup, tmp_path):
    env, duck, snow = setup["env"], setup["duck"], setup["snow"]
    metrics = tmp_path / "metrics" / "replicator.prom"
    wrong_password = {**env, "MYSQL_PASSWORD": env["MYSQL_PASSWORD"] + "-wrong"}
    runs = {
        "validate": _replicator(env, "validate", duck, snow),
        "validate json": _replicator(env, "validate", "--format", "json", duck, snow),
        "check": _replicator(env, "check", duck),
        "check json": _replicator(env, "check", "--format", "json", duck),
        "check snowflake": _replicator(env, "check", "--skip-target", snow),
        "check wrong password": _replicator(wrong_password, "check", "-f", "json", duck),
        "plan": _replicator(env, "plan", snow),
        "plan json": _replicator(env, "plan", "--format", "json", snow),
        "plan offline debug": _replicator(env, "--debug", "plan", "--offline", snow),
        "run wrong password": _replicator(wrong_password, "run", duck, "--until-caught-up"),
        "run json": _replicator(env, "run", duck, "--until-caught-up", "--log-format", "json",
                                "--metrics-file", metrics),
        "status json": _replicator(env, "status", "--format", "json", duck),
        "verify": _replicator(env, "verify", duck),
        "verify json": _replicator(env, "verify", "--format", "json", duck),
        "verify wrong password": _replicator(wrong_password, "verify", duck),
    }
    assert runs["run json"].returncode == 0, runs["run json"].stderr[-3000:]
    # The metrics file is output too: the run's counters are in it, its secrets are not.
    exposition = metrics.read_text()
    assert re.search(r'^replicator_rows_applied_total\{pipeline="[^"]+",table="[^"]+"\} [1-9]',
                     exposition, re.M), exposition
    assert not any(value in exposition for value in setup["secrets"])
    for line in (json.loads(x) for x in runs["run json"].stdout.splitlines() if x.startswith("{")):
        assert "notice" in line or line["pipeline"], line  # every batch line names its pipeline
    assert runs["verify json"].returncode == 0, runs["verify json"].stdout[-3000:]
    assert runs["check wrong password"].returncode != 0
    assert runs["run wrong password"].returncode != 0
    assert runs["verify wrong password"].returncode == 2
    _assert_no_secret(runs, setup["secrets"])


def _assert_no_secret(runs: dict[str, subprocess.CompletedProcess], values) -> None:
    for name, result in runs.items():
        assert "Traceback" not in result.stderr or "debug" in name, (name, result.stderr[-2000:])
        output = result.stdout + result.stderr
        for value in values:
            assert value not in output, f"{name}: a secret is in the output"
            assert value[3:] not in output, f"{name}: part of a secret is in the output"


def test_no_secret_in_a_diagnostic_about_the_field_it_was_put_in(setup):
    env, wrong = setup["env"], setup["wrong"]
    runs = {
        "validate wrong type": _replicator(env, "validate", wrong),
        "validate wrong type json": _replicator(env, "validate", "-f", "json", wrong),
        "verify wrong type": _replicator(env, "verify", wrong),
    }
    assert all(r.returncode in (1, 2) for r in runs.values())
    _assert_no_secret(runs, setup["secrets"])
