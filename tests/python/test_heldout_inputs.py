"""Issue 31's held-out checks run on traces and clips the project does not ship. Twice a
shipped input slipped into one under another name (combined-heldout2.toml: its animation is
data/videos/bbb-intro, its Wi-Fi trace starts as data/traces/wifi-hairpin14-70s.mahi); this
test looks for such inputs in every held-out plan of issue 31, two ways: by content (a
Mahimahi trace that starts as a shipped one, a clip that is a shipped file byte for byte)
and by source (the trace series and clips data/traces/*README.md and data/videos/README.md
name as the sources of what is shipped: the leaderboard's windows are cut from the middle of
their series and re-based, and a clip may be another encoding of a shipped one, which no
comparison of bytes finds). It reads the plans' inputs from ../shared, so a plan is skipped
where its inputs are absent (a fresh checkout)."""

from __future__ import annotations

import functools
from pathlib import Path

import pytest
from sluice.plan import load_plan

ROOT = Path(__file__).resolve().parents[2]
PLANS = sorted((ROOT / "experiments" / "checks").glob("combined*heldout*.toml"))
#: Lines of a Mahimahi trace compared: a held-out trace that starts as a shipped one (a cut
#: of the same series) is caught whatever its length.
PREFIX_LINES = 2000
#: The sources of the shipped traces (data/traces/README.md, data/traces/leaderboard/
#: README.md) as ../shared names them: (its folder, the file's stem).
TRACE_SOURCES = {
    ("hairpin", "wifi_trace14"): "data/traces/wifi-hairpin14-70s.mahi",
    ("zhuge", "office-wifi_trace7"): "data/traces/leaderboard/wifi-office7-w*.rate",
    ("zhuge", "4g_trace2"): "data/traces/leaderboard/lte-zhuge2-w*.rate",
    ("ucc-5g", "Download_Driving_B_2020.01.16_09.56.56"):
        "data/traces/leaderboard/5g-driving-b-w*.rate",
    ("mahimahi", "TMobile-UMTS-driving"): "data/traces/leaderboard/3g-umts-driving-w*.mahi",
}  # fmt: skip
#: What the shipped clips show (data/videos/README.md): a clip whose name has one of these is
#: the same footage, whatever its encoding.
CLIP_SOURCES = ("bbb-intro", "handheld_flower", "nature_squirrel", "naev-asteroid-combat")
#: Shipped inputs a plan holds that its comment and docs/results/combined.md say so, by plan
#: and label (their cells are left out of the strictly held-out numbers).
KNOWN = {"combined-heldout2": {"wifi-hairpin14", "animation"}}


def _head(path: Path) -> list[str]:
    with path.open(encoding="utf-8", errors="replace") as f:
        return [line.strip() for _, line in zip(range(PREFIX_LINES), f)]


@functools.cache
def _shipped_traces() -> dict[str, list[str]]:
    return {str(p.relative_to(ROOT)): _head(p) for p in (ROOT / "data" / "traces").rglob("*.mahi")}


@functools.cache
def _shipped_clips() -> dict[str, bytes]:
    videos = (ROOT / "data" / "videos").iterdir()
    return {str(p.relative_to(ROOT)): p.read_bytes() for p in videos if p.suffix != ".md"}


def shipped_inputs(plan_path: Path) -> dict[str, str]:
    """The plan's traces and clips that are shipped files, by label: the shipped file."""
    plan = load_plan(plan_path)
    traces, clips = _shipped_traces(), _shipped_clips()
    out = {}
    for t in plan.traces:
        if t.path.startswith("gen:"):
            continue
        source = TRACE_SOURCES.get((Path(t.path).parent.name, Path(t.path).stem))
        if source:
            out[t.label] = source
        head = _head(Path(t.path))
        for name, shipped in traces.items():
            n = min(len(head), len(shipped))
            if n and head[:n] == shipped[:n]:
                out[t.label] = name
    for c in plan.clips:
        if c.path is None:
            continue
        shown = next((n for n in CLIP_SOURCES if n in Path(c.path).name), None)
        if shown:
            out[c.label] = f"data/videos/*{shown}*"
        data = Path(c.path).read_bytes()
        for name, shipped in clips.items():
            if data == shipped:
                out[c.label] = name
    return out


@pytest.mark.parametrize("plan_path", PLANS, ids=lambda p: p.stem)
def test_held_out_plans_hold_no_shipped_input_but_those_they_name(plan_path: Path) -> None:
    plan = load_plan(plan_path)
    paths = [t.path for t in plan.traces if not t.path.startswith("gen:")]
    paths += [c.path for c in plan.clips if c.path]
    missing = [p for p in paths if not Path(p).is_file()]
    if missing:
        pytest.skip(f"inputs not here: {missing[0]}")
    found = shipped_inputs(plan_path)
    assert set(found) == KNOWN.get(plan.name, set()), found


def test_the_check_finds_a_shipped_trace_cut_and_a_shipped_clip(tmp_path: Path) -> None:
    # The detector itself, on inputs made here: a trace that starts as a shipped one (a
    # shorter cut), one that does not, and a byte copy of a shipped clip.
    shipped = ROOT / "data" / "traces" / "wifi-hairpin14-70s.mahi"
    lines = shipped.read_text().splitlines()
    (tmp_path / "cut.mahi").write_text("\n".join(lines[:5000]) + "\n")
    (tmp_path / "other.mahi").write_text("".join(f"{3 * i}\n" for i in range(1, 5000)))
    clip = next(p for p in (ROOT / "data" / "videos").iterdir() if p.suffix == ".mp4")
    (tmp_path / "copy.mp4").write_bytes(clip.read_bytes())
    plan = tmp_path / "p.toml"
    plan.write_text(
        'name = "p"\n[[scheme]]\nname = "webrtc"\n'
        '[[trace]]\npath = "cut.mahi"\nlabel = "cut"\n'
        '[[trace]]\npath = "other.mahi"\nlabel = "other"\n'
        '[[clip]]\npath = "copy.mp4"\nlabel = "copy"\n'
    )
    found = shipped_inputs(plan)
    assert found == {"cut": "data/traces/wifi-hairpin14-70s.mahi",
                     "copy": str(clip.relative_to(ROOT))}  # fmt: skip
    # By source: a series the leaderboard cut its windows from, another encoding of a clip.
    (tmp_path / "zhuge").mkdir()
    (tmp_path / "zhuge" / "4g_trace2.mahi").write_text("".join(f"{3 * i}\n" for i in range(1, 99)))
    (tmp_path / "game_naev-asteroid-combat_15s.mp4").write_bytes(b"not the shipped bytes")
    plan.write_text(
        'name = "p"\n[[scheme]]\nname = "webrtc"\n'
        '[[trace]]\npath = "zhuge/4g_trace2.mahi"\nlabel = "lte"\n'
        '[[clip]]\npath = "game_naev-asteroid-combat_15s.mp4"\nlabel = "game"\n'
    )
    assert set(shipped_inputs(plan)) == {"lte", "game"}
