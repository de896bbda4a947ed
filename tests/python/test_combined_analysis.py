"""The combined scheme's report: the verdict's pooled ratios and tests, the Pareto front per
family, and a clear error without `combined` runs."""

from __future__ import annotations

import math

import numpy as np
from sluice.analysis import combined, combined_verdict, load
from sluice.analysis.cells import slot_latencies
from sluice.cli import main as cli

PLAN = """
name = "combined-tiny"
seeds = [1]
[set]
duration_s = 12
"downlink.queue_bytes" = 60000
"downlink.delay_ms" = 20
[[scheme]]
name = "combined"
[[scheme]]
name = "mae"
[[scheme]]
name = "webrtc"
[[trace]]
path = "gen:steps:8@6,1.5@6"
label = "drop"
network = "synthetic"
[[trace]]
path = "gen:constant:4"
label = "flat"
network = "flat"
"""


def test_verdict_pools_slots_and_applies_the_issues_tests(tmp_path, capsys):
    plan = tmp_path / "p.toml"
    plan.write_text(PLAN)
    root = tmp_path / "results"
    assert cli(["matrix", str(plan), "--jobs", "2", "--no-report", "--results", str(root)]) == 0
    df = load(root / "combined-tiny").table
    assert len(df) == 6
    # A rival judged is not its own rival; without quality scores the VMAF test is not made.
    raw = combined.verdict(df, rivals=("mae", "webrtc"), scheme="mae")
    assert [r["rival"] for r in raw] == ["webrtc"] and raw[0]["vmaf_ok"] is None
    assert combined.verdict_table(raw, "mae").rstrip().endswith("| - |")
    # The model encoder scores no quality: give each scheme a VMAF to test the rule with.
    vmaf = {"combined": 90.0, "mae": 90.5, "webrtc": 92.0}
    df = df.assign(vmaf_mean=[vmaf[s] for s in df["scheme"]])
    rows = {r["rival"]: r for r in combined.verdict(df, rivals=("mae", "webrtc", "ace"))}
    assert set(rows) == {"mae", "webrtc"}  # `ace` has not run: no row
    for rival, r in rows.items():
        mine = slot_latencies(df, "combined")
        theirs = slot_latencies(df, rival)
        assert r["cells"] == 2
        assert math.isclose(r["p95"], np.percentile(mine, 95))
        assert math.isclose(r["p95_ratio"], np.percentile(mine, 95) / np.percentile(theirs, 95))
        assert r["lower"] == (r["p95_ratio"] < 1.0)
        assert r["goal"] == (r["p95_ratio"] <= combined.GOAL)
    assert rows["mae"]["vmaf_ok"] and math.isclose(rows["mae"]["vmaf_diff"], -0.5)
    assert not rows["webrtc"]["vmaf_ok"]  # 2 points below
    table = combined.verdict_table(list(rows.values()))
    assert "| `webrtc` | 2 |" in table and "**no**" in table

    # The front: with the best VMAF, webrtc is on it in both families whatever its latency.
    front, off = combined.front_table(df)
    for line in front.splitlines()[2:]:
        assert "`webrtc`" in line.split("|")[3]
    for fam in off:
        assert f"| {fam} | **no**" in front

    # The printed verdict (combined_verdict) from the same runs: the same rows, and per
    # trace each scheme's pooled P95 and VMAF; an absent scheme is one line and exit 2.
    printed = combined_verdict.report(df, ["combined"])
    assert combined.verdict_table(combined.verdict(df)) in printed
    assert "| `mae` | 2 |" in printed and "`webrtc`" not in printed.split("## Per trace")[0]
    per_trace = printed.split("## Per trace", 1)[1]
    assert per_trace.count("| drop |") == 1 and per_trace.count("| flat |") == 1
    drop = df[df["trace"] == "drop"]
    want = f"{np.percentile(slot_latencies(drop, 'mae'), 95):.0f} / 90.5"
    assert want in next(line for line in per_trace.splitlines() if line.startswith("| drop |"))
    capsys.readouterr()
    assert combined_verdict.main([str(root / "combined-tiny"), "--scheme", "nope"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "no finished runs of `nope`" in err[0]
    # --clip keeps the cells of that clip (here the plan's one) and refuses an unknown one.
    clip = str(df["clip"].astype(str).iloc[0])
    assert combined_verdict.main([str(root / "combined-tiny"), "--clip", clip]) == 0
    assert "| `mae` | 2 |" in capsys.readouterr().out
    assert combined_verdict.main([str(root / "combined-tiny"), "--clip", "nope"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "no cells of clip nope" in err[0]
    # --trace keeps one trace's cells: one cell each, the other trace gone from the table.
    assert combined_verdict.main([str(root / "combined-tiny"), "--trace", "drop"]) == 0
    out = capsys.readouterr().out
    assert "| `mae` | 1 |" in out and "| drop |" in out and "| flat |" not in out
    assert combined_verdict.main([str(root / "combined-tiny"), "--trace", "nope"]) == 2
    assert "no cells of trace nope" in capsys.readouterr().err

    # The whole report from the same runs (as leaderboard and as ablations): written, each
    # scheme once per table.
    rep = tmp_path / "rep"
    assert combined.main([str(root / "combined-tiny"), "--ablations", str(root / "combined-tiny"),
                          "--report-dir", str(rep)]) == 0  # fmt: skip
    md = (rep / "combined.md").read_text()
    assert "## Verdict (issue 31)" in md and "## Ablations" in md
    pooled = md.split("## Ablations", 1)[1].split("\n\n")[2]
    assert pooled.count("| `mae` |") == 1, pooled
    assert (rep / "img" / "combined-ablations-cdf.png").is_file()

    # An ablation run on every cell is judged as `combined` is, in its place on the front.
    every = tmp_path / "every.toml"
    every.write_text(PLAN.replace('name = "combined-tiny"', 'name = "every"').replace(
        '[[scheme]]\nname = "combined"\n[[scheme]]\nname = "mae"\n[[scheme]]\nname = "webrtc"\n',
        '[[scheme]]\nname = "combined-no-mae"\n'))
    assert cli(["matrix", str(every), "--jobs", "2", "--no-report", "--results", str(root)]) == 0
    assert combined.main([str(root / "combined-tiny"), "--ablations", str(root / "combined-tiny"),
                          "--ablations-all", str(root / "every"),
                          "--report-dir", str(rep)]) == 0  # fmt: skip
    md = (rep / "combined.md").read_text()
    part = md.split("### Ablations on every leaderboard cell", 1)[1]
    assert "`combined-no-mae` against the rivals" in part
    assert "| `mae` | 2 |" in part.split("against the rivals", 1)[1]
    fronts = part.split("| family |", 1)[1]
    assert fronts.startswith(" combined-no-mae on the front") and "`combined`" not in fronts

    # Candidates (a base and overrides) judged in combined's place, and the chosen one held
    # out: the recipe from the results' plan, the rule's tests, the held-out verdict.
    cand = tmp_path / "cand.toml"
    cand.write_text(PLAN.replace('name = "combined-tiny"', 'name = "cand"').replace(
        '[[scheme]]\nname = "combined"\n[[scheme]]\nname = "mae"\n[[scheme]]\nname = "webrtc"\n',
        '[[scheme]]\nname = "fast-pacer"\nbase = "webrtc"\nset = { "cc.pacing_factor" = 2.5 }\n'))
    assert cli(["matrix", str(cand), "--jobs", "2", "--no-report", "--results", str(root)]) == 0
    assert combined.main([str(root / "combined-tiny"), "--ablations", str(root / "combined-tiny"),
                          "--heldout", str(root / "combined-tiny"),
                          "--candidates", str(root / "cand"),
                          "--candidates-heldout", str(root / "cand"),
                          "--report-dir", str(rep)]) == 0  # fmt: skip
    chosen = (rep / "combined.md").read_text().split("## How `combined` was chosen", 1)[1]
    row = next(line for line in chosen.splitlines() if line.startswith("| `fast-pacer` |"))
    assert "`webrtc` with `cc.pacing_factor` = `2.5`" in row
    assert "of 1 |" in row  # of the four rivals only `mae` ran here
    assert "`fast-pacer` on the held-out cells" in chosen
    assert "| `mae` | 2 |" in chosen.split("on the held-out cells", 1)[1]

    # Without combined's runs: one line and exit 2.
    only = tmp_path / "only.toml"
    only.write_text(PLAN.replace('name = "combined-tiny"', 'name = "no-combined"').replace(
        '[[scheme]]\nname = "combined"\n', ""))
    assert cli(["matrix", str(only), "--jobs", "2", "--no-report", "--results", str(root)]) == 0
    capsys.readouterr()
    code = combined.main([str(root / "no-combined"), "--ablations", str(root / "no-combined"),
                          "--report-dir", str(tmp_path / "out")])  # fmt: skip
    assert code == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "no finished `combined` runs" in err[0]
