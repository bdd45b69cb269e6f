"""The Spark job: the session, how a run reaches a cluster, the binlog cut into micro-batches
whose decode tasks run on the executors, and the landing zone those tasks write (Parquet
files + one manifest row per file)."""
