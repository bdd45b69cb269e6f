"""The PySpark job: the streaming data source, the per-batch applier, the runner, launch."""
