"""MAE §6.7's pre-reaction lead time (sluice.metrics.pre_reaction_leads) on hand-made frames."""

from __future__ import annotations

import math

import pandas as pd
import pytest
from sluice.metrics import lead_row, pre_reaction_leads
from sluice.results import Run


def frames(levels: list[float | None], fps: float = 30.0) -> pd.DataFrame:
    dt_us = 1e6 / fps
    return pd.DataFrame(
        {
            "capture_us": [round(i * dt_us) for i in range(len(levels))],
            "mae_pre_reaction_level": levels,
        }
    )


def test_lead_is_time_from_the_pre_reaction_crossing_to_the_first_confirmed_frame() -> None:
    # r = 0.5: level 1 = half the threshold, level 2 = the threshold.
    lv = [0.2, 0.5, 1.2, 1.5, 1.8, 2.1, 2.5, 3.0, 2.2, 2.0, 0.4, 0.3]
    # pre-reaction from frame 2, real drop from frame 5 (five frames >= 2: 5..9): 3 frames.
    leads = pre_reaction_leads(frames(lv), ratio=0.5)
    assert leads == pytest.approx([3 * 1000 / 30], abs=0.05)


def test_short_runs_over_the_threshold_are_not_drops_and_episodes_are_separate() -> None:
    lv = [0.5, 2.5, 2.5, 2.5, 2.5, 0.5]  # four frames: no real drop
    lv += [0.5, 2.5, 2.5, 2.5, 2.5, 2.5, 0.9]  # jumps straight over: lead 0
    lv += [1.1, 1.1, 2.0, 2.0, 2.0, 2.0, 2.0]  # two frames of warning: lead 2 frames
    leads = pre_reaction_leads(frames(lv), ratio=0.5)
    assert leads == pytest.approx([0.0, 2 * 1000 / 30], abs=0.05)


def test_missing_levels_break_runs_and_no_column_gives_nothing() -> None:
    lv: list[float | None] = [2.5, 2.5, None, 2.5, 2.5, 2.5]
    assert pre_reaction_leads(frames(lv), ratio=0.5) == []
    assert pre_reaction_leads(pd.DataFrame({"capture_us": [0, 1]}), ratio=0.5) == []
    # r = 1 (the artifact): the full threshold is level 1, so every lead is 0
    assert pre_reaction_leads(frames([0.5, *[1.5] * 6]), ratio=1.0) == [0.0]


def test_lead_row_reads_r_from_the_header() -> None:
    lv = [0.2, 1.2, 1.2, 1.2, *[2.2] * 5, 0.1, 1.5, *[2.5] * 6]
    run = Run(
        path=None,  # type: ignore[arg-type]
        header={"config": {"scheme": {"cc": {"pre_reaction_ratio": 0.5}}}},
        frames=frames(lv, fps=10.0),
        samples=pd.DataFrame(),
        summary=None,
    )
    row = lead_row(run)
    assert row["pre_reaction_drops"] == 2
    assert row["pre_reaction_lead_ms_median"] == pytest.approx((300 + 100) / 2)
    assert row["pre_reacted_100ms_share"] == pytest.approx(0.5)
    run.header = {"config": {"scheme": {"cc": {"pre_reaction_ratio": None}}}}
    assert math.isnan(lead_row(run)["pre_reaction_lead_ms_median"])


# --- the report -----------------------------------------------------------------------------

TINY_MAE = """
name = "mae-tiny"
seeds = [1]
[set]
duration_s = 40
"downlink.delay_ms" = 0
"uplink.delay_ms" = 0
[[scheme]]
name = "x264-gcc100"
[[scheme]]
name = "mae"
[[scheme]]
name = "mae-latch"
[[sweep]]
path = "cc.pre_reaction_ratio"
values = [0.5, 0.75]
schemes = ["mae-latch"]
label = "r"
[[trace]]
path = "gen:alternating:10,2,30"
uplink = "gen:alternating:10,2,30"
label = "alt-10-2"
network = "synthetic"
[[trace]]
path = "gen:constant:12"
label = "constant-12"
network = "constant"
"""


