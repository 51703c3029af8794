"""Small measurement helpers: percentiles, resident memory, the machine."""

from __future__ import annotations

import datetime as dt
import os
import platform
import resource
import statistics
from collections.abc import Sequence
from pathlib import Path

__all__ = [
    "busy_share",
    "machine_cpu_jiffies",
    "machine_info",
    "percentile",
    "rss_mb",
    "summarise_ms",
]


def percentile(values: Sequence[float], q: float) -> float:
    """Nearest-rank-interpolated percentile `q` (0..100); 0.0 for no values."""
    if not values:
        return 0.0
    ordered = sorted(values)
    position = (len(ordered) - 1) * q / 100
    low = int(position)
    high = min(low + 1, len(ordered) - 1)
    return ordered[low] + (ordered[high] - ordered[low]) * (position - low)


def summarise_ms(values_s: Sequence[float]) -> dict[str, float]:
    """n, mean, p50, p95, p99 and max of durations given in seconds, in milliseconds."""
    ms = [v * 1000 for v in values_s]
    return {
        "n": len(ms),
        "mean_ms": round(statistics.fmean(ms), 4) if ms else 0.0,
        "p50_ms": round(percentile(ms, 50), 4),
        "p95_ms": round(percentile(ms, 95), 4),
        "p99_ms": round(percentile(ms, 99), 4),
        "max_ms": round(max(ms), 4) if ms else 0.0,
    }


def rss_mb(pid: int | None = None) -> dict[str, float]:
    """Current (VmRSS) and peak (VmHWM) resident memory of a process, in MiB."""
    status = Path(f"/proc/{pid or 'self'}/status")
    found: dict[str, float] = {}
    try:
        for line in status.read_text().splitlines():
            key, _, value = line.partition(":")
            if key in ("VmRSS", "VmHWM"):
                found["rss_mb" if key == "VmRSS" else "peak_rss_mb"] = round(
                    int(value.split()[0]) / 1024, 1
                )
    except OSError:
        if pid is None:
            peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
            found = {"rss_mb": round(peak, 1), "peak_rss_mb": round(peak, 1)}
    return found


def machine_info() -> dict[str, object]:
    """CPU count and model, memory, Python and OS versions, and the date of the run."""
    model = ""
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                model = line.split(":", 1)[1].strip()
                break
    except OSError:
        model = platform.processor()
    memory_gb = 0.0
    try:
        for line in Path("/proc/meminfo").read_text().splitlines():
            if line.startswith("MemTotal"):
                memory_gb = round(int(line.split()[1]) / 1024 / 1024, 1)
    except OSError:
        pass
    return {
        "cpu_count": os.cpu_count(),
        "cpu_model": model,
        "memory_gb": memory_gb,
        "python": platform.python_version(),
        "platform": platform.platform(),
        "date": dt.datetime.now(dt.UTC).isoformat(timespec="seconds"),
    }


def machine_cpu_jiffies() -> tuple[int, int]:
    """(busy, total) CPU time of the whole machine so far, all cores (/proc/stat): the busy share
    between two readings says whether a run was bound by the machine's CPU."""
    fields = [int(x) for x in Path("/proc/stat").read_text().split("\n", 1)[0].split()[1:]]
    idle = fields[3] + (fields[4] if len(fields) > 4 else 0)  # idle + iowait
    total = sum(fields[:8])  # guest time is counted in user already
    return total - idle, total


def busy_share(before: tuple[int, int], after: tuple[int, int]) -> float | None:
    """The machine's CPU busy share between two `machine_cpu_jiffies` readings."""
    total = after[1] - before[1]
    return round((after[0] - before[0]) / total, 3) if total > 0 else None
