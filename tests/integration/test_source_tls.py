"""TLS to MySQL against a throwaway MariaDB started with a certificate from a CA generated
here (openssl): every connection replicator opens (control, binlog stream, snapshot) is
encrypted and verified as ``source.mysql.ssl_mode`` says, and a wrong CA, a certificate that
does not name the host, or a missing client certificate is refused with a message naming the
setting -- never retried as a lost connection.

The ``replicator`` user is ``REQUIRE SSL`` (``REQUIRE X509`` for the client certificate
test): the server itself refuses any connection that is not TLS, so a passing read proves
that path connected with TLS."""

from __future__ import annotations

import itertools
import subprocess
from pathlib import Path

import pytest

from replicator.errors import SourceError, TransientSourceError
from replicator.model.changes import ChangeEvent
from replicator.source.binlog import read_changes
from replicator.source.catalog import read_catalog
from replicator.source.connection import connect
from replicator.source.positions import current_position
from replicator.source.snapshot import plan_chunks, read_chunk_batch
from replicator.source.throwaway import ThrowawayMariaDB

pytestmark = [pytest.mark.mysql, pytest.mark.slow]

_server_ids = itertools.count(8101)


def _openssl(*args: str, cwd: Path) -> None:
    subprocess.run(["openssl", *args], cwd=cwd, check=True, capture_output=True)


def _ca(directory: Path, name: str) -> None:
    _openssl("req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "2",
             "-keyout", f"{name}.key", "-out", f"{name}.pem", "-subj", f"/CN=replicator {name}",
             cwd=directory)


def _signed(directory: Path, name: str, ca: str, san: str) -> None:
    _openssl("req", "-newkey", "rsa:2048", "-nodes", "-keyout", f"{name}.key",
             "-out", f"{name}.csr", "-subj", f"/CN={name}", cwd=directory)
    (directory / f"{name}.ext").write_text(f"subjectAltName={san}\n")
    _openssl("x509", "-req", "-in", f"{name}.csr", "-CA", f"{ca}.pem", "-CAkey", f"{ca}.key",
             "-CAcreateserial", "-days", "2", "-out", f"{name}.pem",
             "-extfile", f"{name}.ext", cwd=directory)


@pytest.fixture(scope="module")
def tls(tmp_path_factory):
    """A MariaDB with TLS; its certificate names only DNS:localhost (not 127.0.0.1)."""
    directory = tmp_path_factory.mktemp("tls")
    _ca(directory, "ca")
    _ca(directory, "other-ca")
    _signed(directory, "server", "ca", "DNS:localhost")
    _signed(directory, "client", "ca", "DNS:replicator")
    server = ThrowawayMariaDB(extra_args=[
        f"--ssl-ca={directory / 'ca.pem'}", f"--ssl-cert={directory / 'server.pem'}",
        f"--ssl-key={directory / 'server.key'}",
    ]).start()
    try:
        with server.root_connection() as connection, connection.cursor() as cursor:
            cursor.execute("ALTER USER 'replicator'@'%' REQUIRE SSL")
            cursor.execute("CREATE DATABASE tls_db")
            cursor.execute("CREATE TABLE tls_db.t (id INT PRIMARY KEY, v VARCHAR(20))")
            cursor.execute("INSERT INTO tls_db.t VALUES (1, 'it''s'), (2, '😀')")
        yield server, directory
    finally:
        server.stop()


def _cipher(source) -> str:
    with connect(source) as connection, connection.cursor() as cursor:
        cursor.execute("SHOW SESSION STATUS LIKE 'Ssl_cipher'")
        return cursor.fetchone()[1]


def test_verify_identity_with_the_ca_reads_binlog_and_snapshot_over_tls(tls):
    server, directory = tls
    source = server.source(host="localhost", ssl_ca=str(directory / "ca.pem"))
    assert source.tls_mode == "VERIFY_IDENTITY"
    assert _cipher(source)  # encrypted
    start = current_position(source)
    with server.root_connection("tls_db") as connection, connection.cursor() as cursor:
        cursor.execute("INSERT INTO tls_db.t VALUES (3, 'x')")
    events = [e for fast in (True, False)
              for e in read_changes(source, start=start, end=None, tables=["tls_db.t"],
                                    server_id=next(_server_ids), fast=fast)
              if isinstance(e, ChangeEvent)]
    assert [e.after for e in events] == [{"id": 3, "v": "x"}] * 2  # fast path and library
    table = read_catalog(source, [("tls_db", "t")]).table("tls_db", "t")
    assert table is not None
    chunks = plan_chunks(source, table, chunk_rows=10)
    rows = read_chunk_batch(source, table, chunks[0], position=start)
    assert sorted(zip(rows.column("id").to_pylist(), rows.column("v").to_pylist(),
                      strict=True)) == [(1, "it's"), (2, "😀"), (3, "x")]


