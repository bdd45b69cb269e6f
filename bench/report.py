"""The results: one JSON file per day in ``bench/results/`` and a plain-text table.

The table puts each figure next to the issue-8 target it answers (ratios within one run).
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from bench.cpu_budget import LABELS

RESULTS_DIR = Path(__file__).resolve().parent / "results"


def write_json(results: dict[str, Any], path: Path) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(results, indent=2, ensure_ascii=False, default=str) + "\n")
    return path


def _pss(section: str, usage: dict[str, Any]) -> Iterator[tuple[str, str, str, str]]:
    """The tree's peak PSS (shared pages counted once), where the run measured it."""
    if usage.get("peak_pss_mib"):
        yield (section, "peak PSS (tree)", _fmt(usage["peak_pss_mib"], "MiB"),
               "shared pages split among sharers; " + ", ".join(
                   f"{k} {v:.0f}" for k, v in usage.get("peak_pss_mib_by_role", {}).items()))


def _at_peak(section: str, entry: dict[str, Any]) -> Iterator[tuple[str, str, str, str]]:
    """The processes of the tree's peak sample, largest first (results since 2026-11-27)."""
    processes = (entry.get("usage") or {}).get("at_peak_mib")
    if processes:
        yield (section, "at the peak, per process (MiB)", f"{len(processes)} processes",
               ", ".join(f"{label} {rss:.0f}" for _, label, rss in processes))


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
        yield from _pss(section, usage)
        yield (section, "CPU per 1k changes", _fmt(entry.get("cpu_s_per_1k_changes"), "s"),
               f"MariaDB server {entry.get('server_cpu_seconds')} s in total")
        if "driver_cpu_share_streaming" in entry:
            window = entry.get("streaming_cpu_seconds_by_role", {})
            where = ("the driver holds the embedded DuckDB's apply" if entry.get("target") == "duckdb"
                     else "the warehouse is a process of its own")
            yield (section, "driver share of the stream's CPU",
                   f"{100 * entry['driver_cpu_share_streaming']:.0f}%",
                   "target <= 5%; " + ", ".join(f"{k} {v:.1f} s" for k, v in window.items())
                   + f"; {where}")
        if "target_matches_source" in entry:
            yield (section, "target rows = source rows", str(entry["target_matches_source"]),
                   f"{entry['changes']:,} of {entry['expected_changes']:,} changes applied")
    for target_name, budget in (results.get("cpu_budget") or {}).items():
        section = f"cpu {target_name}"  # bench/cpu_budget.py: us of CPU per change by part
        if "error" in budget:
            yield (section, "budget", "error", str(budget["error"]).splitlines()[0][:80])
            continue
        for part, value in budget["us_per_change"].items():
            yield (section, LABELS[part], _fmt(value, "us/change"),
                   "target <= 25" if part == "tree" else "")
        share = budget.get("driver_share_of_tree")
        yield (section, "driver's share of the tree's CPU",
               "-" if share is None else f"{100 * share:.0f}%", "target <= 5% (streaming)")
    peer = results.get("peer")  # bench/peer.py: Debezium embedded on the e2e range
    if peer:
        if "error" in peer:
            yield ("peer", "debezium", "error", _cause(peer))
        else:
            yield ("peer", "debezium changes/s (wall / streaming)",
                   f"{_fmt(peer['changes_per_s'])} / {_fmt(peer['changes_per_s_streaming'])}",
                   f"replicator e2e duckdb = {peer.get('replicator_to_debezium', '-')}x "
                   f"debezium (target >= 3x); {peer['changes']:,} changes, "
                   f"first event after {peer['first_event_after_seconds']} s")
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
                   f"max_delay {latency['max_delay']} (target p50 <= 1 s, p99 <= 3 s: issue 15)")
    recopy = results.get("recopy")
    if recopy:
        if "error" in recopy:
            yield ("recopy", "run", "error", _cause(recopy))
        else:
            during = recopy["during"]
            yield ("recopy", f"{recopy['copied_rows']:,} rows copied again",
                   f"{recopy['copy_seconds']} s, {_fmt(recopy['rows_per_s'], 'rows/s')}",
                   f"while the others stream at {recopy['rate']:.0f} changes/s")
            yield ("recopy", "others' lag during the copy p50 / p99 / max",
                   f"{during['p50_s']} / {during['p99_s']} / {during['max_s']} s",
                   f"before it: p99 {recopy['before']['p99_s']} s (target < 5 s: issue 18)")
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
            yield from _pss("big txn", big["usage"])
            yield from _at_peak("big txn", big)
            if big.get("duckdb_settings"):
                yield ("big txn", "target.duckdb.settings (every mode)",
                       ", ".join(f"{k}={v}" for k, v in big["duckdb_settings"].items()),
                       "bench/run --bigtxn-duckdb")
    for mode, other in (results.get("big_transaction_modes") or {}).items():
        label = f"big txn {mode}"
        if "error" in other:
            yield (label, "run", "error", _cause(other))
            continue
        yield (label, "peak RSS", _fmt(other["peak_rss_gib"], "GiB"),
               "target < 1.5 GiB, all processes; " + ", ".join(
                   f"{k} {v:.0f} MiB" for k, v in other["usage"]["peak_rss_mib_by_role"].items()))
        yield from _pss(label, other["usage"])
        yield (label, "changes/s (wall)", _fmt(other["changes_per_s"]),
               f"wall {other['wall_seconds']:.1f} s; target rows = source rows: "
               f"{other.get('target_matches_source')}")
        yield from _at_peak(label, other)
    yield from _atomic_rows(results.get("atomic") or {})
    startup = results.get("startup")
    if startup:
        for command in ("validate", "plan_offline", "python_baseline"):
            entry = startup[command]
            goal = {"validate": "target < 0.3 s", "plan_offline": "target < 1 s",
                    "python_baseline": "bare interpreter"}[command]
            yield ("startup", command, _fmt(entry["median_s"], "s"), f"median of {entry['repeats']}; {goal}")


