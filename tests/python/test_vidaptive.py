"""Vidaptive: the schemes' config paths, per-clip plan settings, the summary keys and the
report module (sluice.analysis.vidaptive)."""

from __future__ import annotations

import textwrap
from pathlib import Path

import pytest
from sluice import config
from sluice import plan as plans

REPO = Path(__file__).resolve().parents[2]
CLIP = REPO / "data" / "videos" / "bbb-intro_1280x720_24fps_10s.mp4"

CAP = "encoder_controller.max_video_rate_bps"
DUMMY_CAP = "pacer.dummy.max_video_rate_bps"


def _plan(tmp: Path, text: str) -> Path:
    p = tmp / "plan.toml"
    p.write_text(textwrap.dedent(text))
    return p


def test_vidaptive_schemes_and_their_paths():
    names = config.scheme_names()
    for s in ("vidaptive", "vidaptive-rocc", "vidaptive-no-dummy", "vidaptive-no-pause",
              "vidaptive-no-alpha", "copa"):  # fmt: skip
        assert s in names
    v = config.scheme_config("vidaptive")
    assert config.get_path({"scheme": v}, CAP) == 12e6
    assert config.get_path({"scheme": v}, DUMMY_CAP) == 12e6
    assert config.get_path({"scheme": v}, "encoder_controller.alpha.p_ms") == 33.0
    assert config.get_path({"scheme": v}, "encoder_controller.alpha.lambda") == 0.9
    assert config.get_path({"scheme": v}, "encoder_controller.tau_ms") == 33.0
    assert config.get_path({"scheme": v}, "cc.pacing_gain") == 1.0
    assert config.get_path({"scheme": v}, "cc.pacing_rtt") == "smoothed"
    r = config.scheme_config("vidaptive-rocc")
    assert r["cc"]["kind"] == "rocc" and r["cc"]["gamma"] == 1.0
    assert config.scheme_config("vidaptive-no-dummy")["pacer"]["dummy"]["enabled"] is False
    assert config.scheme_config("vidaptive-no-pause")["encoder_controller"]["pause"] is False
    no_alpha = config.scheme_config("vidaptive-no-alpha")["encoder_controller"]
    assert no_alpha["alpha"]["enabled"] is False


PLAN = f"""\
    name = "caps"
    schemes = ["webrtc", "vidaptive"]
    [set]
    duration_s = 2
    [[trace]]
    path = "gen:constant:5"
    [[clip]]
    path = "{CLIP}"
    label = "capped"
    set = {{ "{CAP}" = 4e6, "{DUMMY_CAP}" = 4e6 }}
    [[clip]]
    path = "{CLIP}"
    label = "default"
    """


def test_a_clip_s_set_applies_to_the_schemes_that_have_the_path(tmp_path):
    p = plans.load_plan(_plan(tmp_path, PLAN))
    cells = {(c.scheme, c.clip): c.spec.config() for c in p.cells(tmp_path / "r")}
    assert config.get_path(cells[("vidaptive", "capped")], CAP) == 4e6
    assert config.get_path(cells[("vidaptive", "capped")], DUMMY_CAP) == 4e6
    assert config.get_path(cells[("vidaptive", "default")], CAP) == 12e6
    # webrtc has no such path: its cells are the same on both clips.
    assert config.diff(cells[("webrtc", "capped")], cells[("webrtc", "default")]) == []
    assert p.to_json()["clips"][0]["overrides"] == [[CAP, 4e6], [DUMMY_CAP, 4e6]]


@pytest.mark.parametrize(
    "change, needles",
    [
        ((f'"{CAP}" = 4e6', '"pacer.nosuch" = 1'),
         ["clip 'capped'", "no scheme of the plan has the config path 'pacer.nosuch'"]),
        ((f'"{CAP}" = 4e6', f'"{CAP}" = "fast"'), ["clip 'capped'", CAP]),
        ((f'set = {{ "{CAP}" = 4e6, "{DUMMY_CAP}" = 4e6 }}', "set = 3"),
         ["clip 1", "set must be a table"]),
    ],
)  # fmt: skip
def test_clip_set_mistakes(tmp_path, change, needles):
    old, new = change
    assert old in PLAN
    with pytest.raises(plans.SluiceError) as e:
        plans.load_plan(_plan(tmp_path, PLAN.replace(old, new, 1)))
    msg = str(e.value)
    assert "\n" not in msg
    for n in needles:
        assert n in msg, msg


