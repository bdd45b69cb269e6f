"""Values that come from the environment: kept as text where text is wanted, and never
printed back in a diagnostic (they may be secrets put in the wrong field)."""

from pathlib import Path

from replicator.config import load_pipeline, validate_file

PIPELINE = """\
version: 1
name: env
source:
  mysql:
    port: {port}
    password: ${{MYSQL_PASSWORD}}
target:
  duckdb: {{path: ./x.duckdb}}
tables:
  - source: a.b
"""


def write(tmp_path: Path, port: str) -> Path:
    path = tmp_path / "env.yaml"
    path.write_text(PIPELINE.format(port=port))
    return path


def test_a_password_of_digits_stays_text_and_a_port_becomes_a_number(tmp_path):
    path = write(tmp_path, "${MYSQL_PORT:-3306}")
    pipeline = load_pipeline(path, environ={"MYSQL_PASSWORD": "00123"})
    assert pipeline.source.password == "00123"  # not 123: leading zeros are part of it
    assert pipeline.source.port == 3306


def test_a_secret_in_a_wrong_field_is_named_by_its_reference_not_its_value(tmp_path):
    path = write(tmp_path, "${MYSQL_PASSWORD}")
    diagnostics = validate_file(path, environ={"MYSQL_PASSWORD": "pw-s3cr3t"})
    errors = [d for d in diagnostics if d.severity == "error"]
    assert [(d.code, d.line, d.col) for d in errors] == [("R102", 5, 11)]
    text = " ".join(f"{d.message} {d.hint}" for d in diagnostics)
    assert "${MYSQL_PASSWORD}" in text
    assert "s3cr3t" not in text


SNOWFLAKE_PIPELINE = """\
version: 1
name: sf
source:
  mysql: {host: db, user: u, password: "${MYSQL_PASSWORD}"}
target:
  snowflake:
    account: acct
    user: someone
    database: DB
    schema: RAW
    password: ${SNOWFLAKE_PASSWORD}
    token: ${SNOWFLAKE_TOKEN}
    private_key_file: /keys/rsa.p8
    private_key_file_pwd: ${SNOWFLAKE_PRIVATE_KEY_FILE_PWD}
tables:
  - source: a.b
"""
SECRET_ENV = {"MYSQL_PASSWORD": "my-s3cret-pw", "SNOWFLAKE_PASSWORD": "sf-s3cret-pw",
              "SNOWFLAKE_TOKEN": "sf-s3cret-token", "SNOWFLAKE_PRIVATE_KEY_FILE_PWD": "sf-s3cret-kp"}


def test_repr_of_the_pipeline_and_its_parts_shows_no_secret(tmp_path):
    from replicator.sink.snowflake import connection_parameters, redacted

    path = tmp_path / "sf.yaml"
    path.write_text(SNOWFLAKE_PIPELINE)
    pipeline = load_pipeline(path, environ=SECRET_ENV)
    target = pipeline.target.warehouse
    assert (target.password, target.token, target.private_key_file_pwd) == (
        "sf-s3cret-pw", "sf-s3cret-token", "sf-s3cret-kp")  # they are there...
    params = connection_parameters(target, pipeline.name, environ={})
    shown = " ".join([repr(pipeline), str(pipeline), repr(pipeline.source), repr(target),
                      repr(pipeline.target), str(redacted(params)), repr(redacted(params))])
    assert "s3cret" not in shown  # ...and never shown
    assert "acct" in shown and "/keys/rsa.p8" in shown


def test_the_credential_comes_whole_from_the_strongest_place():
    from replicator.model.pipeline import SnowflakeTarget
    from replicator.sink.snowflake import connection_parameters

    shell = {"SNOWFLAKE_TOKEN": "stale-token", "SNOWFLAKE_AUTHENTICATOR": "oauth",
             "SNOWFLAKE_PASSWORD": "env-pw", "SNOWFLAKE_PRIVATE_KEY_FILE_PWD": "env-kp"}
    yaml_password = SnowflakeTarget(database="D", schema="S", account="a", user="u",
                                    password="yaml-pw")
    params = connection_parameters(yaml_password, "p", environ=shell)
    # A token left in the shell neither turns the YAML's password into OAuth nor rides along.
    assert params["password"] == "yaml-pw"
    assert "token" not in params and "authenticator" not in params
    assert "private_key_file_pwd" not in params
    key_pair = SnowflakeTarget(database="D", schema="S", account="a", user="u",
                               private_key_file="/k.p8")
    params = connection_parameters(key_pair, "p", environ=shell)
    assert params["authenticator"] == "SNOWFLAKE_JWT"
    assert params["private_key_file_pwd"] == "env-kp"  # the passphrase may come from the shell
    assert "password" not in params and "token" not in params
    named_token = {"token": "named-token", "authenticator": "oauth"}
    params = connection_parameters(SnowflakeTarget(database="D", schema="S", account="a"), "p",
                                   named=named_token, environ=shell)
    assert (params["token"], params["authenticator"]) == ("named-token", "oauth")
    assert "password" not in params
    params = connection_parameters(SnowflakeTarget(database="D", schema="S", account="a"), "p",
                                   environ={"SNOWFLAKE_PASSWORD": "env-pw"})
    assert params["password"] == "env-pw" and "authenticator" not in params