def test_mae_report_on_the_model_plan(tmp_path, capsys):
    from sluice.analysis import ANALYSIS_PLACEHOLDER, mae
    from sluice.cli import main as cli

    plan = tmp_path / "mae-tiny.toml"
    plan.write_text(TINY_MAE)
    root = tmp_path / "results"
    assert cli(["matrix", str(plan), "--jobs", "2", "--results", str(root)]) == 0
    out = tmp_path / "report"
    assert mae.main([str(root / "mae-tiny"), "--report-dir", str(out)]) == 0
    text = (out / "mae.md").read_text()
    runs = pd.read_csv(out / "mae-runs.csv")
    assert len(runs) == 8 and set(runs["encoder"]) == {"model"}
    # the base scheme's own cells carry its swept value (r = 0.5) from their headers
    assert sorted(runs.loc[runs["base_scheme"] == "mae-latch", "cc.pre_reaction_ratio"]) == [
        0.5, 0.5, 0.75, 0.75,
    ]  # fmt: skip
    assert "x264 plan (`mae`): not run" in text and ANALYSIS_PLACEHOLDER in text
    for section in ("## Ablation (MAE §6.4", "## Pre-reaction lead", "### r: `cc.pre_reaction"):
        assert section in text
    assert "| `mae` |" in text and "| `mae-latch` |" in text
    assert (out / "img" / "mae-lead-cdf.png").is_file()
    # mae tightens on the drop (adaptation above 0), the baseline never
    base = runs[runs["scheme"] == "x264-gcc100"]["adaptation_ratio"]
    assert (base == 0).all()
    assert runs.loc[(runs["scheme"] == "mae") & (runs["trace"] == "alt-10-2"),
                    "adaptation_ratio"].iloc[0] > 0  # fmt: skip
    # the clips section, here fed the same runs (its per-clip tables are encoder-agnostic)
    from sluice.analysis import load

    res = load(root / "mae-tiny")
    text = mae.write_report(None, res, tmp_path / "r2", clips_res=res,
                            heldout_res=res).read_text()  # fmt: skip
    assert "## Across clips" in text and "clips plan (`mae-clips`): 8 runs" in text
    assert "## Held-out check" in text and "## Headline against the paper" in text
    # the headline rests on cells and pooled slots; the r = s / 2 mapping is stated
    assert "| all-slot P99, per cell | -54.7 % |" in text
    assert "r = s / 2" in text and "MAE selects 1." in text
    # two results of the same encoder are a user error, not a stack trace
    assert mae.main([str(root / "mae-tiny"), str(root / "mae-tiny")]) == 2
    assert "two model results" in capsys.readouterr().err


def test_after_events_follows_the_frames_after_a_tight_one_and_after_a_cut() -> None:
    from sluice.analysis.mae import AFTER_FRAMES, after_events

    # 30 fps at 240 kbps: a frame's share is 1000 B. Frame 2 is tight; the target is cut by
    # half at frame 4 (its share 500 B from there).
    sizes = [1000, 1000, 300, 250, 400, 500, 600]
    target = [240_000] * 4 + [120_000] * 3
    frames = pd.DataFrame({"size_bytes": sizes, "target_rate_bps": target,
                           "encoder_adapted": [False, False, True, False, False, False, False]})
    tight, cut = after_events(frames, 30.0)
    assert len(tight) == len(cut) == AFTER_FRAMES
    # After the tight frame: 250 / 1000, then 400 / 500, 500 / 500, 600 / 500.
    assert tight[:4] == [[0.25], [0.8], [1.0], [1.2]]
    assert all(t == [] for t in tight[4:])
    # From the cut (frame 4 is k = 0): 400, 500, 600 over 500.
    assert cut[:3] == [[0.8], [1.0], [1.2]] and all(c == [] for c in cut[3:])
    # Without the adapted column (the baseline), no tight frames; the cut is still seen.
    tight, cut = after_events(frames.drop(columns=["encoder_adapted"]), 30.0)
    assert all(t == [] for t in tight) and cut[0] == [0.8]
