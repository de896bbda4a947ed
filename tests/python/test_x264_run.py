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


def test_ace_c_runs_on_x264_and_records_its_choices(clip: Path, tmp_path: Path) -> None:
    rc = cli.main(
        ["run", "--scheme", "ace-c", "--video", str(clip), "--trace", "gen:constant:4",
         "--duration", "4", "--encode-time", "modeled", "--quality", "none",
         "--out", str(tmp_path / "ace")]
    )  # fmt: skip
    assert rc == 0
    frames = results.load_run(tmp_path / "ace").frames
    # Every frame carries ACE-C's level, and the level moves (a controller stuck at c0 fails).
    assert frames["complexity"].notna().all()
    assert set(frames["complexity"]) <= {"c0", "c1", "c2"}
    assert frames["complexity"].nunique() > 1
    # Every frame after the first two (no SATD history yet) carries a size prediction.
    assert frames["predicted_relative_size"].iloc[2:].notna().all()


def test_a_video_failing_mid_run_is_one_error_not_a_panic(tmp_path: Path) -> None:
    from sluice import _core

    width, height, frames = 64, 48, 10
    raw = tmp_path / "clip.yuv"
    raw.write_bytes(bytes(width * height * 3 // 2 * frames))
    cfg = {
        "scheme_name": "webrtc-x264",
        "duration_s": 2.0,
        "encoder": {"kind": "x264", "video_path": str(raw), "width": width, "height": height,
                    "video_frames": frames, "encode_time": "modeled"},
    }  # fmt: skip
    sim = _core.Simulation(json.dumps(cfg), None, None)
    # The file loses its frames after the encoder opened it.
    raw.write_bytes(bytes(width * height * 3 // 2 * 2))
    with pytest.raises(RuntimeError, match="reading video frame 2"):
        sim.run_until(1.0)
    with pytest.raises(RuntimeError, match="reading video frame 2"):
        sim.finish()


def test_a_clip_shorter_than_the_run_plays_back_and_forth_without_a_keyframe_at_the_seam(
    tmp_path: Path,
) -> None:
    # A 1 s pattern fading in from black: looped plainly, the full picture jumps to black each
    # second, a scene cut x264 answers with a keyframe; played back and forth it fades back.
    fade = tmp_path / "fade.mp4"
    subprocess.run(
        [video.ffmpeg_exe(), "-v", "error", "-f", "lavfi",
         "-i", "testsrc2=size=160x120:rate=25:duration=1,fade=in:0:25",
         "-pix_fmt", "yuv420p", "-c:v", "libx264", "-qp", "0", "-y", str(fade)],
        check=True,
    )  # fmt: skip
    rc = cli.main(
        ["run", "--scheme", "cbr", "--video", str(fade), "--trace", "gen:constant:4",
         "--duration", "4", "--encode-time", "modeled", "--quality", "none",
         "--out", str(tmp_path / "run")]
    )  # fmt: skip
    assert rc == 0
    frames = results.load_run(tmp_path / "run").frames
    assert len(frames) == 100
    assert int(frames["is_keyframe"].sum()) == 1
    from sluice import _core

    assert [_core.clip_frame(i, 25) for i in (23, 24, 25, 26, 48, 49)] == [23, 24, 23, 22, 0, 1]


def test_a_variable_rate_clip_runs_at_its_average_rate() -> None:
    # The shipped game clip is a VP9 WebM at about 15 fps whose container says 24 (ffmpeg's
    # banner): its frames over its duration decide; a constant-rate clip keeps its own.
    repo = Path(__file__).resolve().parents[2]
    game = repo / "data/videos/game_naev-asteroid-combat_1280x720_15fps_17s.webm"
    assert video._probe(game) == (1280, 720, 15.0)
    assert video._probe(repo / "data/videos/bbb-intro_1280x720_24fps_10s.mp4")[2] == 24.0


def test_a_cut_clip_and_one_with_longer_audio_keep_their_rate(tmp_path: Path) -> None:
    # A clip cut without re-encoding keeps hidden packets before its start (negative times),
    # and an audio track may outlast the video: neither changes the video's frame rate.
    ff = video.ffmpeg_exe()
    repo = Path(__file__).resolve().parents[2]
    flower = repo / "data/videos/handheld_flower_1280x720_30fps_10s.mp4"
    cut, av = tmp_path / "cut.mp4", tmp_path / "av.mp4"
    subprocess.run([ff, "-v", "error", "-ss", "5.5", "-i", str(flower), "-t", "4", "-c", "copy",
                    str(cut)], check=True)  # fmt: skip
    subprocess.run([ff, "-v", "error", "-f", "lavfi", "-i", "testsrc=r=30:d=2:s=64x48",
                    "-f", "lavfi", "-i", "sine=d=3", "-c:v", "libx264", str(av)],
                   check=True)  # fmt: skip
    assert video._probe(cut)[2] == 30.0
    assert video._probe(av) == (64, 48, 30.0)
