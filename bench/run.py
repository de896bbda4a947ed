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
import tempfile
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


ROOT = Path(__file__).resolve().parents[1]
MATRIX_PLAN = """
name = "bench"
seeds = [1, 2]
[set]
duration_s = 30
"downlink.delay_ms" = 20
"downlink.queue_bytes" = 100000
[[scheme]]
name = "webrtc"
[[scheme]]
name = "webrtc-b"
[[scheme]]
name = "always-burst"
[[scheme]]
name = "copa"
[[trace]]
path = "{traces}/step-30-3.mahi"
[[trace]]
path = "{traces}/markov-24-6.mahi"
[[trace]]
path = "{traces}/wifi-hairpin14-70s.mahi"
"""


def _run_files(root: Path) -> dict[str, bytes]:
    return {str(p.relative_to(root)): p.read_bytes() for p in sorted(root.rglob("run.jsonl"))}


def matrix_throughput(tmp: Path, workers: int = 2) -> list[dict]:
    """Cells per minute of a 24-cell model-encoder plan (4 schemes x 3 traces x 2 seeds,
    30 s each) on the process pool and on a local Ray, ``workers`` processes each. Ray is
    started first and its start-up timed apart; the Ray figure includes starting its
    worker processes, as the pool's includes spawning its own; ``warm_value``: the same
    plan again on the same Ray."""
    import ray
    from sluice import plan

    plan_path = tmp / "bench.toml"
    plan_path.write_text(MATRIX_PLAN.format(traces=ROOT / "data" / "traces"))
    out = []
    t0 = time.perf_counter()
    pool = plan.run_plan(plan.load_plan(plan_path), tmp / "pool", jobs=workers, progress=False)
    pool_s = time.perf_counter() - t0
    assert not pool.outcome.failed and len(pool.outcome.ran) == 24
    t0 = time.perf_counter()
    ray.init(num_cpus=workers, include_dashboard=False, log_to_driver=False,
             logging_level="WARNING")  # fmt: skip
    start_s = time.perf_counter() - t0
    try:
        t0 = time.perf_counter()
        res = plan.run_plan(plan.load_plan(plan_path), tmp / "ray", backend="ray",
                            progress=False)  # fmt: skip
        ray_s = time.perf_counter() - t0
        # Again on the same Ray, its workers started: the cost per cell alone.
        t0 = time.perf_counter()
        warm = plan.run_plan(plan.load_plan(plan_path), tmp / "ray", backend="ray",
                             progress=False, rerun="all")  # fmt: skip
        warm_s = time.perf_counter() - t0
        assert not warm.outcome.failed
    finally:
        ray.shutdown()
    assert not res.outcome.failed and len(res.outcome.ran) == 24
    same = _run_files(tmp / "pool") == _run_files(tmp / "ray")
    for backend, wall in (("process", pool_s), ("ray", ray_s)):
        entry = {
            "name": f"matrix_throughput/{backend}/{workers}workers",
            "unit": "cells per minute",
            "value": round(24 * 60 / wall, 1),
            "cells": 24,
            "wall_s": round(wall, 2),
        }
        if backend == "ray":
            entry["ray_start_s"] = round(start_s, 2)
            entry["warm_value"] = round(24 * 60 / warm_s, 1)
            entry["warm_wall_s"] = round(warm_s, 2)
            entry["run_files_identical_to_process_pool"] = same
        out.append(entry)
    return out


def ray_overhead_x264(tmp: Path, cells: int = 4) -> dict:
    """Ray's overhead per x264 cell, as a fraction of the cell's own time: ``cells`` cells
    (webrtc-x264 on the 10 s clip at 640 px, modeled encode time, no quality scoring) one
    after the other on a local Ray with one worker; overhead = wall time - the time the
    cells spent in ``simulate`` on the worker, so it holds shipping the spec and the clip,
    scheduling, returning the records, writing them on the driver and the nodes' check.
    A first cell (not timed) starts the worker and decodes the clip on the node."""
    import ray
    from sluice import cluster, runner

    clip = ROOT / "data" / "videos" / "bbb-intro_1280x720_24fps_10s.mp4"
    trace = ROOT / "data" / "traces" / "wifi-hairpin14-70s.mahi"

    def spec(seed: int, root: str) -> runner.RunSpec:
        return runner.RunSpec(
            scheme="webrtc-x264", video=str(clip), trace=str(trace), width=640,
            encode_time="modeled", quality="none",
            overrides=(("duration_s", 10), ("seed", seed)), out_dir=str(tmp / root / f"s{seed}"),
        )  # fmt: skip

    ray.init(num_cpus=1, include_dashboard=False, log_to_driver=False, logging_level="WARNING")
    try:
        runner.run_many([spec(99, "x264-warm")], backend="ray", progress=False)
        t0 = time.perf_counter()
        runner.run_many([spec(s, "x264") for s in range(1, cells + 1)], backend="ray",
                        jobs=1, progress=False)  # fmt: skip
        wall = time.perf_counter() - t0
    finally:
        ray.shutdown()
    own = sum(c[0] for c in cluster.last_cells if c is not None)
    return {
        "name": "ray_overhead/x264/640px-10s",
        "unit": "fraction of the cell's own time",
        "value": round((wall - own) / own, 4),
        "goal": 0.10,
        "cells": cells,
        "cell_own_s_mean": round(own / cells, 3),
        "overhead_s_per_cell": round((wall - own) / cells, 3),
        "wall_s": round(wall, 2),
    }


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
    parser.add_argument(
        "--only", choices=("simulator", "live", "cluster"), default=None,
        help="simulator: the simulator's speed; live: the live runtime's pacing error; "
        "cluster: matrix throughput and Ray's overhead",
    )  # fmt: skip
    args = parser.parse_args(argv)

    results = []
    if args.only in (None, "simulator"):
        results += [
            simulator_speed("webrtc", 30, 120, args.repeats),
            simulator_speed("always-burst", 30, 120, args.repeats),
            simulator_speed("copa", 30, 120, args.repeats),
            link_speed(),
        ]
    if args.only in (None, "live"):
        results += [live_pacing(30, 10), live_pacing(100, 10)]
    if args.only in (None, "cluster"):
        with tempfile.TemporaryDirectory(prefix="sluice-bench-") as tmp:
            # The local Ray's workers keep their inputs and decoded clip here, not in /tmp.
            os.environ["SLUICE_RAY_NODE_DIR"] = str(Path(tmp) / "node")
            results += matrix_throughput(Path(tmp))
            results.append(ray_overhead_x264(Path(tmp)))
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