def test_the_server_refuses_plain_connections_of_this_user(tls):
    server, _directory = tls
    with pytest.raises(SourceError, match="refused the login"):
        connect(server.source(host="localhost"))  # ssl off: REQUIRE SSL refuses it


def test_a_wrong_ca_is_refused_naming_ssl_ca(tls):
    server, directory = tls
    source = server.source(host="localhost", ssl_ca=str(directory / "other-ca.pem"))
    with pytest.raises(SourceError) as excinfo:
        connect(source)
    assert not isinstance(excinfo.value, TransientSourceError)
    assert "is not signed by the CA in source.mysql.ssl_ca" in str(excinfo.value)
    assert "ssl_ca" in excinfo.value.hint
    # The system store does not trust a private CA either.
    with pytest.raises(SourceError, match="system's trusted CAs"):
        connect(server.source(host="localhost", ssl=True))


def test_a_host_the_certificate_does_not_name_fails_identity_but_passes_verify_ca(tls):
    server, directory = tls
    ca = str(directory / "ca.pem")
    with pytest.raises(SourceError) as excinfo:
        connect(server.source(host="127.0.0.1", ssl_ca=ca))
    assert not isinstance(excinfo.value, TransientSourceError)
    assert "does not name the host '127.0.0.1'" in str(excinfo.value)
    assert "VERIFY_CA" in excinfo.value.hint
    assert _cipher(server.source(host="127.0.0.1", ssl_ca=ca, ssl_mode="VERIFY_CA"))
    # REQUIRED encrypts without verifying (MySQL's meaning), PREFERRED too when offered.
    assert _cipher(server.source(host="127.0.0.1", ssl_mode="REQUIRED"))
    assert _cipher(server.source(host="127.0.0.1", ssl_mode="PREFERRED"))


def test_a_client_certificate_for_require_x509(tls):
    server, directory = tls
    with server.root_connection() as connection, connection.cursor() as cursor:
        cursor.execute("ALTER USER 'replicator'@'%' REQUIRE X509")
    try:
        ca = str(directory / "ca.pem")
        with pytest.raises(SourceError, match="refused the login"):
            connect(server.source(host="localhost", ssl_ca=ca))
        source = server.source(host="localhost", ssl_ca=ca, ssl_cert=str(directory / "client.pem"),
                               ssl_key=str(directory / "client.key"))
        assert _cipher(source)
        with pytest.raises(SourceError, match="cannot load the TLS files") as excinfo:
            connect(server.source(host="localhost", ssl_ca=ca,
                                  ssl_cert=str(directory / "missing.pem"),
                                  ssl_key=str(directory / "client.key")))
        assert "ssl_cert" in str(excinfo.value)
    finally:
        with server.root_connection() as connection, connection.cursor() as cursor:
            cursor.execute("ALTER USER 'replicator'@'%' REQUIRE SSL")


def test_required_against_a_server_without_tls_is_refused(mariadb):
    """The suite's MariaDB has no certificate: REQUIRED must not fall back to plain text."""
    with mariadb.root_connection() as connection, connection.cursor() as cursor:
        cursor.execute("SHOW GLOBAL VARIABLES LIKE 'have_ssl'")
        have_ssl = cursor.fetchone()[1]
    if have_ssl == "YES":
        pytest.skip("this MariaDB build enables TLS with its own certificate")
    source = mariadb.source(ssl_mode="REQUIRED")
    with pytest.raises(SourceError) as excinfo:
        connect(source)
    assert not isinstance(excinfo.value, TransientSourceError)
    assert "TLS" in str(excinfo.value) and "PREFERRED" in excinfo.value.hint
    assert _cipher(mariadb.source(ssl_mode="PREFERRED")) == ""  # falls back: not offered


def test_a_pushed_down_filter_reads_through_the_tls_path(tls):
    # TLS sources read through PyMySQL with bind parameters for the key bounds; the pushed-down
    # predicate (hex strings, numbers) sits beside them unchanged.
    from replicator.plan.expressions.spark_types import spark_type_of
    from replicator.plan.pushdown import pushdown

    server, directory = tls
    source = server.source(host="localhost", ssl_ca=str(directory / "ca.pem"))
    table = read_catalog(source, [("tls_db", "t")]).table("tls_db", "t")
    inputs = {c.name: spark_type_of(c.mysql_type) for c in table.columns}
    predicate = pushdown("v = '😀' OR id < 1", inputs, table.columns).sql(dialect="mysql")
    assert "x'f09f9880'" in predicate
    lower, upper = plan_chunks(source, table, chunk_rows=1)[:2]
    rows = read_chunk_batch(source, table, upper, position=current_position(source),
                            predicate=predicate)
    assert (upper.lower, upper.upper) == ((1,), (2,))  # the key range still bounds the read
    assert rows.column("id").to_pylist() == [2]
    assert read_chunk_batch(source, table, lower, position=current_position(source),
                            predicate=predicate).num_rows == 0
