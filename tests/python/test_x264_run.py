"""End to end on the real encoder: x264 on a generated clip through the simulated network,
scored as the viewer saw it."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest
from sluice import cli, results, video


@pytest.fixture(scope="module")
def clip(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("clip") / "moving.mp4"
    subprocess.run(
        [video.ffmpeg_exe(), "-v", "error", "-f", "lavfi",
         "-i", "testsrc2=size=320x240:rate=25:duration=2", "-pix_fmt", "yuv420p",
         "-c:v", "libx264", "-qp", "0", "-y", str(path)],
        check=True,
    )  # fmt: skip
    return path


def _run(clip: Path, out: Path, *extra: str) -> dict:
    rc = cli.main(
        ["run", "--scheme", "webrtc-x264", "--video", str(clip), "--trace", "gen:constant:4",
         "--duration", "4", "--encode-time", "modeled", "--out", str(out), *extra]
    )  # fmt: skip
    assert rc == 0
    return json.loads((out / "summary.json").read_text())


def test_x264_run_is_scored_and_reproducible(clip: Path, tmp_path: Path) -> None:
    a = _run(clip, tmp_path / "a", "--quality", "fast")
    b = _run(clip, tmp_path / "b", "--quality", "fast")
    assert a["frames_sent"] == 100 and a["frames_displayed"] > 90
    assert 60 < a["vmaf_mean"] <= 100 and a["vmaf_delivered_mean"] is not None
    run_a = results.load_run(tmp_path / "a")
    assert run_a.quality is not None and len(run_a.quality) == 20  # every 5th of 100 slots
    assert run_a.header["config"]["encoder"]["kind"] == "x264"
    # Modeled encode time: the per-frame records are identical run to run.
    frames = [
        [ln for ln in (tmp_path / d / "run.jsonl").read_text().splitlines() if '"frame"' in ln]
        for d in ("a", "b")
    ]
    assert frames[0] == frames[1]
    assert a["vmaf_mean"] == b["vmaf_mean"]


def test_losses_cost_latency_stalls_and_quality(clip: Path, tmp_path: Path) -> None:
    clean = _run(clip, tmp_path / "clean", "--quality", "full")
    lossy = _run(clip, tmp_path / "lossy", "--quality", "full", "--loss", "0.1")
    # Retransmissions repair the frames (late), GCC's loss controller lowers the rate, and
    # the viewer sees stalls and a lower-quality picture.
    assert lossy["retransmissions"] > 0
    assert lossy["stall_rate"] > clean["stall_rate"]
    assert lossy["latency_ms"]["p95"] > clean["latency_ms"]["p95"]
    assert lossy["vmaf_mean"] < clean["vmaf_mean"]
