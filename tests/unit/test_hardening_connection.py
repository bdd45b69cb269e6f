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
