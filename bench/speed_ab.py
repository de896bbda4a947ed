"""The simulator's speed of two builds side by side (issue 26: "make bench no slower ...
measured side by side"): every scheme both builds know, with the model encoder on a constant
link, as `make bench` measures it (bench/run.py's `simulator_speed`), the two builds
alternating run by run so that a machine that slows down or speeds up does so for both.

    python bench/speed_ab.py --a DIR_A --b DIR_B [--rate-mbps 30] [--seconds 60] [--rounds 5]

DIR_A and DIR_B each hold a `sluice` package with its built `_core` (a checkout after `make
build`, its `python/` folder; or a folder with `sluice/_core.abi3.so` copied from another
commit's build). Prints one JSON object: per scheme, each build's median speed (simulated
seconds per wall second) and B over A; and the median of those ratios.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
from pathlib import Path

# One measurement in a fresh interpreter that imports the build under test.
PROBE = """
import json, sys, time
from sluice import _core
scheme, rate, seconds = sys.argv[1], float(sys.argv[2]), float(sys.argv[3])
trace = _core.Trace.generate(f"constant:{rate}", seconds + 5)
config = {"scheme_name": scheme, "duration_s": seconds,
          "downlink": {"delay_ms": 20, "queue_bytes": 300_000}, "encoder": {"kind": "model"}}
sim = _core.Simulation(json.dumps(config), trace)
t0 = time.perf_counter()
sim.finish()
print(seconds / (time.perf_counter() - t0))
"""

SCHEMES = """
from sluice import _core
import json
print(json.dumps([s["name"] for s in json.loads(_core.schemes_json())]))
"""


def _python(build: Path, code: str, *args: str) -> str:
    env = {**os.environ, "PYTHONPATH": str(build)}
    out = subprocess.run([sys.executable, "-c", code, *args], env=env, capture_output=True,
                         text=True, check=False)  # fmt: skip
    if out.returncode != 0:
        last = (out.stderr.strip().splitlines() or ["no output"])[-1]
        raise SystemExit(f"speed_ab: the build in {build} failed: {last}")
    return out.stdout.strip()


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--a", type=Path, required=True, help="folder with build A's sluice package")
    p.add_argument("--b", type=Path, required=True, help="folder with build B's sluice package")
    p.add_argument("--rate-mbps", type=float, default=30.0)
    p.add_argument("--seconds", type=float, default=60.0)
    p.add_argument("--rounds", type=int, default=5)
    p.add_argument("--schemes", nargs="*", help="default: every scheme both builds know")
    args = p.parse_args(argv)
    for build in (args.a, args.b):
        if not (build / "sluice").is_dir():
            p.error(f"{build} has no sluice package")
    known = [json.loads(_python(b, SCHEMES)) for b in (args.a, args.b)]
    schemes = args.schemes or [s for s in known[0] if s in known[1]]
    speeds: dict[str, tuple[list[float], list[float]]] = {s: ([], []) for s in schemes}
    for r in range(args.rounds):
        for s in schemes:
            # Alternate which build goes first, so neither always runs on a warmer machine.
            order = [(0, args.a), (1, args.b)] if r % 2 == 0 else [(1, args.b), (0, args.a)]
            for side, build in order:
                v = _python(build, PROBE, s, str(args.rate_mbps), str(args.seconds))
                speeds[s][side].append(float(v))
        print(f"round {r + 1}/{args.rounds} done", file=sys.stderr)
    rows = {}
    for s, (a, b) in speeds.items():
        ma, mb = statistics.median(a), statistics.median(b)
        rows[s] = {"a": round(ma, 1), "b": round(mb, 1), "b_over_a": round(mb / ma, 3)}
    ratios = [r["b_over_a"] for r in rows.values()]
    out = {
        "unit": "simulated seconds per wall second (median of the rounds)",
        "rate_mbps": args.rate_mbps, "seconds": args.seconds, "rounds": args.rounds,
        "a": str(args.a), "b": str(args.b), "schemes": rows,
        "median_b_over_a": round(statistics.median(ratios), 3) if ratios else None,
    }  # fmt: skip
    print(json.dumps(out, indent=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
