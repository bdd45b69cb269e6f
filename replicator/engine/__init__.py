"""The run: ``runner`` tells its story (catalog -> plan -> sink -> start -> snapshot -> stream)
over four packages, each one concern:

- ``job/``: the Spark job (session, cluster launch, the binlog's decode tasks, the landing zone);
- ``state/``: the run's state (checkpoint, lease, ``run.json``);
- ``follow/``: schema-change following (what a DDL means, the policy, how it reaches the target);
- ``apply/``: a micro-batch's files -> the sink, exactly once, and what each batch reports.

``stream`` (the micro-batch loop), ``start`` (where a run starts), ``snapshot`` and ``recopy``
(the copies) sit beside the runner;
the only package that imports pyspark.
"""
