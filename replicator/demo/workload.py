"""The demo schema and workload: every awkward value, and the change patterns CDC gets wrong.

Three tables in one database:

- ``customers`` (id, name, email, tier) and ``orders`` (id, customer_id, status, total,
  updated_at), changed together in multi-table transactions;
- ``awkward``: one column per value that is hard to carry exactly (quotes, backslashes,
  newlines, emoji, NULL next to the string 'None', DECIMAL(38,10), DATETIME(6), TIMESTAMP(6),
  negative and > 24 h TIME, BIGINT UNSIGNED max, JSON, BLOB, ENUM, SET, BIT(1), BIT(8),
  TINYINT(1), YEAR, zero dates).

``apply_changes`` inserts, updates (one key several times inside one transaction), deletes,
changes a primary key, and writes multi-table transactions, reproducibly from a seed. Values
are always bound parameters (never pasted into SQL).
"""

from __future__ import annotations

import datetime as dt
import random
from decimal import Decimal
from typing import Any

BIGINT_UNSIGNED_MAX = 18_446_744_073_709_551_615

SCHEMA = (
    """CREATE TABLE customers (
        id INT PRIMARY KEY,
        name VARCHAR(100) NOT NULL,
        email VARCHAR(200) NULL,
        tier ENUM('free','pro','enterprise') NOT NULL DEFAULT 'free'
    )""",
    """CREATE TABLE orders (
        id INT PRIMARY KEY,
        customer_id INT NOT NULL,
        status VARCHAR(20) NOT NULL,
        total DECIMAL(12,2) NOT NULL,
        updated_at DATETIME(6) NOT NULL
    )""",
    """CREATE TABLE awkward (
        id BIGINT UNSIGNED PRIMARY KEY,
        title VARCHAR(255) NULL,
        note TEXT NULL,
        amount DECIMAL(38,10) NULL,
        happened_at DATETIME(6) NULL,
        recorded_at TIMESTAMP(6) NULL DEFAULT NULL,
        duration TIME(6) NULL,
        big BIGINT UNSIGNED NULL,
        payload JSON NULL,
        raw BLOB NULL,
        mood ENUM('happy','sad','it''s complicated') NULL,
        tags SET('red','green','blue') NULL,
        flag BIT(1) NULL,
        flags8 BIT(8) NULL,
        is_active TINYINT(1) NULL,
        born DATE NULL,
        model_year YEAR NULL,
        ratio DOUBLE NULL
    )""",
)

AWKWARD_STRINGS = (
    "it's \"quoted\"",
    "back\\slash \\n not a newline",
    "line one\nline two\r\nline three\ttab",
    "emoji 🐬🚀 and 漢字",
    "None",
    "",
    "NULL",
    "'; DROP TABLE awkward; --",
)
AWKWARD_TIMES = (
    dt.timedelta(hours=-838, minutes=-59, seconds=-59),
    dt.timedelta(hours=838, minutes=59, seconds=59),
    dt.timedelta(hours=25, microseconds=123456),
    dt.timedelta(0),
    dt.timedelta(seconds=-1, microseconds=500000),
)
AWKWARD_JSON = (
    '{"a": 1, "b": [true, false, null], "s": "quote \\" and emoji 🐬"}',
    "[]",
    '{"nested": {"deep": {"x": 1.5e300}}}',
    '"just a string"',
    "null",
)


def create_schema(connection: Any, database: str) -> None:
    with connection.cursor() as cursor:
        cursor.execute(f"CREATE DATABASE IF NOT EXISTS `{database}`")
        cursor.execute(f"USE `{database}`")
        for statement in SCHEMA:
            cursor.execute(statement)


def awkward_row(rng: random.Random, row_id: int) -> dict[str, Any]:
    """One row of ``awkward``; every value kind shows up within a few rows."""
    i = row_id
    return {
        "id": BIGINT_UNSIGNED_MAX - i if i % 7 == 0 else i,
        "title": AWKWARD_STRINGS[i % len(AWKWARD_STRINGS)] + f" #{i}",
        "note": None if i % 3 == 0 else AWKWARD_STRINGS[(i + 4) % len(AWKWARD_STRINGS)],
        "amount": Decimal("9999999999999999999999999999.9999999999") if i % 5 == 0
        else Decimal(rng.randint(-10**12, 10**12)) / Decimal(10**10),
        "happened_at": dt.datetime(2024, 2, 29, 23, 59, 59, 999999) if i % 4 == 0
        else dt.datetime(2000, 1, 1) + dt.timedelta(seconds=rng.randint(0, 10**9),
                                                     microseconds=rng.randint(0, 999999)),
        "recorded_at": None if i % 6 == 0
        else dt.datetime(2021, 3, 28, 1, 30, 0, i % 1000000, tzinfo=dt.UTC),
        "duration": AWKWARD_TIMES[i % len(AWKWARD_TIMES)],
        "big": BIGINT_UNSIGNED_MAX if i % 2 == 0 else rng.randint(0, 2**63),
        "payload": None if i % 9 == 0 else AWKWARD_JSON[i % len(AWKWARD_JSON)],
        "raw": bytes(range(256))[: i % 40] if i % 8 else b"\x00\xff'\\\n",
        "mood": ("happy", "sad", "it's complicated", None)[i % 4],
        "tags": ("", "red", "green,blue", "red,green,blue", None)[i % 5],
        "flag": i % 2,
        "flags8": i % 256,
        "is_active": (0, 1, None)[i % 3],
        "born": "0000-00-00" if i % 10 == 3 else dt.date(1970 + i % 60, 1 + i % 12, 1 + i % 28),
        "model_year": 1901 + i % 254,
        "ratio": rng.choice((0.1, -2.5e-300, 1.7976931348623157e308, 3.0, -0.0)),
    }


