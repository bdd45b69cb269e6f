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


# -- the Snowflake connection itself, with every log on -----------------------------------

# Runs a command in-process after turning every Python logger (the Snowflake connector's,
# urllib3's, py4j's...) to DEBUG on stderr: the most a user can switch on.
DEBUG_PROBE = """
import logging, sys
logging.basicConfig(level=logging.DEBUG, stream=sys.stderr,
                    format="%(name)s %(levelname)s %(message)s")
for name in ("snowflake", "snowflake.connector", "urllib3", "botocore"):
    logging.getLogger(name).setLevel(logging.DEBUG)
sys.argv = ["replicator"] + {args!r}
from replicator.cli.main import main
main()
"""


class _LoginStub:
    """Snowflake's login endpoint as far as a refusal: every login request is recorded
    (gunzipped JSON) and answered 390100 "Incorrect username or password"."""

    def __init__(self) -> None:
        import gzip
        import threading
        from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

        requests: list[dict] = []

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self):
                body = self.rfile.read(int(self.headers.get("Content-Length") or 0))
                if self.headers.get("Content-Encoding") == "gzip" or body[:2] == b"\x1f\x8b":
                    body = gzip.decompress(body)
                try:
                    requests.append({"path": self.path, **json.loads(body or b"{}")})
                except ValueError:
                    requests.append({"path": self.path})
                answer = json.dumps({"data": {"nextAction": None}, "code": "390100",
                                     "message": "Incorrect username or password was specified.",
                                     "success": False}).encode()
                self.send_response(200)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(answer)))
                self.end_headers()
                self.wfile.write(answer)

            def log_message(self, *args):
                pass

        self.requests = requests
        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.port = self.server.server_address[1]
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def logins(self) -> list[dict]:
        return [r for r in self.requests if "login-request" in r["path"]]


@pytest.fixture
def login_stub():
    stub = _LoginStub()
    yield stub
    stub.server.shutdown()


def _encrypted_key(path: Path, passphrase: str) -> str:
    from cryptography.hazmat.primitives import serialization
    from cryptography.hazmat.primitives.asymmetric import rsa

    key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    pem = key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                            serialization.BestAvailableEncryption(passphrase.encode()))
    path.write_bytes(pem)
    path.chmod(0o600)
    plain = key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                              serialization.NoEncryption()).decode()
    return "".join(plain.splitlines()[1:-1])  # the key material, base64


def test_the_snowflake_connection_logs_no_credential_even_at_debug(setup, login_stub, tmp_path):
    """Password, OAuth token and key-pair (passphrase-protected key file) authentication
    against a login endpoint on 127.0.0.1 (a named connection in connections.toml gives its
    host, port and protocol). The real connector runs with every logger at DEBUG, under
    replicator's most verbose options; run, check, status and verify must fail on the refused
    login with exit 1/2 and no credential anywhere in stdout or stderr, while the login
    requests prove the connector did carry them."""
    env = dict(setup["env"])
    password, token, passphrase = ("sfpw-" + secrets.token_hex(12), setup["secrets"][1],
                                   setup["secrets"][2])
    home = tmp_path / "snowflake-home"
    home.mkdir()
    toml = home / "connections.toml"
    toml.write_text(f'[stub]\naccount = "stubacct"\nuser = "someone"\nhost = "127.0.0.1"\n'
                    f'port = {login_stub.port}\nprotocol = "http"\nlogin_timeout = 20\n')
    toml.chmod(0o600)
    key_material = _encrypted_key(tmp_path / "rsa_key.p8", passphrase)
    env.update(SNOWFLAKE_HOME=str(home), SNOWFLAKE_PASSWORD_TEST=password)
    duck_text = setup["duck"].read_text()
    base = duck_text.split("target:")[0]
    tables = "tables:" + duck_text.split("tables:", 1)[1]
    auth = {
        "password": "password: ${SNOWFLAKE_PASSWORD_TEST}",
        "token": "authenticator: oauth\n    token: ${SNOWFLAKE_TOKEN}",
        "keypair": f"private_key_file: {tmp_path / 'rsa_key.p8'}\n"
                   "    private_key_file_pwd: ${SNOWFLAKE_KEY_PASSPHRASE}",
    }
    runs: dict[str, subprocess.CompletedProcess] = {}
    for kind, lines in auth.items():
        path = tmp_path / f"stub-{kind}.yaml"
        path.write_text(base.replace("name: secrets-duck", f"name: stub-{kind}")
                        + "target:\n  snowflake:\n    connection: stub\n    database: DB\n"
                        f"    schema: RAW\n    {lines}\n"
                        f"engine: {{checkpoint: {tmp_path / ('checkpoint-' + kind)}}}\n"
                        + tables)
        for name, args in {
            "run debug json": ["-v", "--debug", "run", path, "--until-caught-up",
                               "--log-format", "json"],
            "run verbose": ["-vv", "run", path, "--until-caught-up"],
            "check": ["-v", "check", path],
            "status debug": ["--debug", "status", "--format", "json", path],
            "verify": ["-v", "verify", path],
        }.items():
            runs[f"{kind} {name}"] = subprocess.run(
                [sys.executable, "-c", DEBUG_PROBE.format(args=[str(a) for a in args])],
                env=env, cwd=ROOT, capture_output=True, text=True, timeout=300)
    for name, result in runs.items():
        if not name.endswith("status debug"):  # status reports an unreachable target, exit 0
            assert result.returncode in (1, 2), (name, result.stderr[-3000:])
        assert "snowflake.connector" in result.stderr, name  # the connector did log at DEBUG
        assert "Incorrect username or password" in result.stdout + result.stderr, name
    logins = login_stub.logins()
    assert len(logins) >= 3 * 5
    carried = json.dumps(logins)
    assert password in carried and token in carried  # the secrets reached the connector
    assert any(r["data"].get("AUTHENTICATOR") == "SNOWFLAKE_JWT" for r in logins)
    for name, result in runs.items():
        output = result.stdout + result.stderr
        assert key_material[:40] not in output and key_material[-40:] not in output, name
    _assert_no_secret({n: r for n, r in runs.items() if "debug" not in n},
                      (*setup["secrets"], password))
    for name, result in runs.items():  # tracebacks are allowed with --debug, secrets not
        for value in (*setup["secrets"], password):
            assert value not in result.stdout + result.stderr, f"{name}: a secret is shown"
