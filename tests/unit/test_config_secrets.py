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