def _insert(cursor: Any, table: str, row: dict[str, Any]) -> None:
    columns = ", ".join(f"`{name}`" for name in row)
    marks = ", ".join(["%s"] * len(row))
    cursor.execute(f"INSERT INTO `{table}` ({columns}) VALUES ({marks})", _bind(row))


def _bind(row: dict[str, Any]) -> list[Any]:
    # PyMySQL cannot bind an aware datetime or a timedelta with sign; pass them as text.
    values = []
    for value in row.values():
        if isinstance(value, dt.datetime) and value.tzinfo is not None:
            value = value.astimezone(dt.UTC).replace(tzinfo=None).isoformat(sep=" ")
        elif isinstance(value, dt.timedelta):
            micros = (value.days * 86_400 + value.seconds) * 1_000_000 + value.microseconds
            sign = "-" if micros < 0 else ""
            seconds, fraction = divmod(abs(micros), 1_000_000)
            hours, rest = divmod(seconds, 3600)
            value = f"{sign}{hours}:{rest // 60:02d}:{rest % 60:02d}.{fraction:06d}"
        values.append(value)
    return values


def _session(cursor: Any, database: str) -> None:
    cursor.execute(f"USE `{database}`")
    # Zero dates are allowed in the demo on purpose (legacy schemas have them); TIMESTAMP
    # values are written in UTC.
    cursor.execute("SET SESSION sql_mode = 'NO_ENGINE_SUBSTITUTION'")
    cursor.execute("SET SESSION time_zone = '+00:00'")


def seed(connection: Any, database: str, *, customers: int = 50, orders: int = 200,
         awkward: int = 60, seed_value: int = 1) -> None:
    """The rows that exist before the pipeline starts (what the snapshot copies)."""
    rng = random.Random(seed_value)
    with connection.cursor() as cursor:
        _session(cursor, database)
        cursor.execute("BEGIN")
        for i in range(1, customers + 1):
            _insert(cursor, "customers", {"id": i, "name": f"customer {i} O'Brien",
                                          "email": None if i % 4 == 0 else f"c{i}@example.com",
                                          "tier": ("free", "pro", "enterprise")[i % 3]})
        for i in range(1, orders + 1):
            _insert(cursor, "orders", _order(rng, i, customers))
        for i in range(1, awkward + 1):
            _insert(cursor, "awkward", awkward_row(rng, i))
        cursor.execute("COMMIT")


def _order(rng: random.Random, order_id: int, customers: int) -> dict[str, Any]:
    return {
        "id": order_id,
        "customer_id": rng.randint(1, customers),
        "status": rng.choice(("new", "paid", "shipped")),
        "total": Decimal(rng.randint(0, 10**8)) / 100,
        "updated_at": dt.datetime(2024, 1, 1) + dt.timedelta(microseconds=rng.randint(0, 10**13)),
    }


def apply_changes(connection: Any, database: str, *, rounds: int = 20, seed_value: int = 2,
                  first_new_id: int = 100_000) -> int:
    """A reproducible workload; returns the number of row changes it made (about)."""
    rng = random.Random(seed_value)
    changes = 0
    next_id = first_new_id
    with connection.cursor() as cursor:
        _session(cursor, database)
        cursor.execute("SELECT MAX(id) FROM customers")
        customers = int(cursor.fetchone()[0] or 1)
        for _ in range(rounds):
            # A multi-table transaction: new order, customer upgraded, old order shipped.
            cursor.execute("BEGIN")
            _insert(cursor, "orders", _order(rng, next_id, customers))
            cursor.execute("UPDATE customers SET tier = %s WHERE id = %s",
                           (rng.choice(("free", "pro", "enterprise")), rng.randint(1, customers)))
            cursor.execute("UPDATE orders SET status = 'shipped', updated_at = %s WHERE id = %s",
                           (dt.datetime(2025, 1, 1, 0, 0, 0, rng.randint(0, 999999)),
                            rng.randint(1, next_id)))
            cursor.execute("COMMIT")
            changes += 3
            # One key updated several times in one transaction (and so in one batch).
            cursor.execute("BEGIN")
            for step in range(4):
                cursor.execute("UPDATE orders SET total = total + %s, status = %s WHERE id = %s",
                               (Decimal("0.01") * (step + 1), f"step{step}", next_id))
            cursor.execute("COMMIT")
            changes += 4
            # Awkward rows: insert, update, delete.
            awkward_id = next_id
            _insert(cursor, "awkward", awkward_row(rng, awkward_id))
            update = awkward_row(rng, awkward_id + 1)
            update.pop("id")
            assignments = ", ".join(f"`{name}` = %s" for name in update)
            cursor.execute(f"UPDATE awkward SET {assignments} WHERE id = %s",
                           [*_bind(update), rng.randint(1, 60)])
            cursor.execute("DELETE FROM awkward WHERE id = %s", (rng.randint(1, 60),))
            changes += 3
            # A primary key change (delete old key + insert new key in the target).
            cursor.execute("UPDATE orders SET id = %s WHERE id = %s",
                           (next_id + 500_000, rng.randint(1, 200)))
            cursor.execute("DELETE FROM orders WHERE id = %s", (rng.randint(1, 200),))
            changes += 2
            next_id += 1
    return changes