def _atomic_rows(atomic: dict[str, Any]) -> Iterator[tuple[str, str, str, str]]:
    """target.atomic on vs off (``bench.e2e.run_atomic``), per target and batch size."""
    if "error" in atomic:
        yield ("atomic", "run", "error", _cause(atomic))
        return
    for setting, entry in atomic.items():
        for key, what in (("apply_seconds", "stage + merge"), ("streaming_seconds", "streaming")):
            figures = entry.get(key) or {}
            if figures.get("cost_pct") is None:
                continue
            yield ("atomic", f"{setting}: {what} cost", f"{figures['cost_pct']:+.1f}%",
                   f"on {figures['on']:.2f} s, off {figures['off']:.2f} s (best of "
                   f"{len(entry['runs']['on'])}); target < 5%")


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


# -- charts (matplotlib, the `dev` extra; imported only here) --------------------------------


def _throughput_bars(results: dict[str, Any]) -> list[tuple[str, float, str]]:
    """(label, rows or changes per second, kind) of every reader and pipeline run measured:
    kind is "peer" for python-mysql-replication alone (what others build on) and Debezium
    (what users run today), "reader" for
    replicator's decoders, "pipeline" for whole runs."""
    bars: list[tuple[str, float, str]] = []
    decode = results.get("decode") or {}
    labels = {"library": "python-mysql-replication (peer)",
              "read_changes_library": "read_changes, library path",
              "read_changes": "read_changes (engine reader)", "fast": "fast decoder"}
    for reader, label in labels.items():
        entry = decode.get(reader) or {}
        if entry.get("rows_per_s"):
            bars.append((label, float(entry["rows_per_s"]), "peer" if reader == "library"
                         else "reader"))
    for target, entry in (results.get("e2e") or {}).items():
        if entry.get("changes_per_s_streaming"):
            bars.append((f"pipeline -> {target} (streaming)",
                         float(entry["changes_per_s_streaming"]), "pipeline"))
        if entry.get("changes_per_s"):
            bars.append((f"pipeline -> {target} (wall, incl. start-up)",
                         float(entry["changes_per_s"]), "pipeline"))
    peer = results.get("peer") or {}  # Debezium on the e2e range, same run (bench/peer.py)
    for key, how in (("changes_per_s_streaming", "streaming"), ("changes_per_s", "wall")):
        if peer.get(key):
            bars.append((f"Debezium embedded -> duckdb append ({how}, peer)", float(peer[key]),
                         "peer"))
    snapshot = results.get("snapshot") or {}
    if snapshot.get("rows_per_s"):
        bars.append(("snapshot -> duckdb", float(snapshot["rows_per_s"]), "pipeline"))
    return bars


