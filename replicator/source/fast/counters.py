"""What the fast path decoded itself and what it handed to the library (for the job's metrics)."""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field


@dataclass
class FastDecodeCounters:
    rows_fast: int = 0  # row images of rows events decoded by the generated decoders
    rows_library: int = 0  # rows decoded by python-mysql-replication (fallback)
    events_library: int = 0  # rows events handed to the library
    table_maps_parsed: int = 0  # distinct Table_map events parsed (cache misses)
    table_maps_cached: int = 0  # Table_map events answered by the cache
    fallback_reasons: Counter = field(default_factory=Counter)  # "db.table: reason" -> events

    def add(self, other: FastDecodeCounters) -> None:
        self.rows_fast += other.rows_fast
        self.rows_library += other.rows_library
        self.events_library += other.events_library
        self.table_maps_parsed += other.table_maps_parsed
        self.table_maps_cached += other.table_maps_cached
        self.fallback_reasons.update(other.fallback_reasons)

    def as_dict(self) -> dict[str, object]:
        return {
            "rows_fast": self.rows_fast,
            "rows_library": self.rows_library,
            "events_library": self.events_library,
            "table_maps_parsed": self.table_maps_parsed,
            "table_maps_cached": self.table_maps_cached,
            "fallback_reasons": dict(self.fallback_reasons),
        }


# Totals of every reader in this process (the engine's metrics read these).
TOTALS = FastDecodeCounters()
