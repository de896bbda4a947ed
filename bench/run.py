"""Sluice benchmarks: speed of the simulator, as JSON.

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