TRACE_PLAN = """\
    name = "paths"
    schemes = ["webrtc", "vidaptive"]
    [set]
    duration_s = 2
    "downlink.delay_ms" = 25
    [[trace]]
    path = "gen:poisson:0.57,1"
    label = "nepal"
    set = { "downlink.delay_ms" = 28, "downlink.queue_packets" = 14, "downlink.loss" = 0.0477 }
    [[trace]]
    path = "gen:constant:2"
    label = "plain"
    """


def test_a_trace_s_set_is_its_path_for_every_scheme(tmp_path):
    p = plans.load_plan(_plan(tmp_path, TRACE_PLAN))
    cells = {(c.scheme, c.trace): c.spec.config() for c in p.cells(tmp_path / "r")}
    for s in ("webrtc", "vidaptive"):
        nepal, plain = cells[(s, "nepal")], cells[(s, "plain")]
        assert config.get_path(nepal, "downlink.delay_ms") == 28  # after [set]
        assert config.get_path(nepal, "downlink.queue_packets") == 14
        assert config.get_path(nepal, "downlink.loss") == 0.0477
        assert config.get_path(plain, "downlink.delay_ms") == 25
        assert config.get_path(plain, "downlink.queue_packets") is None
    assert p.to_json()["traces"][0]["overrides"][0] == ["downlink.delay_ms", 28]


@pytest.mark.parametrize(
    "old, new, needles",
    [
        ('"downlink.queue_packets" = 14', '"downlink.nosuch" = 14',
         ["trace 'nepal'", "downlink.nosuch"]),
        ('"downlink.loss" = 0.0477', '"downlink.loss" = 1.5', ["trace 'nepal'", "loss"]),
        ('set = { "downlink.delay_ms" = 28, "downlink.queue_packets" = 14, "downlink.loss" = '
         '0.0477 }', 'set = "deep"', ["trace 1", "set must be a table"]),
    ],
)  # fmt: skip
def test_trace_set_mistakes(tmp_path, old, new, needles):
    assert old in TRACE_PLAN
    with pytest.raises(plans.SluiceError) as e:
        plans.load_plan(_plan(tmp_path, TRACE_PLAN.replace(old, new, 1)))
    msg = str(e.value)
    assert "\n" not in msg
    for n in needles:
        assert n in msg, msg


# --- the report (sluice.analysis.vidaptive) -------------------------------------------------

TINY = """\
    name = "vid-tiny"
    seeds = [1]
    [set]
    duration_s = 3
    "downlink.delay_ms" = 25
    "uplink.delay_ms" = 25
    [[scheme]]
    name = "webrtc"
    [[scheme]]
    name = "vidaptive"
    [[scheme]]
    name = "vidaptive-no-pause"
    [[scheme]]
    name = "copa-window-dummy"
    base = "vidaptive"
    set = { "encoder_controller.alpha.enabled" = false, "encoder_controller.pause" = false }
    [[sweep]]
    path = "encoder_controller.alpha.p_ms"
    values = [20, 33]
    schemes = ["vidaptive"]
    label = "P"
    [[trace]]
    path = "gen:steps:3@1,0.5@1,3@1"
    label = "steps"
    network = "cellular"
    [[trace]]
    path = "gen:poisson:0.57,1"
    label = "pantheon-nepal"
    network = "pantheon"
    set = { "downlink.queue_packets" = 14, "downlink.loss" = 0.0477 }
    [[trace]]
    path = "gen:alternating:2,0.5,2"
    label = "fig2-short"
    network = "synthetic"
    """


@pytest.fixture(scope="module")
def tiny_vid(tmp_path_factory):
    from sluice.cli import main

    tmp = tmp_path_factory.mktemp("vid")
    plan = _plan(tmp, TINY)
    root = tmp / "results"
    assert main(["matrix", str(plan), "--jobs", "2", "--results", str(root)]) == 0
    return plan, root


def test_slot_latencies_are_the_summary_s_latency_all(tiny_vid):
    import numpy as np
    from sluice import results
    from sluice.analysis import load
    from sluice.analysis import vidaptive as va

    _, root = tiny_vid
    df = load(root / "vid-tiny").table
    assert len(df) == 5 * 3
    for d in df["run_dir"]:
        run = results.load_run(d)
        lat = va.slot_latencies_ms(run)
        s = run.summary["latency_all_ms"]
        assert lat.size == 3 * 30  # every capture slot, skipped or not
        assert lat.mean() == pytest.approx(s["mean"])
        assert np.percentile(lat, 95) == pytest.approx(s["p95"])


