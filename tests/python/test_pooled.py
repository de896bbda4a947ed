"""Pooled comparisons: the all-slot latency per slot agrees with the core's summary, and the
pooled ratios come out of a plan's results."""

from __future__ import annotations

import math

import numpy as np
from sluice import results
from sluice.analysis import pooled
from sluice.cli import main as cli

PLAN = """
name = "pooled-tiny"
seeds = [1, 2]
[set]
duration_s = 20
"downlink.queue_bytes" = 60000
[[scheme]]
name = "webrtc"
[[scheme]]
name = "vidaptive"
[[trace]]
path = "gen:steps:12@8,1.5@6"
label = "drop"
"""


def test_pooled_all_slot_latency_matches_the_summary_and_compares(tmp_path, capsys):
    plan = tmp_path / "p.toml"
    plan.write_text(PLAN)
    root = tmp_path / "results"
    assert cli(["matrix", str(plan), "--jobs", "2", "--results", str(root)]) == 0
    dirs = sorted({p.parent for p in (root / "pooled-tiny").rglob("run.jsonl")})
    assert len(dirs) == 4
    for d in dirs:
        run = results.load_run(d)
        lat = pooled.slot_latencies_ms(run)
        want = run.summary["latency_all_ms"]
        for q in (50, 95, 99):
            assert math.isclose(np.percentile(lat, q), want[f"p{q}"], rel_tol=1e-9, abs_tol=1e-6)
        assert math.isclose(lat.mean(), want["mean"], rel_tol=1e-9)
    out = pooled.compare([root / "pooled-tiny"], "webrtc", ["vidaptive"])
    assert out["cells"] == 2
    v = out["schemes"]["vidaptive"]
    assert v["runs"] == 2 and v["slots"] > 1000
    assert math.isclose(
        v["vs_baseline"]["latency_all_ms_p95"],
        v["latency_all_ms_p95"] / out["schemes"]["webrtc"]["latency_all_ms_p95"],
    )
    assert pooled.main([str(root / "pooled-tiny"), "--baseline", "webrtc", "--schemes", "ace"]) == 2
    assert "no finished runs of ace" in capsys.readouterr().err
