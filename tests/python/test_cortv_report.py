"""The Co-RTV report (sluice.analysis.cortv) on a tiny matrix: tables from the runs, the
sweeps, the figures, and the hand-written analysis block kept on regeneration."""

from __future__ import annotations

from pathlib import Path

import pandas as pd
from sluice import analysis
from sluice.analysis import cortv

PLAN = """
name = "cortv-tiny"
seeds = [1]
[set]
duration_s = 4
fps = 60
"downlink.access_delay_ms" = 20
"downlink.delay_ms" = 5
"uplink.delay_ms" = 5
[[scheme]]
name = "copa-salsify"
[[scheme]]
name = "fdcc"
[[scheme]]
name = "co-rtv"
[[sweep]]
path = "downlink.access_delay_ms"
values = [10, 20]
schemes = ["copa-salsify", "fdcc", "co-rtv"]
label = "dsb"
[[sweep]]
path = "bottleneck.alpha"
values = [0.25, 0.5]
schemes = ["co-rtv"]
label = "alpha"
[[trace]]
path = "gen:steps:20@2,2@2"
label = "step"
network = "synthetic"
"""


def test_report_from_a_tiny_matrix(sluice, tmp_path):
    plan = tmp_path / "cortv-tiny.toml"
    plan.write_text(PLAN)
    results = tmp_path / "results"
    r = sluice("matrix", str(plan), "--jobs", "1", "--results", str(results))
    assert r.code == 0, r.err
    out = tmp_path / "report"
    assert cortv.main([str(results / "cortv-tiny"), "--report-dir", str(out)]) == 0
    md = (out / "cortv.md").read_text()
    assert "### Co-RTV relative to each baseline" in md
    assert "| `co-rtv-dsb10` | 10 | 1 |" in md and "| `co-rtv-alpha0.25` | 0.25 | 1 |" in md
    # the paper's COPA is the baseline, latency over every capture slot leads
    assert "Every relative number is against `copa-salsify`" in md
    assert "`co-rtv` vs COPA (`copa-salsify`), all-slot P95" in md
    # the paper's own measure (decoded frames only) stands beside it in the headline
    assert "| `co-rtv` vs COPA (`copa-salsify`), shown P95 | over -69 % | " in md
    assert "| scheme | runs | all-slot P95 ms | all-slot P99 ms |" in md
    for name in ("p95-size", "latency-cdf", "dsb", "sweeps", "step"):
        assert (out / "img" / f"cortv-{name}.png").is_file(), name
    runs = pd.read_csv(out / "cortv-runs.csv")
    assert len(runs) == 3 + 3 + 1  # 3 schemes, 3 delay variants, 1 alpha variant
    # The 20 -> 2 Mbps step makes Co-RTV's bottleneck drop frames: bn drop % above 0.
    assert runs.loc[runs["scheme"] == "co-rtv", "bn_drop_rate"].iloc[0] > 0
    # Fig. 4's and the held-out sections read any results of their schemes (here the same).
    tiny = str(results / "cortv-tiny")
    assert cortv.main([tiny, "--fig4", tiny, "--heldout", tiny, "--report-dir", str(out)]) == 0
    md = (out / "cortv.md").read_text()
    assert "## Fig. 4's setting" in md and "| `copa-salsify` | 213.3 |" in md
    assert "## Held-out check" in md
    # The analysis block is kept byte for byte.
    text = md.replace(analysis.ANALYSIS_PLACEHOLDER, "\nMy analysis.\n")
    (out / "cortv.md").write_text(text)
    assert cortv.main([str(results / "cortv-tiny"), "--report-dir", str(out)]) == 0
    assert "\nMy analysis.\n" in Path(out / "cortv.md").read_text()


def test_results_of_other_schemes_are_one_line(sluice, tmp_path, capsys):
    # Results without this report's schemes (a webrtc run) are a one-line error, not a
    # matplotlib traceback.
    plan = tmp_path / "other.toml"
    plan.write_text('name = "other"\n[set]\nduration_s = 1\n[[scheme]]\nname = "webrtc"\n'
                    '[[trace]]\npath = "gen:constant:5"\nnetwork = "synthetic"\n')  # fmt: skip
    results = tmp_path / "results"
    assert sluice("matrix", str(plan), "--jobs", "1", "--results", str(results)).code == 0
    capsys.readouterr()
    assert cortv.main([str(results / "other"), "--report-dir", str(tmp_path / "rep")]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "no runs of this report's schemes" in err[0], err
    assert not (tmp_path / "rep").exists()  # refused before anything was written
