"""MAE's encoder half on the real encoder (MAE §3.1, §4.1): x264 after a 30 -> 3 Mbps drop,
with the VBV buffer switched from 0.5 s to MAE's tight 40 ms at the drop frame."""

from __future__ import annotations

import importlib.util
from pathlib import Path

import numpy as np
import pytest

ROOT = Path(__file__).resolve().parents[2]
HIGH_BPS, LOW_BPS, DROP, FRAMES, FPS = 30_000_000, 3_000_000, 60, 120, 30.0


def _load_bench():
    spec = importlib.util.spec_from_file_location("encoder_bench", ROOT / "bench" / "encoder.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


bench = _load_bench()


@pytest.fixture(scope="module")
def runs(tmp_path_factory: pytest.TempPathFactory) -> dict[str, np.ndarray]:
    """Frame sizes (bytes) and QPs of the shipped 720p clip at 30 fps, 30 Mbps with a 0.5 s
    VBV, then 3 Mbps from frame 60 with the buffer kept (0.5 s), switched to 40 ms, or switched
    to 40 ms and back to 0.5 s a second later (MAE's recovery)."""
    from sluice.video import prepare

    clip = next((ROOT / "data" / "videos").glob("bbb-intro_*.mp4"))
    video = prepare(clip, tmp_path_factory.mktemp("clip"), fps=FPS)
    assert video.width >= 1280

    def sched(*steps: tuple[int, int, float]) -> dict:
        return {"schedule": [bench.step(f, bps, vbv_s=v, fps=FPS) for f, bps, v in steps]}

    first = (0, HIGH_BPS, 0.5)
    jobs = {
        "normal": sched(first, (DROP, LOW_BPS, 0.5)),
        "tight": sched(first, (DROP, LOW_BPS, 0.04)),
        "restored": sched(first, (DROP, LOW_BPS, 0.04), (DROP + 30, LOW_BPS, 0.5)),
    }
    res = bench.encode(video, FRAMES, list(jobs.values()))
    out = {}
    for name, recs in zip(jobs, res):
        out[name] = np.array([r["size_bytes"] for r in recs], dtype=float)
        out[name + "_qp"] = np.array([r["qp"] for r in recs], dtype=float)
    return out


def test_a_tight_buffer_at_the_drop_frame_fits_the_first_frame_to_the_new_rate(runs) -> None:
    target = LOW_BPS / 8 / FPS
    before = runs["normal"][DROP - 10 : DROP].mean() / target
    normal, tight = runs["normal"][DROP] / target, runs["tight"][DROP] / target
    msg = f"frames before the drop {before:.2f}x the new target; first after: "
    msg += f"0.5 s {normal:.2f}x, 40 ms {tight:.2f}x"
    print(msg)
    # MAE §3.1: with 0.5 s the first frame after the drop is as large as the frames before it
    # (this clip fills only ~12 of the 30 Mbps at QP 0 at 720p, so "as large" is ~4-5x here;
    # 6-9x on clips that fill 30 Mbps, README's encoder table). With 40 ms it fits the new rate.
    assert normal > 0.9 * before and normal > 3.0, msg
    assert tight <= 1.3, msg
    # The next ten frames stay near the target too (the buffer holds ~1.2 frames).
    assert runs["tight"][DROP : DROP + 10].mean() / target < 1.2, msg


def test_restoring_the_buffer_costs_a_bounded_qp_bump(runs) -> None:
    """The brief's pitfall: after the restore the buffer is nearly empty, x264's VBV raises
    QP while it refills. Measured, not hidden: the restored run's QP in the second after the
    restore against the run that never tightened."""
    after = slice(DROP + 30, DROP + 60)
    bump = runs["restored_qp"][after].mean() - runs["normal_qp"][after].mean()
    size = runs["restored"][after].mean() / (LOW_BPS / 8 / FPS)
    print(f"QP in the second after the restore: {bump:+.2f} vs never tight; size {size:.2f}x")
    # Restoring must return to the ABR encoder: no lasting cap (size back near the target)
    # and no runaway QP.
    assert 0.7 < size < 1.5
    assert abs(bump) < 6.0
