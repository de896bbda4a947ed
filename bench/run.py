"""Sluice benchmarks: speed of the simulator and the live runtime's pacing error, as JSON.

`make bench` runs this. Each benchmark reports what it measured and how; numbers depend on
the machine, so compare runs made on the same one.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import subprocess
import sys
import time
from pathlib import Path

from sluice import _core


def git_sha() -> str:
    try:
        out = subprocess.run(
            ["git", "rev-parse", "HEAD"],
            capture_output=True,
            text=True,
            cwd=Path(__file__).resolve().parent,
            check=True,
        )
        return out.stdout.strip()
    except (OSError, subprocess.CalledProcessError):
        return "unknown"


def simulator_speed(scheme: str, rate_mbps: float, duration_s: float, repeats: int) -> dict:
    """Simulated seconds per wall second for one run with the model encoder."""
    trace = _core.Trace.generate(f"constant:{rate_mbps}", duration_s + 5)
    config = {
        "scheme_name": scheme,
        "duration_s": duration_s,
        "downlink": {"delay_ms": 20, "queue_bytes": 300_000},
        "encoder": {"kind": "model"},
    }
    walls = []
    summary = None
    for _ in range(repeats):
        sim = _core.Simulation(json.dumps(config), trace)
        t0 = time.perf_counter()
        _, _, _, summary_json = sim.finish()
        walls.append(time.perf_counter() - t0)
        summary = json.loads(summary_json)
    best = min(walls)
    return {
        "name": f"simulator_speed/{scheme}/{rate_mbps:g}mbps/{duration_s:g}s",
        "unit": "simulated seconds per wall second",
        "value": round(duration_s / best, 2),
        "wall_s_best": round(best, 3),
        "wall_s_all": [round(w, 3) for w in walls],
        "frames": summary["frames_sent"] if summary else None,
        "utilization": summary["utilization"] if summary else None,
    }


def link_speed() -> dict:
    """The link emulator alone (crates/sluice-core/examples/link_speed.rs)."""
    out = subprocess.run(
        ["cargo", "run", "-q", "--release", "-p", "sluice-core", "--example", "link_speed"],
        capture_output=True, text=True, cwd=Path(__file__).resolve().parents[1], check=True,
    )  # fmt: skip
    return json.loads(out.stdout)


def live_pacing(rate_mbps: float, duration_s: float) -> dict:
    """The live runtime's pacing error: the webrtc scheme's pacer at a fixed rate with a full
    queue, over a loopback socket; how late each datagram left against the time the pacer
    scheduled it (crates/sluice-live/src/bench.rs). Goal: P99 under 0.5 ms."""
    out = subprocess.run(
        ["cargo", "run", "-q", "--release", "-p", "sluice-live", "--example", "pacing_bench",
         "--", str(rate_mbps), str(duration_s)],
        capture_output=True, text=True, cwd=Path(__file__).resolve().parents[1], check=True,
    )  # fmt: skip
    r = json.loads(out.stdout)
    p99 = r["send_error_us_p99"]
    return {
        "name": f"live_pacing/{rate_mbps:g}mbps/{duration_s:g}s",
        "unit": "microseconds late against the pacer's schedule (P99, 10 us bins)",
        "value": p99,
        "goal_us": 500,
        "goal_met": p99 is not None and p99 < 500,
        **{k: v for k, v in r.items() if k != "io"},
        "late_wakeups_500us": r["io"]["late_wakeups_500us"],
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--out", default="bench/out/bench.json")
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args(argv)

    results = [
        simulator_speed("webrtc", 30, 120, args.repeats),
        simulator_speed("always-burst", 30, 120, args.repeats),
        simulator_speed("copa", 30, 120, args.repeats),
        link_speed(),
        live_pacing(30, 10),
        live_pacing(100, 10),
    ]
    report = {
        "schema_version": 1,
        "git_sha": git_sha(),
        "host": {
            "machine": platform.machine(),
            "cpus": os.cpu_count(),
            "python": sys.version.split()[0],
        },
        "benchmarks": results,
    }
    out = Path(args.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(report, indent=2) + "\n")
    print(json.dumps(report, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
