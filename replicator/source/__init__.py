"""MySQL side: connections, binlog positions, the catalog, binlog change events, snapshots.

One module per job: ``connection`` (connect, classify driver errors), ``positions`` (binlog
head and availability), ``catalog`` (information_schema), ``binlog`` (the only importer of
pymysqlreplication), ``snapshot`` (primary-key chunks), ``values`` (one value normalisation
for both the binlog and the snapshot path), ``throwaway`` (a local MariaDB for tests).
Nothing here imports a driver at module level.
"""
