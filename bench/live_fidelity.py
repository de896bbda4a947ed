"""Live vs simulated: the same scheme, trace, encoder and seed, run once in the simulator and
once live over UDP on loopback (``sluice live run``); P95 latency and more, as JSON and a
markdown table (docs/results/live.md quotes it).

    python bench/live_fidelity.py --out docs/results/live-fidelity.json

Each live run takes its duration plus the drain in wall time.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from sluice import live, run

REPO = Path(__file__).resolve().parents[1]
KEYS = ("latency_ms", "frames_displayed", "frames_skipped", "video_bitrate_bps",
        "utilization", "retransmissions", "queue_delay_ms_p95", "pacer_delay_ms_p95")  # fmt: skip


def pick(summary: dict) -> dict:
    out = {k: summary.get(k) for k in KEYS}
    out["latency_ms"] = {k: summary["latency_ms"][k] for k in ("mean", "p50", "p95", "p99")}
    return out


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__)
    p.add_argument("--schemes", default="webrtc,ace,vidaptive")
    p.add_argument("--traces", default="data/traces/markov-24-6.mahi,data/traces/constant-12.mahi")
    p.add_argument("--duration", type=float, default=20.0)
    p.add_argument("--seed", type=int, default=1)
    p.add_argument("--work", default="results/live-fidelity")
    p.add_argument("--out", default="docs/results/live-fidelity.json")
    args = p.parse_args(argv)
    rows = []
    for trace in args.traces.split(","):
        for scheme in args.schemes.split(","):
            overrides = (("duration_s", args.duration), ("seed", args.seed),
                         ("downlink.queue_bytes", 100_000))  # fmt: skip
            base = dict(scheme=scheme, trace=str(REPO / trace), encoder="model",
                        overrides=overrides, progress=False)  # fmt: skip
            stem = f"{scheme}-{Path(trace).stem}-s{args.seed}"
            sim_dir = run.run_one(run.RunSpec(out_dir=f"{args.work}/sim-{stem}", **base))
            live_dir = live.run_live(run.RunSpec(out_dir=f"{args.work}/live-{stem}", **base))
            sim = json.loads((sim_dir / "summary.json").read_text())
            lv = json.loads((live_dir / "summary.json").read_text())
            counters = json.loads((live_dir / "live.json").read_text())
            row = {
                "scheme": scheme, "trace": Path(trace).name, "seed": args.seed,
                "duration_s": args.duration, "encoder": "model",
                "sim": pick(sim), "live": pick(lv),
                "p95_diff_pct": round(100 * (lv["latency_ms"]["p95"] / sim["latency_ms"]["p95"]
                                             - 1), 1),
                "live_late_wakeups_500us": counters["sender_io"]["late_wakeups_500us"],
            }  # fmt: skip
            rows.append(row)
            print(json.dumps(row), file=sys.stderr)
    out = Path(args.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(rows, indent=2) + "\n")
    print(
        "| scheme | trace | P95 sim ms | P95 live ms | diff | mean sim | mean live "
        "| shown sim | shown live | Mbps sim | Mbps live |"
    )
    print("|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
    for r in rows:
        s, v = r["sim"], r["live"]
        print(
            f"| {r['scheme']} | {r['trace']} | {s['latency_ms']['p95']:.1f} "
            f"| {v['latency_ms']['p95']:.1f} | {r['p95_diff_pct']:+.1f}% "
            f"| {s['latency_ms']['mean']:.1f} | {v['latency_ms']['mean']:.1f} "
            f"| {s['frames_displayed']} | {v['frames_displayed']} "
            f"| {s['video_bitrate_bps'] / 1e6:.2f} | {v['video_bitrate_bps'] / 1e6:.2f} |"
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
