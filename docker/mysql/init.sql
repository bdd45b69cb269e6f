-- Runs once, when the MySQL container initialises its datadir (as root, database `shop`).
-- The replicator user gets the least privileges it needs (docs/mysql-setup.md):
--   REPLICATION SLAVE   stream the binlog
--   REPLICATION CLIENT  SHOW BINARY LOG STATUS / SHOW BINARY LOGS (positions, retention)
--   SELECT              catalog (information_schema) and the initial snapshot
CREATE USER IF NOT EXISTS 'replicator'@'%' IDENTIFIED BY 'replicator-demo';
GRANT REPLICATION SLAVE, REPLICATION CLIENT, SELECT ON *.* TO 'replicator'@'%';

USE shop;

CREATE TABLE customers (
  id INT PRIMARY KEY,
  name VARCHAR(100) NOT NULL,
  email VARCHAR(200) NULL,
  tier ENUM('free','pro','enterprise') NOT NULL DEFAULT 'free'
);

CREATE TABLE orders (
  id INT PRIMARY KEY,
  customer_id INT NOT NULL,
  status VARCHAR(20) NOT NULL,
  total DECIMAL(12,2) NOT NULL,
  updated_at DATETIME(6) NOT NULL
);

INSERT INTO customers (id, name, email, tier) VALUES
  (1, 'Ada Lovelace', 'ada@example.com', 'pro'),
  (2, 'Grace O''Hopper', NULL, 'enterprise'),
  (3, 'Zoë "Z" Backslash\\', 'zoe@example.com', 'free'),
  (4, 'None', 'literal-none@example.com', 'free');

INSERT INTO orders (id, customer_id, status, total, updated_at) VALUES
  (100, 1, 'paid', 19.99, '2024-01-02 03:04:05.123456'),
  (101, 2, 'new', 1234567890.12, '2024-01-02 03:04:06.000001'),
  (102, 3, 'shipped', 0.01, '2024-02-29 23:59:59.999999'),
  (103, 1, 'new', 5.00, '2024-03-01 00:00:00.000000');