def test_salsify_rule_on_a_skipped_and_a_lost_slot():
    import pandas as pd
    from sluice import results
    from sluice.analysis import vidaptive as va

    frames = pd.DataFrame({
        "frame_id": [0, 1, 2], "source_index": [0, 2, 3], "capture_us": [0, 66_000, 99_000],
        "displayed_us": [50_000, None, 200_000],
    })  # fmt: skip
    skips = pd.DataFrame({"source_index": [1], "capture_us": [33_000], "reason": ["paused"]})
    run = results.Run(Path("."), {"config": {"duration_s": 0.132, "drain_s": 1.0}}, frames,
                      pd.DataFrame(), None, skips=skips)  # fmt: skip
    # slot 1 (skipped) and slot 2 (never shown) wait for slot 3's display at 200 ms.
    assert va.slot_latencies_ms(run).tolist() == [50.0, 167.0, 134.0, 101.0]


def test_vidaptive_report(tiny_vid, tmp_path, capsys):
    import pandas as pd
    from sluice.analysis import ANALYSIS_CLOSE, ANALYSIS_OPEN, ANALYSIS_PLACEHOLDER
    from sluice.analysis import vidaptive as va

    plan, root = tiny_vid
    assert va.main([str(plan), "--results-root", str(root), "--report-dir", str(tmp_path)]) == 0
    md = tmp_path / "vidaptive.md"
    text = md.read_text()
    for needle in ("## Headline numbers against the paper", "| `vidaptive` | 1 |",
                   "| all-slot P95 per cell (trace, clip, seed) |", "**Baselines.**",
                   "| scheme | runs | all-slot P50 ms | all-slot P95 ms | all-slot P99 ms |",
                   "## Pantheon-like paths", "## Ablations", "### P (ms)",
                   "Not run (no x264 results)", "`vidaptive-clip-rates.json` is missing",
                   "| `vidaptive-no-pause` | 1 |"):  # fmt: skip
        assert needle in text, needle
    assert f"{ANALYSIS_OPEN}{ANALYSIS_PLACEHOLDER}{ANALYSIS_CLOSE}" in text
    runs = pd.read_csv(tmp_path / "vidaptive-runs.csv")
    assert len(runs) == 15 and {"latency_all_ms_p95", "padding_ratio", "matrix"} <= set(runs)
    for name in ("latency-cdf", "ablation", "sweeps", "fig2"):
        assert (tmp_path / "img" / f"vidaptive-{name}.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    mine = "\nKept.\n\n\n\nAcross regenerations.\n"
    md.write_text(text.replace(ANALYSIS_PLACEHOLDER, mine))
    assert va.main([str(plan), "--results-root", str(root), "--report-dir", str(tmp_path)]) == 0
    assert mine in md.read_text()
    assert va.main([str(tmp_path / "missing")]) == 2
    assert "no results directory" in capsys.readouterr().err


@pytest.mark.parametrize(
    "setting, needle",
    [
        ("encoder_controller.alpha.lambda=1.5", "alpha.lambda must be in (0, 1]"),
        ("encoder_controller.alpha.p_ms=0", "encoder_controller.alpha.p_ms"),
        ("encoder_controller.tau_ms=-5", "encoder_controller.tau_ms"),
        ("pacer.dummy.size_bytes=10", "pacer.dummy.size_bytes"),
        ("pacer.dummy.max_video_rate_bps=0", "pacer.dummy.max_video_rate_bps"),
    ],
)  # fmt: skip
def test_vidaptive_setting_mistakes_are_one_line_errors(sluice, tmp_path, setting, needle):
    r = sluice("run", "--scheme", "vidaptive", "--trace", "gen:constant:2", "--duration", "1",
               "--set", setting, "--out", str(tmp_path / "o"))  # fmt: skip
    r.assert_one_line_error(needle)


def test_rocc_setting_mistake_is_one_line_error(sluice, tmp_path):
    r = sluice("run", "--scheme", "vidaptive-rocc", "--trace", "gen:constant:2", "--duration",
               "1", "--set", "cc.gamma=-1", "--out", str(tmp_path / "o"))  # fmt: skip
    r.assert_one_line_error("cc.gamma")
