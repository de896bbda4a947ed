"""The encoder benchmark's entry points: `_core.encode_clip` / `model_encode` and the
statistics of `bench/encoder.py`."""

from __future__ import annotations

import importlib.util
import json
from pathlib import Path

import numpy as np
import pytest
from sluice import _core

W, H, FPS = 64, 48, 25.0


def _load_bench():
    path = Path(__file__).resolve().parents[2] / "bench" / "encoder.py"
    spec = importlib.util.spec_from_file_location("encoder_bench", path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


bench = _load_bench()


@pytest.fixture(scope="module")
def raw(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Ten frames of moving noise, raw I420."""
    rng = np.random.default_rng(1)
    texture = rng.integers(0, 255, size=(H, W * 2), dtype=np.uint8)
    frames = []
    for i in range(10):
        y = np.roll(texture, 3 * i, axis=1)[:, :W]
        uv = np.full(W * H // 2, 128, dtype=np.uint8)
        frames.append(y.tobytes() + uv.tobytes())
    path = tmp_path_factory.mktemp("raw") / "noise.yuv"
    path.write_bytes(b"".join(frames))
    return path


def test_encode_clip_runs_jobs_in_lockstep_and_reports_every_frame(raw: Path) -> None:
    jobs = [
        {
            "schedule": [
                {"frame": 0, "bitrate_bps": 400_000},
                {"frame": 10, "bitrate_bps": 40_000, "vbv_buffer_bits": 1_600},
            ]
        },
        {"qp": 30, "psnr": True, "schedule": [{"frame": 0, "complexity": "c2"}]},
    ]
    abr, cqp = json.loads(_core.encode_clip(str(raw), W, H, FPS, 25, json.dumps(jobs)))
    assert [r["frame"] for r in abr] == list(range(25))  # the clip loops
    assert abr[0]["type"] == "IDR" and abr[0]["keyframe"]
    assert all(r["type"] == "P" for r in abr[1:10])
    assert all(r["encode_us"] > 0 and r["psnr_y"] is None for r in abr)
    # The one-frame VBV after the drop caps every frame at 1600 bits (x264 allows a little
    # slack for headers).
    assert max(r["size_bytes"] for r in abr[12:]) < 2 * 1_600 / 8 + 100
    # P frames at the constant QP; I frames (the first, and scene cuts at the loop point)
    # ip_factor lower.
    assert {r["qp"] for r in cqp if r["type"] == "P"} == {30}
    assert {r["qp"] for r in cqp if r["type"] != "P"} == {27}
    assert all(20 < r["psnr_y"] < 60 for r in cqp)


def test_encode_clip_from_a_start_frame_matches_the_looped_clip(raw: Path) -> None:
    job = [{"qp": 26, "schedule": [{"frame": 0}]}]
    (late,) = json.loads(_core.encode_clip(str(raw), W, H, FPS, 3, json.dumps(job), 4))
    (full,) = json.loads(_core.encode_clip(str(raw), W, H, FPS, 1, json.dumps(job), 14))
    assert late[0]["size_bytes"] == full[0]["size_bytes"]  # both start at source frame 4


@pytest.mark.parametrize(
    ("jobs", "needle"),
    [
        ("not json", "invalid encoder jobs"),
        ("[]", "no encoder jobs"),
        ('[{"schedule": []}]', "needs a step at frame 0"),
        ('[{"qp": 26, "schedule": [{"frame": 0, "bitrate_bps": 1000}]}]', "takes no rates"),
        ('[{"qp": 60, "schedule": [{"frame": 0}]}]', "constant QP 60"),
        ('[{"schedule": [{"frame": 0, "bitrate_bps": 1000, "complexity": "c9"}]}]', "c9"),
        ('[{"schedule": [{"frame": 5, "bitrate_bps": 1}, {"frame": 2}]}]', "increasing"),
        ('[{"schedule": [{"frame": 0, "bitrate_bps": 1000, "size_scale": 0}]}]', "size_scale"),
    ],
)
def test_encode_clip_rejects_bad_jobs(raw: Path, jobs: str, needle: str) -> None:
    with pytest.raises(ValueError, match=needle):
        _core.encode_clip(str(raw), W, H, FPS, 5, jobs)


def test_encode_clip_rejects_a_missing_or_short_file(tmp_path: Path) -> None:
    job = json.dumps([{"qp": 26, "schedule": [{"frame": 0}]}])
    with pytest.raises(ValueError, match="missing.yuv"):
        _core.encode_clip(str(tmp_path / "missing.yuv"), W, H, FPS, 5, job)
    short = tmp_path / "short.yuv"
    short.write_bytes(b"\0" * 100)
    with pytest.raises(ValueError, match="not one 64x48"):
        _core.encode_clip(str(short), W, H, FPS, 5, job)


def test_model_encode_follows_the_schedule() -> None:
    jobs = [{"model": {"seed": 3}, "schedule": [bench.step(0, 3_000_000, fps=30.0)]}]
    (recs,) = json.loads(_core.model_encode(30.0, 600, json.dumps(jobs)))
    sizes = np.array([r["size_bytes"] for r in recs[100:]])
    assert abs(sizes.mean() / (3e6 / 8 / 30) - 1) < 0.1
    with pytest.raises(ValueError, match="constant-QP"):
        _core.model_encode(30.0, 10, '[{"qp": 26, "schedule": [{"frame": 0}]}]')


def test_statistics() -> None:
    # Convergence: the first window of three averaging at most 1.5x the target.
    assert bench.frames_to_converge(np.array([9.0, 5, 3, 1, 1, 1, 9]), 1.0, 0.5) == 3
    assert bench.frames_below_target(np.array([2.0, 1, 3, 1, 1]), 1.0) == 3
    # 3 + 1 bytes over a 1-byte-per-frame drain at 8 bit/s: 4 s.
    assert bench.backlog_ms(np.array([4.0, 2.0, 0.0]), 1.0, 8.0) == pytest.approx(4000)
    # Bjontegaard: a curve 20% cheaper at every PSNR is -20%.
    rates = [1000.0, 2000.0, 4000.0, 8000.0]
    psnr = [34.0, 37.0, 40.5, 43.0]
    assert bench.bd_rate(rates, psnr, rates, psnr) == pytest.approx(0.0, abs=1e-9)
    assert bench.bd_rate(rates, psnr, [0.8 * r for r in rates], psnr) == pytest.approx(-0.2)
    assert bench.bd_rate(rates, psnr, rates, [p + 20 for p in psnr]) is None


def test_planned_size_correction_turns_the_levels_gain_into_a_smaller_frame(
    tmp_path: Path,
) -> None:
    """ACE §5.1 on x264 and real content (the shipped clip): one frame in ten switched to c1
    or c2 inside a c0 stream. Without the correction the switched frame is about c0's size and
    better; with ACE-C's default planned-size scale it is clearly smaller at about c0's PSNR."""
    from sluice.video import prepare

    clip = Path(__file__).resolve().parents[2] / "data" / "videos"
    video = prepare(next(clip.glob("bbb-intro_*.mp4")), tmp_path, width=480)
    (ace_c,) = [s for s in json.loads(_core.schemes_json()) if s["name"] == "ace-c"]
    scale = ace_c["config"]["encoder_controller"]["planned_size_scale"]
    frames, every, bps = 120, 10, 1_000_000

    def switched(level: str, size_scale: float) -> dict:
        sched = [bench.step(0, bps, fps=video.fps, complexity="c0")]
        for f in range(every, frames, every):
            sched += [
                {"frame": f, "complexity": level, "size_scale": size_scale},
                {"frame": f + 1, "complexity": "c0", "size_scale": 1.0},
            ]
        return {"psnr": True, "schedule": sched}

    jobs = [{"psnr": True, "schedule": [bench.step(0, bps, fps=video.fps, complexity="c0")]}]
    for level in ("c1", "c2"):
        jobs += [switched(level, 1.0), switched(level, scale[int(level[1])])]
    base, *runs = bench.encode(video, frames, jobs)
    idx = range(every, frames, every)

    def vs_c0(run: list[dict]) -> tuple[float, float]:
        size = np.mean([run[i]["size_bytes"] / base[i]["size_bytes"] for i in idx])
        dpsnr = np.mean([run[i]["psnr_y"] - base[i]["psnr_y"] for i in idx])
        return float(size), float(dpsnr)

    for level, (plain, corrected) in zip(("c1", "c2"), (runs[:2], runs[2:])):
        (s_plain, q_plain), (s_corr, q_corr) = vs_c0(plain), vs_c0(corrected)
        msg = f"{level}: plain {s_plain:.2f}x {q_plain:+.2f} dB, "
        msg += f"corrected {s_corr:.2f}x {q_corr:+.2f} dB"
        assert s_plain > 0.95 and q_plain > 0.2, msg
        assert s_corr < 0.97 and s_corr < s_plain - 0.1, msg
        assert abs(q_corr) < 0.4, msg
