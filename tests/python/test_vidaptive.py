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
