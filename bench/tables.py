"""The benchmark's tables: awkward columns an OLTP workload changes (see ``workload``)."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class TableSpec:
    """One workload table: its DDL and every column's MySQL type (for ``source_type``)."""

    name: str
    key: str
    columns: tuple[tuple[str, str], ...]  # (column, MySQL column type as information_schema spells it)
    ddl: str
    weight: int  # share of the changes that go to this table


TABLES: tuple[TableSpec, ...] = (
    TableSpec(
        name="customers",
        key="id",
        columns=(
            ("id", "int unsigned"),
            ("email", "varchar(191)"),
            ("full_name", "varchar(100)"),
            ("balance", "decimal(38,10)"),
            ("lifetime_points", "bigint unsigned"),
            ("tier", "enum('free','silver','gold','it''s complicated')"),
            ("last_login", "datetime(6)"),
            ("preferences", "json"),
            ("updated_at", "timestamp"),
        ),
        ddl="""CREATE TABLE customers (
  id INT UNSIGNED NOT NULL PRIMARY KEY,
  email VARCHAR(191) NOT NULL,
  full_name VARCHAR(100) NULL,
  balance DECIMAL(38,10) NOT NULL,
  lifetime_points BIGINT UNSIGNED NOT NULL,
  tier ENUM('free','silver','gold','it''s complicated') NOT NULL,
  last_login DATETIME(6) NULL,
  preferences JSON NULL,
  updated_at TIMESTAMP NOT NULL DEFAULT CURRENT_TIMESTAMP
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_unicode_ci""",
        weight=20,
    ),
    TableSpec(
        name="orders",
        key="id",
        columns=(
            ("id", "bigint unsigned"),
            ("customer_id", "int unsigned"),
            ("status", "enum('new','paid','shipped','cancelled')"),
            ("amount", "decimal(12,2)"),
            ("discount", "decimal(12,2)"),
            ("note", "varchar(255)"),
            ("created_at", "datetime(6)"),
            ("updated_at", "timestamp"),
        ),
        ddl="""CREATE TABLE orders (
  id BIGINT UNSIGNED NOT NULL PRIMARY KEY,
  customer_id INT UNSIGNED NOT NULL,
  status ENUM('new','paid','shipped','cancelled') NOT NULL,
  amount DECIMAL(12,2) NOT NULL,
  discount DECIMAL(12,2) NULL,
  note VARCHAR(255) NULL,
  created_at DATETIME(6) NOT NULL,
  updated_at TIMESTAMP NOT NULL DEFAULT CURRENT_TIMESTAMP
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_unicode_ci""",
        weight=45,
    ),
    TableSpec(
        name="events",
        key="id",
        columns=(
            ("id", "bigint unsigned"),
            ("order_id", "bigint unsigned"),
            ("kind", "enum('view','click','cart','checkout','refund')"),
            ("payload", "json"),
            ("weight", "decimal(38,10)"),
            ("label", "varchar(64)"),
            ("occurred_at", "datetime(6)"),
        ),
        ddl="""CREATE TABLE events (
  id BIGINT UNSIGNED NOT NULL PRIMARY KEY,
  order_id BIGINT UNSIGNED NULL,
  kind ENUM('view','click','cart','checkout','refund') NOT NULL,
  payload JSON NULL,
  weight DECIMAL(38,10) NULL,
  label VARCHAR(64) NOT NULL,
  occurred_at DATETIME(6) NOT NULL
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_unicode_ci""",
        weight=35,
    ),
)
