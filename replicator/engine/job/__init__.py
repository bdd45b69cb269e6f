"""The Spark job: the session, how a run reaches a cluster, the binlog data source on the
executors and the landing zone its tasks write (Parquet files + one manifest row per file)."""
