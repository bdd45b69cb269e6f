"""The apply: a micro-batch's landed files -> staging rows -> the sink, exactly once, and
what each applied batch reports (log lines, Prometheus)."""
