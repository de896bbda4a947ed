"""Per-cell comparisons of the system reports (sluice.analysis.cells) on hand-made tables."""

from __future__ import annotations

import math

import pandas as pd
import pytest
from sluice.analysis import cells


def table() -> pd.DataFrame:
    # four cells (trace x seed); the baseline's P95 is 100, 200, 300, 400
    rows = []
    for i, (trace, seed) in enumerate([("a", 1), ("a", 2), ("b", 1), ("b", 2)]):
        base = 100.0 * (i + 1)
        rows.append({"scheme": "base", "trace": trace, "clip": None, "seed": seed,
                     "latency_all_ms_p95": base, "vmaf_mean": 90.0, "network": trace})
        # lower by half, equal within 1 %, higher, lower
        mine = [0.5 * base, base * 1.005, 1.5 * base, 0.8 * base][i]
        rows.append({"scheme": "mine", "trace": trace, "clip": None, "seed": seed,
                     "latency_all_ms_p95": mine, "vmaf_mean": 90.0 + [1, 0.05, -2, 0][i],
                     "network": trace})
    rows.append({"scheme": "mine", "trace": "c", "clip": None, "seed": 1,  # no baseline
                 "latency_all_ms_p95": 1e6, "vmaf_mean": 0.0, "network": "c"})
    return pd.DataFrame(rows)


def test_paired_ratio_counts_and_distribution() -> None:
    p = cells.paired(table(), "mine", "base", "latency_all_ms_p95")
    assert p.n == 4  # the cell without a baseline is left out
    assert (p.lower, p.higher, p.same) == (2, 1, 1)
    assert p.base_mean == pytest.approx(250.0)
    assert p.mean == pytest.approx((50 + 201 + 450 + 320) / 4)
    assert p.of_means == pytest.approx(p.mean / 250.0)
    assert p.median == pytest.approx((0.8 + 1.005) / 2)
    assert (p.lo, p.hi) == (pytest.approx(0.5), pytest.approx(1.5))
    text = cells.describe(p)
    assert "lower in 2, higher in 1, within 1 % in 1 of 4" in text


def test_paired_difference_and_missing() -> None:
    p = cells.paired(table(), "mine", "base", "vmaf_mean", "diff")
    assert p.kind == "diff" and p.of_means == pytest.approx((1 + 0.05 - 2 + 0) / 4)
    assert (p.lower, p.higher, p.same) == (1, 1, 2)  # 0.05 and 0 are within 0.1
    none = cells.paired(table(), "mine", "nobody", "vmaf_mean")
    assert none.n == 0 and math.isnan(none.of_means)
    assert cells.describe(none) == "no shared cells"


def test_tables() -> None:
    df = table()
    text = cells.versus_table(df, ["base", "mine"], "base",
                              [("all-slot P95", "latency_all_ms_p95", "ratio")])
    row = next(line for line in text.splitlines() if line.startswith("| `mine`"))
    assert "| 4 | 250 |" in row and "| 2 / 1 / 1 |" in row
    g = cells.group_table(df, ["mine"], "base", "latency_all_ms_p95", "ratio", ["a", "b"])
    assert "(median 0.75x; lower in 1 of 2)" in g  # trace a: 0.5x and 1.005x
    m = cells.means_table(df, ["base", "mine"], cells.LATENCY_COLUMNS[:1])
    assert "| `base` | 4 | 250 ± 205 |" in m  # t(3) * sd / 2 = 3.182 * 129.1 / 2
    assert "| `mine` | 5 |" in m


@pytest.mark.parametrize(
    "plan, schemes",
    [
        ("ace-1080p.toml", {"webrtc-x264", "ace", "ace-c", "ace-n"}),
        ("cortv.toml", {"copa-salsify", "co-rtv", "co-rtv-k2", "fdcc", "copa"}),
        ("cortv-x264.toml", {"copa-salsify", "co-rtv", "co-rtv-nofb", "fdcc"}),
        ("cortv-fig4.toml", {"copa-salsify", "fdcc", "co-rtv"}),
        ("checks/cortv-heldout.toml", {"copa-salsify", "co-rtv"}),
        ("checks/mae-heldout.toml", {"x264-gcc100", "mae", "mae-latch"}),
        ("mae.toml", {"x264-gcc100", "mae", "mae-latch", "mae-timeout"}),
    ],
)  # fmt: skip
def test_report_plans_load_with_their_baselines(plan, schemes) -> None:
    from pathlib import Path

    from sluice import plan as plans

    p = plans.load_plan(Path(__file__).resolve().parents[2] / "experiments" / plan)
    assert schemes <= {s.name for s in p.schemes}


def test_fig4_plan_has_the_paper_s_rtt() -> None:
    from pathlib import Path

    from sluice import plan as plans

    p = plans.load_plan(Path(__file__).resolve().parents[2] / "experiments" / "cortv-fig4.toml")
    trace = plans.PlanTrace("gen:constant:1", "t")
    cfg = p.spec(p.scheme("co-rtv"), trace, p.clips[0], 1).config()
    down, up = cfg["downlink"], cfg["uplink"]
    # end-to-end RTT 60 ms (§II-C): sender-bottleneck and bottleneck-receiver, both ways
    assert 2 * down["access_delay_ms"] + down["delay_ms"] + up["delay_ms"] == 60
