"""Sluice benchmarks: the simulator's speed per scheme, an x264 cell against the bare encoder,
quality scoring against real time, an estimate of the leaderboard's wall time, the live
runtime's pacing error and the cluster's throughput, as JSON.

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


def simulator_speed(scheme: str, rate_mbps: float, duration_s: float, repeats: int,
                    scheme_config: dict | None = None, name: str = "simulator_speed") -> dict:
    """Simulated seconds per wall second for one run with the model encoder (``scheme`` as
    registered, or composed as ``scheme_config``)."""
    trace = _core.Trace.generate(f"constant:{rate_mbps}", duration_s + 5)
    config = {
        "scheme_name": scheme,
        "duration_s": duration_s,
        "downlink": {"delay_ms": 20, "queue_bytes": 300_000},
        "encoder": {"kind": "model"},
    }
    if scheme_config is not None:
        config["scheme"] = scheme_config
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
        "name": f"{name}/{scheme}/{rate_mbps:g}mbps/{duration_s:g}s",
        "unit": "simulated seconds per wall second",
        "value": round(duration_s / best, 2),
        "wall_s_best": round(best, 3),
        "wall_s_all": [round(w, 3) for w in walls],
        "frames": summary["frames_sent"] if summary else None,
        "utilization": summary["utilization"] if summary else None,
    }


SIM_GOALS = {30: 1000.0, 100: 300.0}


def simulator_speeds(duration_s: float, repeats: int) -> list[dict]:
    """Every registered scheme with the model encoder at 30 and 100 Mbps (issue 32's goals:
    1000x and 300x real time)."""
    from sluice import config

    out = []
    for rate in SIM_GOALS:
        for scheme in config.scheme_names():
            r = simulator_speed(scheme, rate, duration_s, repeats)
            r["goal"] = SIM_GOALS[rate]
            r["goal_met"] = r["value"] >= SIM_GOALS[rate]
            out.append(r)
    return out


def task_queue_speeds(duration_s: float, repeats: int) -> list[dict]:
    """Each scheme that paces with libwebrtc's leaky bucket, with libwebrtc's task queue
    (``pacer.hold_back_window_ms`` 5, which no registered scheme sets: it changes results,
    docs/results/task-queue.md), at 30 and 100 Mbps: what the batching would buy."""
    from sluice import config

    out = []
    for rate in SIM_GOALS:
        for scheme in config.scheme_names():
            composed = config.scheme_config(scheme)
            if composed.get("pacer", {}).get("kind") != "leaky-bucket":
                continue
            composed["pacer"]["hold_back_window_ms"] = 5.0
            out.append(simulator_speed(scheme, rate, duration_s, repeats, composed,
                                       "simulator_speed_task_queue"))  # fmt: skip
    return out


def _children_cpu() -> float:
    import resource

    u = resource.getrusage(resource.RUSAGE_CHILDREN)
    return u.ru_utime + u.ru_stime


def _bare_encoder(tmp: Path) -> Path:
    exe = tmp / "x264_bare"
    flags = subprocess.run(["pkg-config", "--cflags", "--libs", "x264"], capture_output=True,
                           text=True, check=True).stdout.split()  # fmt: skip
    subprocess.run(["cc", "-O2", "-o", str(exe), str(ROOT / "bench" / "x264_bare.c"), *flags],
                   check=True)  # fmt: skip
    return exe


def x264_overhead(tmp: Path, repeats: int) -> dict:
    """CPU time of a 30 s 720p `cbr` cell (x264 superfast, modeled encode time, no quality)
    against libx264 alone encoding the same frames with the cell's own per-frame rates
    (bench/x264_bare.c), paired and repeated; medians. Goal: within 5 %."""
    from sluice import results

    clip = ROOT / "data" / "videos" / "handheld_flower_1280x720_30fps_10s.mp4"
    exe = _bare_encoder(tmp)
    sluice = [sys.executable, "-m", "sluice", "run", "--scheme", "cbr", "--video", str(clip),
              "--width", "1280", "--trace", "gen:constant:12", "--duration", "30",
              "--encode-time", "modeled", "--quality", "none"]  # fmt: skip
    run_dir = tmp / "x264-cell"
    # One run first: the clip's raw cache, and the rates for the bare encoder.
    subprocess.run([*sluice, "--out", str(run_dir)], capture_output=True, check=True)
    frames = results.load_run(run_dir).frames
    fps = 30

    def kbit(v: float) -> int:
        return max(1, (int(max(v, 1000)) + 500) // 1000)

    rates = tmp / "rates.txt"
    rates.write_text("".join(f"{kbit(t)} {kbit(t)} {kbit(t / fps)}\n"
                             for t in frames["target_rate_bps"]))  # fmt: skip
    cache = ROOT / "results" / ".video-cache"
    raw = next(cache.glob("handheld_flower_1280x720_30fps_10s-1280x720-30fps-*.yuv"))
    first = rates.read_text().split("\n")[0].split()
    sl, bare = [], []
    for _ in range(repeats):
        c0 = _children_cpu()
        subprocess.run([*sluice, "--out", str(run_dir)], capture_output=True, check=True)
        sl.append(_children_cpu() - c0)
        out = subprocess.run([str(exe), str(raw), "1280", "720", str(fps), str(len(frames)),
                              *first, "superfast", "1", "1", str(rates)],
                             capture_output=True, text=True, check=True)  # fmt: skip
        bare.append(json.loads(out.stdout)["cpu_s"])
    s_med, b_med = sorted(sl)[len(sl) // 2], sorted(bare)[len(bare) // 2]
    return {
        "name": "x264_overhead/cbr/720p-30s",
        "unit": "Sluice cell CPU time over libx264's alone (median of paired runs)",
        "value": round(s_med / b_med, 4),
        "goal": 1.05,
        "goal_met": s_med / b_med <= 1.05,
        "sluice_cpu_s": [round(x, 3) for x in sl],
        "bare_cpu_s": [round(x, 3) for x in bare],
        "frames": len(frames),
    }


def quality_cost(tmp: Path) -> list[dict]:
    """Wall time of a 30 s 720p cell (webrtc on a Wi-Fi window) with quality `full` and
    `fast`, over the session's 30 s. Goal for full: at most 0.3x real time on two cores."""
    clip = ROOT / "data" / "videos" / "handheld_flower_1280x720_30fps_10s.mp4"
    trace = ROOT / "data" / "traces" / "leaderboard" / "wifi-office7-w1.rate"
    out = []
    for quality in ("none", "fast", "full"):
        t0 = time.perf_counter()
        subprocess.run([sys.executable, "-m", "sluice", "run", "--scheme", "webrtc",
                        "--video", str(clip), "--width", "1280", "--trace", str(trace),
                        "--duration", "30", "--encode-time", "modeled", "--quality", quality,
                        "--out", str(tmp / f"quality-{quality}")],
                       capture_output=True, check=True)  # fmt: skip
        wall = time.perf_counter() - t0
        entry = {"name": f"cell_wall/720p-30s/quality-{quality}",
                 "unit": "wall time over the session's 30 s", "value": round(wall / 30, 4),
                 "wall_s": round(wall, 2)}  # fmt: skip
        if quality == "full":
            entry["goal"] = 0.3
            entry["goal_met"] = wall / 30 <= 0.3
        out.append(entry)
    return out