def write_charts(results: dict[str, Any], stem: Path) -> list[Path]:
    """PNG charts of one bench run beside its JSON: ``<stem>-throughput.png`` (every reader
    and pipeline run against the peer library, same run, same machine),
    ``<stem>-latency.png`` (distribution of commit-to-visible latency) and
    ``<stem>-memory.png`` (RSS over time of the big transaction, by process role). A chart
    whose section did not run (or failed) is not drawn. Returns the files written."""
    import matplotlib

    matplotlib.use("Agg")  # files only: no display on a server or in CI
    import matplotlib.pyplot as plt

    env = results.get("environment", {})
    footer = (f"{env.get('cores')} cores, load {env.get('load_average_start')}, "
              f"commit {str(env.get('git_commit'))[:10]}, MariaDB {env.get('mariadb')}")
    written: list[Path] = []

    def save(figure: Any, name: str) -> None:
        figure.text(0.01, 0.01, footer, fontsize=7, color="grey")
        figure.tight_layout(rect=(0, 0.03, 1, 1))
        path = stem.with_name(f"{stem.name}-{name}.png")
        path.parent.mkdir(parents=True, exist_ok=True)
        figure.savefig(path, dpi=110)
        plt.close(figure)
        written.append(path)

    bars = _throughput_bars(results)
    if bars:
        colours = {"peer": "#9e9e9e", "reader": "#1f77b4", "pipeline": "#2ca02c"}
        figure, axes = plt.subplots(figsize=(10, 0.45 * len(bars) + 1.8))
        labels = [label for label, _, _ in bars][::-1]
        values = [value for _, value, _ in bars][::-1]
        axes.barh(labels, values, color=[colours[kind] for _, _, kind in bars][::-1])
        for y, value in enumerate(values):
            axes.text(value, y, f" {value:,.0f}", va="center", fontsize=8)
        axes.set_xlabel("row changes per second (higher is better)")
        changes = (results.get("workload") or {}).get("changes")
        axes.set_title("Throughput vs the peers (grey), measured in the same run"
                       + (f"\n({changes:,} row changes)" if changes else ""))
        axes.set_xlim(0, max(values) * 1.18)
        save(figure, "throughput")

    latency = results.get("latency") or {}
    samples = latency.get("latencies_s")
    if samples:
        figure, axes = plt.subplots(figsize=(9, 4))
        axes.hist(samples, bins=min(60, max(10, len(samples) // 5)), color="#1f77b4")
        for name, colour in (("p50_s", "#2ca02c"), ("p95_s", "#ff7f0e"), ("p99_s", "#d62728")):
            if latency.get(name) is not None:
                axes.axvline(latency[name], color=colour, linestyle="--",
                             label=f"{name[:-2]} {latency[name]:.2f} s")
        axes.set_xlabel("seconds from MySQL commit to visible in the target")
        axes.set_ylabel("transactions")
        axes.set_title(f"Latency at {latency.get('achieved_rate', 0):.0f} transactions/s "
                       f"(max_delay {latency.get('max_delay')})")
        axes.legend()
        save(figure, "latency")

    big = results.get("big_transaction") or {}
    timeline = (big.get("usage") or {}).get("rss_timeline") or {}
    if timeline.get("t_s"):
        figure, axes = plt.subplots(figsize=(9, 4))
        roles = sorted(timeline["mib"])
        axes.stackplot(timeline["t_s"], [timeline["mib"][role] for role in roles], labels=roles)
        axes.set_xlabel("seconds since the run started")
        axes.set_ylabel("resident memory (MiB)")
        rows = big.get("rows")
        axes.set_title("Memory over time: one " + (f"{rows:,}-row " if rows else "")
                       + "transaction, all processes of the run")
        axes.legend(loc="upper left")
        save(figure, "memory")
    return written


def main(argv: list[str] | None = None) -> int:
    """``python -m bench.report RESULT.json``: the table and the charts of a result file."""
    import sys

    args = sys.argv[1:] if argv is None else argv
    if len(args) != 1:
        print("usage: python -m bench.report RESULT.json", file=sys.stderr)
        return 2
    path = Path(args[0])
    results = json.loads(path.read_text())
    print(render_table(results))
    for chart in write_charts(results, path.with_suffix("")):
        print(f"chart: {chart}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
