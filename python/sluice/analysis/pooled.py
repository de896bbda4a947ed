"""Pooled comparisons of schemes over the runs of a results directory.

A pooled percentile is taken over the capture slots of every run of a scheme together, not
averaged over runs, so no cell's tail counts more than its slots. The slot latency is
Salsify's rule (``latency_all_ms`` of the summary, ``crates/sluice-core/src/metrics.rs``): a
slot whose frame was never displayed counts until a later slot's frame was displayed, or
the end of the run; skipping a frame therefore costs latency instead of hiding it. The
pooled stall ratio is the stall count over all slots; quality is the mean over runs of each
run's mean VMAF.

``python -m sluice.analysis.pooled RESULTS --baseline B --schemes S1,S2 [--json]`` prints,
per scheme, the pooled all-slot P95 and P99, stall ratio and mean VMAF, and the ratio of
each to the baseline's over the cells both have run.
"""

from __future__ import annotations

import argparse
import json
import math
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from .. import results
from ..errors import SluiceError
from ..metrics import slot_latencies_ms
from . import load, user_error


def _stalls(lat_ms: np.ndarray, threshold_ms: float = 200.0) -> int:
    return int(np.count_nonzero(lat_ms > threshold_ms))


def pooled(runs: Sequence[results.Run]) -> dict[str, float]:
    """Pooled all-slot P50/P95/P99, stall ratio and mean VMAF of ``runs``."""
    lat = np.concatenate([slot_latencies_ms(r) for r in runs]) if runs else np.array([])
    vmaf = [r.summary.get("vmaf_mean") for r in runs if r.summary]
    vmaf = [v for v in vmaf if isinstance(v, (int, float)) and math.isfinite(v)]
    return {
        "runs": len(runs),
        "slots": int(lat.size),
        "latency_all_ms_p50": float(np.percentile(lat, 50)) if lat.size else math.nan,
        "latency_all_ms_p95": float(np.percentile(lat, 95)) if lat.size else math.nan,
        "latency_all_ms_p99": float(np.percentile(lat, 99)) if lat.size else math.nan,
        "stall_ratio_200ms": _stalls(lat) / lat.size if lat.size else math.nan,
        "vmaf_mean": float(np.mean(vmaf)) if vmaf else math.nan,
    }


def compare(results_dirs: Sequence[str | Path], baseline: str, schemes: Sequence[str]) -> dict:
    """Pooled numbers of ``baseline`` and each of ``schemes`` over the (trace, clip, seed)
    cells all of them have finished, and each scheme's ratios to the baseline."""
    import pandas as pd

    table = pd.concat([load(d).table for d in results_dirs], ignore_index=True)
    table = table[table["status"] == "done"] if "status" in table else table
    schemes = [s for s in dict.fromkeys(schemes) if s != baseline]  # not against itself
    names = [baseline, *schemes]
    missing = [s for s in names if s not in set(table["scheme"])]
    if missing:
        raise SluiceError(
            f"no finished runs of {', '.join(missing)} in {', '.join(map(str, results_dirs))}"
        )
    key = [c for c in ("trace", "clip", "seed") if c in table]
    cells = None
    for s in names:
        have = set(map(tuple, table.loc[table["scheme"] == s, key].astype(str).values))
        cells = have if cells is None else cells & have
    out: dict[str, Any] = {"baseline": baseline, "cells": len(cells or ()), "schemes": {}}
    for s in names:
        rows = table[(table["scheme"] == s)]
        rows = rows[[tuple(r) in cells for r in rows[key].astype(str).values]]
        out["schemes"][s] = pooled([results.load_run(d) for d in rows["run_dir"]])
    base = out["schemes"][baseline]
    for s in schemes:
        p = out["schemes"][s]
        p["vs_baseline"] = {
            "latency_all_ms_p95": p["latency_all_ms_p95"] / base["latency_all_ms_p95"],
            "latency_all_ms_p99": p["latency_all_ms_p99"] / base["latency_all_ms_p99"],
            "stall_ratio_200ms": (
                p["stall_ratio_200ms"] / base["stall_ratio_200ms"]
                if base["stall_ratio_200ms"] > 0
                else math.nan
            ),
            "vmaf_mean_diff": p["vmaf_mean"] - base["vmaf_mean"],
        }
    return out


def main(argv: Sequence[str] | None = None) -> int:
    ap = argparse.ArgumentParser(
        prog="python -m sluice.analysis.pooled", description=__doc__.split("\n\n")[0]
    )
    ap.add_argument("results", nargs="+", help="results directories of `sluice matrix` plans")
    ap.add_argument("--baseline", required=True)
    ap.add_argument("--schemes", required=True, help="comma-separated")
    ap.add_argument("--json", action="store_true")
    args = ap.parse_args(argv)
    try:
        out = compare(args.results, args.baseline, [s for s in args.schemes.split(",") if s])
    except SluiceError as e:
        return user_error(ap.prog, e)
    if args.json:
        print(json.dumps(out, indent=2))
        return 0
    print(f"{out['cells']} cells each")
    for s, p in out["schemes"].items():
        vmaf = p["vmaf_mean"]  # NaN without quality scores (the model encoder): not shown
        line = (f"{s:20s} all-slot P95 {p['latency_all_ms_p95']:8.1f} ms  P99 "
                f"{p['latency_all_ms_p99']:8.1f} ms  stalls {100 * p['stall_ratio_200ms']:6.2f} %"
                + (f"  VMAF {vmaf:6.2f}" if vmaf == vmaf else ""))  # fmt: skip
        if "vs_baseline" in p:
            v = p["vs_baseline"]
            diff = v["vmaf_mean_diff"]
            stalls = v["stall_ratio_200ms"]  # NaN: the baseline had none
            line += (
                f"   x{v['latency_all_ms_p95']:.2f} P95, x{v['latency_all_ms_p99']:.2f} P99"
                + (f", x{stalls:.2f} stalls" if stalls == stalls else "")
                + (f", {diff:+.2f} VMAF" if diff == diff else "")
            )
        print(line)
    return 0


if __name__ == "__main__":
    sys.exit(main())