def leaderboard_estimate(tmp: Path, jobs: int = 2) -> dict:
    """Wall time of `make leaderboard` on this machine, estimated from one of its cells per
    family (webrtc, the hand-held clip, each family's first window) times the plan's cell
    count, over ``jobs`` processes."""
    from sluice import plan as plan_mod

    p = plan_mod.load_plan(ROOT / "experiments" / "leaderboard.toml")
    cells = p.cells()
    firsts = {}
    for t in p.traces:
        firsts.setdefault(t.network, t)
    clip = next(c for c in p.clips if c.label == "handheld")
    walls = []
    for fam, t in firsts.items():
        t0 = time.perf_counter()
        cmd = [sys.executable, "-m", "sluice", "run", "--scheme", "webrtc", "--video",
               str(clip.path), "--width", "1280", "--trace", t.path, "--duration", "60",
               "--queue-bytes", "150000", "--set", "max_video_rate_bps=2e7",
               "--encode-time", "modeled", "--quality", "fast",
               "--out", str(tmp / f"lb-{fam}")]  # fmt: skip
        subprocess.run(cmd, capture_output=True, check=True)
        walls.append(time.perf_counter() - t0)
    per_cell = sum(walls) / len(walls)
    return {
        "name": "leaderboard_estimate/wall",
        "unit": "minutes (estimate)",
        "value": round(len(cells) * per_cell / jobs / 60, 1),
        "cells": len(cells),
        "cell_wall_s_mean": round(per_cell, 2),
        "cell_wall_s": {f: round(w, 2) for f, w in zip(firsts, walls)},
        "jobs": jobs,
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
    from sluice import cluster, pool, run

    clip = ROOT / "data" / "videos" / "bbb-intro_1280x720_24fps_10s.mp4"
    trace = ROOT / "data" / "traces" / "wifi-hairpin14-70s.mahi"

    def spec(seed: int, root: str) -> run.RunSpec:
        return run.RunSpec(
            scheme="webrtc-x264", video=str(clip), trace=str(trace), width=640,
            encode_time="modeled", quality="none",
            overrides=(("duration_s", 10), ("seed", seed)), out_dir=str(tmp / root / f"s{seed}"),
        )  # fmt: skip

    ray.init(num_cpus=1, include_dashboard=False, log_to_driver=False, logging_level="WARNING")
    try:
        pool.run_many([spec(99, "x264-warm")], backend="ray", progress=False)
        t0 = time.perf_counter()
        pool.run_many([spec(s, "x264") for s in range(1, cells + 1)], backend="ray",
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
        "--only", choices=("simulator", "cells", "live", "cluster"), default=None,
        help="simulator: the simulator's speed per scheme; cells: an x264 cell against the "
        "bare encoder, quality scoring and the leaderboard's estimate; live: the live "
        "runtime's pacing error; cluster: matrix throughput and Ray's overhead",
    )  # fmt: skip
    args = parser.parse_args(argv)

    results = []
    if args.only in (None, "simulator"):
        results += simulator_speeds(60, args.repeats)
        results += task_queue_speeds(60, args.repeats)
        results.append(link_speed())
    if args.only in (None, "cells"):
        with tempfile.TemporaryDirectory(prefix="sluice-bench-") as tmp:
            results.append(x264_overhead(Path(tmp), args.repeats))
            results += quality_cost(Path(tmp))
            results.append(leaderboard_estimate(Path(tmp)))
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
