"""The experiment matrix runner (sluice.experiments), the matrix plots and experiments/ace.py."""

from __future__ import annotations

import importlib.util
import math
from pathlib import Path

import pandas as pd
import pytest
from sluice import experiments as ex
from sluice import plots, results
from sluice.errors import SluiceError

# Model encoder (no video), 2 s of a generated trace: the whole module runs in seconds.
TRACE = ex.TraceSpec("gen:constant:12", "const12", "wired")
SCHEMES = ["webrtc", "always-burst"]
COMMON = {"duration_s": 2.0, "queue_bytes": 100_000}
PNG = b"\x89PNG\r\n\x1a\n"
REPO = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def matrix(tmp_path_factory):
    root = tmp_path_factory.mktemp("exp")
    df = ex.run_matrix("t", SCHEMES, [TRACE], [None], results_root=str(root), jobs=1,
                       progress=False, **COMMON)  # fmt: skip
    return root, df


def _counting(monkeypatch):
    calls: list[int] = []
    real = ex.run_many

    def counting(specs, **kw):
        calls.append(len(specs))
        return real(specs, **kw)

    monkeypatch.setattr(ex, "run_many", counting)
    return calls


def test_matrix_rows_and_layout(matrix):
    root, df = matrix
    assert df.attrs["ran"] == 2 and df.attrs["reused"] == 0
    assert list(df.columns) == ex.ROW_COLUMNS
    assert list(df["scheme"]) == SCHEMES
    assert set(df["network"]) == {"wired"} and set(df["clip"]) == {"model"}
    for s, d in zip(df["scheme"], df["run_dir"]):
        assert Path(d) == root / "t" / "const12" / "model" / s
        assert results.is_run_dir(d)
    assert (df["p95_ms"] >= df["p50_ms"]).all() and (df["p95_ms"] > 0).all()
    assert df["vmaf_mean"].isna().all()  # the model encoder has no quality scores
    assert df["c0_share"].isna().all()  # no ACE-C
    burst = dict(zip(df["scheme"], df["burst_share"]))
    assert burst["always-burst"] == 1.0 and burst["webrtc"] < 0.5


def test_matrix_resumes(matrix, monkeypatch):
    root, first = matrix
    calls = _counting(monkeypatch)
    again = ex.run_matrix("t", SCHEMES, [TRACE], [None], results_root=str(root), jobs=1,
                          progress=False, **COMMON)  # fmt: skip
    assert calls == [] and again.attrs["ran"] == 0 and again.attrs["reused"] == 2
    pd.testing.assert_frame_equal(again, first)

    # A lost result reruns only that run.
    (Path(first["run_dir"][1]) / results.SUMMARY_FILE).unlink()
    third = ex.run_matrix("t", SCHEMES, [TRACE], [None], results_root=str(root), jobs=1,
                          progress=False, **COMMON)  # fmt: skip
    assert calls == [1] and third.attrs["ran"] == 1
    assert third["p95_ms"].tolist() == first["p95_ms"].tolist()  # deterministic


def test_changed_spec_is_not_reused(tmp_path, monkeypatch):
    calls = _counting(monkeypatch)
    kw = {"results_root": str(tmp_path), "jobs": 1, "progress": False, "queue_bytes": 100_000}
    ex.run_matrix("t", ["webrtc"], [TRACE], duration_s=1.0, **kw)
    ex.run_matrix("t", ["webrtc"], [TRACE], duration_s=1.5, **kw)
    assert calls == [1, 1]


def test_unknown_scheme_skipped(tmp_path, capsys, monkeypatch):
    calls = _counting(monkeypatch)
    df = ex.run_matrix("t", ["no-such-scheme"], [TRACE], results_root=str(tmp_path),
                       progress=False, **COMMON)  # fmt: skip
    assert df.empty and calls == []
    assert df.attrs["skipped_schemes"] == ["no-such-scheme"]
    assert "no-such-scheme" in capsys.readouterr().err


def test_cells_reject_bad_settings():
    with pytest.raises(SluiceError, match="not common"):
        ex.build_cells("t", SCHEMES, [TRACE], video="x.mp4")
    with pytest.raises(SluiceError, match="listed twice"):
        ex.build_cells("t", ["webrtc", "webrtc"], [TRACE])


def test_variants():
    v = ex.variant("webrtc", "pacing_factor", 2.0)
    assert v.name == "webrtc-P2" and v.config["cc"]["pacing_factor"] == 2.0
    assert ex.registered_config("webrtc")["cc"]["pacing_factor"] == 1.1  # not modified
    assert ex.find_param(v.config, "pacing_factor") == 2.0
    with pytest.raises(SluiceError, match="no field"):
        ex.with_param(v.config, "no_such_field", 1)
    assert ex.clip_label("/a/handheld_flower_1280x720_30fps_10s.mp4") == "handheld_flower"


