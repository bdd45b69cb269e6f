"""TLS settings for PyMySQL: off means off (no SSL context per connect), on means verified."""

from __future__ import annotations

import ssl

from replicator.model.pipeline import MySQLSource
from replicator.source.connection import connection_settings


def test_ssl_false_disables_tls_so_no_context_is_built_per_connect():
    settings = connection_settings(MySQLSource(host="db", ssl=False))
    assert settings["ssl_disabled"] is True
    assert "ssl" not in settings


def test_ssl_true_verifies_the_certificate_and_the_host_name():
    settings = connection_settings(MySQLSource(host="db", ssl=True))
    assert "ssl_disabled" not in settings
    context = settings["ssl"]
    assert isinstance(context, ssl.SSLContext)
    assert context.verify_mode == ssl.CERT_REQUIRED and context.check_hostname


def test_pymysql_keeps_the_verifying_context():
    """What PyMySQL does with our setting (no server needed: it builds the context in
    __init__ before connecting, and defer_connect stops it there)."""
    import pymysql

    connection = pymysql.connect(**connection_settings(MySQLSource(host="db", ssl=True)),
                                 defer_connect=True)
    assert connection.ssl and connection.ctx.verify_mode == ssl.CERT_REQUIRED
    assert connection.ctx.check_hostname
    plain = pymysql.connect(**connection_settings(MySQLSource(host="db")), defer_connect=True)
    assert not plain.ssl and getattr(plain, "ctx", None) is None


def test_tls_mode_defaults_to_verify_identity_whenever_tls_is_asked_for():
    assert MySQLSource().tls_mode == "DISABLED"
    assert MySQLSource(ssl=True).tls_mode == "VERIFY_IDENTITY"
    assert MySQLSource(ssl_ca="/ca.pem").tls_mode == "VERIFY_IDENTITY"
    assert MySQLSource(ssl_mode="VERIFY_CA", ssl_ca="/ca.pem").tls_mode == "VERIFY_CA"
    # As MySQL's client: REQUIRED with a CA verifies against it.
    assert MySQLSource(ssl_mode="REQUIRED", ssl_ca="/ca.pem").tls_mode == "VERIFY_CA"
    required = connection_settings(MySQLSource(ssl_mode="REQUIRED"))["ssl"]
    assert required.verify_mode == ssl.CERT_NONE and not required.check_hostname
    verify_ca = connection_settings(MySQLSource(ssl_mode="VERIFY_CA"))["ssl"]
    assert verify_ca.verify_mode == ssl.CERT_REQUIRED and not verify_ca.check_hostname
    preferred = connection_settings(MySQLSource(ssl_mode="PREFERRED"))
    assert "ssl" not in preferred and "ssl_disabled" not in preferred  # PyMySQL's own PREFERRED
