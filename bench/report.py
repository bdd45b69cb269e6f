"""The results: one JSON file per day in ``bench/results/`` and a plain-text table.

The table puts each figure next to the issue-8 target it answers (ratios within one run).
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

RESULTS_DIR = Path(__file__).resolve().parent / "results"


def write_json(results: dict[str, Any], path: Path) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(results, indent=2, ensure_ascii=False, default=str) + "\n")
    return path


def _fmt(value: Any, unit: str = "") -> str:
    if value is None:
        return "-"
    if isinstance(value, float):
        text = f"{value:,.3f}" if abs(value) < 10 else f"{value:,.1f}"
    elif isinstance(value, int):
        text = f"{value:,}"
    else:
        text = str(value)
    return f"{text} {unit}".strip()


def _cause(entry: dict[str, Any]) -> str:
    """The most telling line of a failed run: a JVM error first, else the last error line."""
    lines = entry.get("error_lines") or entry["error"].splitlines()
    jvm = [line for line in lines if "java.lang." in line or "OutOfMemory" in line]
    return (jvm or lines or ["?"])[0 if jvm else -1][:100]


def _rows(results: dict[str, Any]) -> Iterator[tuple[str, str, str, str]]:
    """(section, figure, value, target or note)."""
    workload = results.get("workload")
    if workload:
        yield ("workload", "row changes (statements)",
               f"{workload['changes']:,} ({workload['statements']:,})",
               f"{workload['transactions']} transactions, {workload['binlog_bytes'] / 2**20:.0f} MiB binlog")
        yield ("workload", "generation rate", _fmt(workload["changes_per_s"], "changes/s"),
               "multi-statement transactions, one round trip each")
    decode = results.get("decode") or {}
    library = (decode.get("library") or {}).get("rows_per_s")
    for reader in ("library", "read_changes_library", "read_changes", "fast"):
        entry = decode.get(reader)
        if not entry:
            continue
        if "skipped" in entry:
            yield ("decode", reader, "skipped", entry["skipped"])
            continue
        if "error" in entry:
            yield ("decode", reader, "error", entry["error"].splitlines()[0][:80])
            continue
        ratio = f"{entry['rows_per_s'] / library:.2f}x library" if library else ""
        target = {"fast": " (target >= 10x, stretch 15x)",
                  "read_changes": " (the engine's reader)"}.get(reader, "")
        yield ("decode", reader, _fmt(entry["rows_per_s"], "rows/s"),
               f"{ratio}{target}; {entry['cpu_s_per_1k']} cpu s/1k")
    identical = decode.get("fast_identical_to_read_changes")
    if identical and "error" not in identical:
        yield ("decode", "fast == library path", str(identical["identical"]),
               f"first {identical['changes_compared']:,} ChangeEvents, every field (untimed)")
    profile = results.get("profile")
    if profile and "error" not in profile:
        for stage, cost in profile["added_us_per_row"].items():
            rate = profile["stages"][stage]["rows_per_s"]
            yield ("profile", stage, f"+{cost:.1f} us/row",
                   f"cumulative {rate:,.0f} rows/s" if rate else "")
    elif profile:
        yield ("profile", "run", "error", _cause(profile))
    for target_name, entry in (results.get("e2e") or {}).items():
        section = f"e2e {target_name}"
        if "error" in entry:
            yield (section, "run", "error", _cause(entry))
            continue
        goal = " (target >= 1.0x, stretch 1.5x)" if target_name == "duckdb" else ""
        yield (section, "changes/s (wall, incl. start-up)", _fmt(entry["changes_per_s"]),
               f"{entry.get('ratio_to_library_decode', '-')}x library{goal}")
        yield (section, "changes/s (streaming)", _fmt(entry["changes_per_s_streaming"]),
               f"{entry.get('ratio_to_library_decode_streaming', '-')}x library")
        phases = entry.get("phases_seconds", {})
        yield (section, "wall time split (s)", _fmt(entry["wall_seconds"], "s"),
               " ".join(f"{k}={v:.1f}" for k, v in phases.items()))
        usage = entry.get("usage", {})
        yield (section, "peak RSS (tree)", _fmt(usage.get("peak_rss_mib"), "MiB"),
               ", ".join(f"{k} {v:.0f}" for k, v in usage.get("peak_rss_mib_by_role", {}).items()))
        yield (section, "CPU per 1k changes", _fmt(entry.get("cpu_s_per_1k_changes"), "s"),
               f"MariaDB server {entry.get('server_cpu_seconds')} s in total")
        if "target_matches_source" in entry:
            yield (section, "target rows = source rows", str(entry["target_matches_source"]),
                   f"{entry['changes']:,} of {entry['expected_changes']:,} changes applied")
    parts = results.get("decode_partitions")
    if parts:
        if "error" in parts:
            yield ("decode partitions", "run", "error", parts["error"].splitlines()[0][:80])
        else:
            n = parts["partitions"]
            yield ("decode partitions", f"1 vs {n} partitions, decode only",
                   f"{parts['rows_per_s_1']:,} / {parts[f'rows_per_s_{n}']:,} rows/s = "
                   f"{parts['ratio']}x", f"target >= 1.6x; load {parts['load_average'][0]}")
    latency = results.get("latency")
    if latency:
        if "error" in latency:
            yield ("latency", "run", "error", latency["error"].splitlines()[0][:80])
        else:
            yield ("latency", f"p50 / p95 / p99 at {latency['achieved_rate']:.0f}/s",
                   f"{latency['p50_s']} / {latency['p95_s']} / {latency['p99_s']} s",
                   f"max_delay {latency['max_delay']} (target p50 <= 2 s, p99 <= 5 s)")
    snapshot = results.get("snapshot")
    if snapshot:
        if "error" in snapshot:
            yield ("snapshot", "run", "error", _cause(snapshot))
        else:
            yield ("snapshot", f"{snapshot['rows']:,} rows", _fmt(snapshot["rows_per_s"], "rows/s"),
                   f"{snapshot.get('ratio_to_library_decode', '-')}x library (target >= 2x)")
            yield ("snapshot", "read / apply (s)",
                   f"{snapshot['read_seconds']:.1f} / {snapshot['apply_seconds']:.1f}",
                   f"{snapshot['chunks']} chunks; wall {snapshot['wall_seconds']:.1f} s incl. start-up")
            yield ("snapshot", "peak RSS (tree)", _fmt(snapshot["usage"]["peak_rss_mib"], "MiB"),
                   f"CPU {snapshot['cpu_s_per_1k_rows']} s per 1k rows")
    big = results.get("big_transaction")
    if big:
        if "error" in big:
            yield ("big txn", "run", "error", _cause(big))
            yield ("big txn", "peak RSS until it failed", _fmt(big["usage"]["peak_rss_mib"], "MiB"),
                   ", ".join(f"{k} {v:.0f}" for k, v in big["usage"]["peak_rss_mib_by_role"].items()))
            retry = big.get("retry")
            if retry:
                label = "retry " + " ".join(retry["conf"])
                if "error" in retry:
                    yield ("big txn", label, "error", _cause(retry))
                else:
                    yield ("big txn", f"{label}: peak RSS", _fmt(retry["peak_rss_gib"], "GiB"),
                           ", ".join(f"{k} {v:.0f} MiB" for k, v
                                     in retry["usage"]["peak_rss_mib_by_role"].items())
                           + f"; {retry['changes_per_s']:,.0f} changes/s wall")
        else:
            yield ("big txn", f"{big['rows']:,}-row transaction peak RSS",
                   _fmt(big["peak_rss_gib"], "GiB"),
                   "target < 3 GiB, all processes; "
                   + ", ".join(f"{k} {v:.0f} MiB" for k, v in big["usage"]["peak_rss_mib_by_role"].items()))
            yield ("big txn", "changes/s (wall)", _fmt(big["changes_per_s"]),
                   f"{big['batches']} batch(es), wall {big['wall_seconds']:.1f} s; read on the "
                   f"driver in slices: {big.get('read_on_driver')}")
            if "target_matches_source" in big:
                yield ("big txn", "target rows = source rows", str(big["target_matches_source"]),
                       f"{big['target_rows'] or 0:,} of {big['rows']:,} rows")
    startup = results.get("startup")
    if startup:
        for command in ("validate", "plan_offline", "python_baseline"):
            entry = startup[command]
            goal = {"validate": "target < 0.3 s", "plan_offline": "target < 1 s",
                    "python_baseline": "bare interpreter"}[command]
            yield ("startup", command, _fmt(entry["median_s"], "s"), f"median of {entry['repeats']}; {goal}")


def render_table(results: dict[str, Any]) -> str:
    rows = list(_rows(results))
    header = ("section", "figure", "value", "target / note")
    widths = [max(len(header[i]), *(len(row[i]) for row in rows)) if rows else len(header[i])
              for i in range(3)]
    lines = ["  ".join(h.ljust(w) for h, w in zip(header[:3], widths, strict=True)) + "  " + header[3]]
    lines.append("-" * (sum(widths) + 6 + len(header[3])))
    for row in rows:
        lines.append("  ".join(c.ljust(w) for c, w in zip(row[:3], widths, strict=True)) + "  " + row[3])
    env = results.get("environment", {})
    lines.append("")
    lines.append(f"{env.get('cores')} cores, load average {env.get('load_average_start')} -> "
                 f"{results.get('load_average_end')}, commit {str(env.get('git_commit'))[:10]}, "
                 f"MariaDB {env.get('mariadb')}")
    return "\n".join(lines)