def test_frame_burst_rule():
    frames = pd.DataFrame({
        "size_bytes": [12_000, 12_000, 1_000, 5_000],
        "packets": [10, 10, 1, 4],
        "target_rate_bps": [10e6] * 4,
        "first_packet_sent_us": [0, 0, 0, None],
        # 10.8 kB in 0.5 ms = 173 Mbit/s (burst); in 9.5 ms = 9 Mbit/s (paced)
        "last_packet_sent_us": [500, 9_500, 0, None],
    })  # fmt: skip
    assert ex.frame_burst(frames).tolist() == [True, False, True, pd.NA]
    assert math.isnan(ex.complexity_share(frames))
    frames["complexity"] = ["c0", "c1", None, "c0"]
    assert ex.complexity_share(frames) == pytest.approx(2 / 3)


def test_plots_write_pngs(matrix, tmp_path):
    _, df = matrix
    df = df.copy()
    df["T"] = [7.5, 15.0]  # stand-ins for a T sweep
    outs = [
        plots.plot_tradeoff(df, tmp_path / "tradeoff.png"),
        plots.plot_latency_cdf_pooled(df, tmp_path / "cdf.png", logx=True),
        plots.plot_loss_stall(df, tmp_path / "bars.png"),
        plots.plot_ablation(df, tmp_path / "ablation.png", baselines=["webrtc"]),
        plots.plot_param_sweep(df, tmp_path / "sweep.png", reference=df),
    ]
    run = results.load_run(df["run_dir"][0])  # webrtc: its pacer publishes no ACE-N state
    assert "pacer_bucket_bytes" not in run.samples and "cc_modified_trend" in run.samples
    outs.append(plots.plot_acen_timeseries(run, tmp_path / "acen.png"))
    outs.append(plots.plot_decision_scatter(run, tmp_path / "decisions.png"))
    outs.append(plots.plot_tradeoff(df.iloc[0:0], tmp_path / "empty.png"))
    for p in outs:
        assert p.read_bytes()[:8] == PNG, p
    d = plots.decision_points(run)
    assert len(d) == len(run.frames) and d["queue_bytes"].iloc[1:].notna().all()
    assert plots.scheme_color("webrtc") == plots.registry_colors()["webrtc"]
    assert plots.scheme_color("webrtc-T7.5") == plots.scheme_color("webrtc-T7.5")
    assert plots.scheme_color("webrtc-T7.5") != plots.scheme_color("webrtc")


def _ace_script():
    spec = importlib.util.spec_from_file_location("ace_script", REPO / "experiments" / "ace.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def test_ace_script_keeps_analysis_and_checks_traces(tmp_path):
    ace = _ace_script()
    md = tmp_path / "ace.md"
    assert ace.existing_analysis(md) == ace.ANALYSIS_PLACEHOLDER
    kept = "\n\nWhat we found.\n\n\n| a | b |\n"
    md.write_text(f"# old\n{ace.ANALYSIS_OPEN}{kept}{ace.ANALYSIS_CLOSE}\nold tables\n")
    assert ace.existing_analysis(md) == kept
    with pytest.raises(ace.Usage, match="traces directory not found"):
        ace.main(["--traces-dir", str(tmp_path / "missing"), "--quick"])


def test_ace_report_from_runs(matrix, tmp_path):
    ace = _ace_script()
    _, df = matrix
    df = df.copy()
    df["T"] = float("nan")
    args = ace.parse_args(["--report-dir", str(tmp_path), "--duration", "2"])
    argv = ["experiments/ace.py", "--duration", "2"]
    md = ace.write_report(df, args, ["a note"], argv)
    text = md.read_text()
    assert "| `webrtc` | 1 |" in text and "a note" in text and "wired" in text
    assert f"{ace.ANALYSIS_OPEN}{ace.ANALYSIS_PLACEHOLDER}{ace.ANALYSIS_CLOSE}" in text
    assert (tmp_path / "ace-runs.csv").is_file()
    for name in ("ace-tradeoff", "ace-latency-cdf", "ace-loss-stall", "ace-decisions",
                 "ace-n-timeseries"):  # fmt: skip
        assert (tmp_path / "img" / f"{name}.png").read_bytes()[:8] == PNG
    mine = "\nKept.\n\n\n\nAcross regenerations.\n"
    md.write_text(text.replace(ace.ANALYSIS_PLACEHOLDER, mine))
    assert mine in ace.write_report(df, args, [], argv).read_text()


def test_ace_script_adds_the_planned_size_ablation():
    ace = _ace_script()
    run, sweep, notes = ace.schemes(ace.parse_args(["--schemes", "ace", "--t-values", ""]))
    by_name = {s.name: s for s in run}
    assert set(by_name) == {"ace", ace.UNCORRECTED} and not sweep and not notes
    cfg = by_name[ace.UNCORRECTED].config
    assert ex.find_param(cfg, ace.SIZE_SCALE_FIELD) == [1.0, 1.0, 1.0]
    # Everything else is `ace`'s.
    assert ex.find_param(ex.registered_config("ace"), ace.SIZE_SCALE_FIELD) != [1.0, 1.0, 1.0]
    assert ex.with_param(cfg, ace.SIZE_SCALE_FIELD, None) == ex.with_param(
        ex.registered_config("ace"), ace.SIZE_SCALE_FIELD, None
    )
    args = ace.parse_args(["--schemes", "ace", "--t-values", "", "--no-uncorrected"])
    assert [s.name for s in ace.schemes(args)[0]] == ["ace"]
