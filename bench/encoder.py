"""Encoder characterisation: libx264 as Sluice drives it, measured on real clips.

`make bench-encoder` runs this and writes ``bench/out/encoder.json`` and three PNGs:

1. Frame-size distribution (ACE §2 Fig. 2, Fig. 8): each clip at 1280 px wide, its native
   frame rate, superfast + zerolatency, ABR at 4 Mbps with VBV max rate = target and a 0.5 s
   buffer (the seeds' settings). CCDF of size / mean over all frames but the first (the
   opening IDR), P(size > 2x mean), P(> 5x mean), coefficient of variation.
2. Complexity levels c0-c2 (ACE §5.1 Table 2, Fig. 4-5), plus the preset's own analysis
   settings (what runs when no level is asked for). Under ABR the rate control re-targets the
   same size whatever the level, so frame size is measured at a *constant quantiser* instead:
   each level at QP 22, 26, 30, 34 with the luma PSNR of x264's reconstruction, and the size
   at equal quality is the Bjontegaard delta rate (cubic fit of log bytes over PSNR, VCEG-M33)
   against c0. Encode time per frame is measured under ABR at the 4 Mbps target, where the
   simulator runs it; the jobs of one clip run in lockstep (frame i through every encoder
   before frame i + 1), so machine load affects the levels alike. As ACE-C uses the levels,
   every 10th frame of a c0 stream is also switched to c1 (or c2) under ABR, without and with
   ACE-C's planned-size correction (ACE §5.1; on x264 a uniform quant offset): its size,
   PSNR, QP, time and the next frame's size against the same frames of the all-c0 stream.
   Single c0 frames offset by 1 and 2 QP the same way give x264's size-per-QP law.
3. Convergence after a 30 -> 3 Mbps target drop (MAE §3.1 Fig. 2): ABR at 30 Mbps for 90
   frames, 3 Mbps for 60, 30 for 90, 3 for 60; with the default 0.5 s VBV and with a one-frame
   VBV (the `cbr` scheme). Per drop: frames until three consecutive frames average at most
   1.5x the new target frame size (``frames_to_converge`` of the model encoder, tolerance
   0.5), frames until two consecutive frames are each at most the target (MAE's definition),
   and the backlog a link of exactly 3 Mbps would build (ms).

The model encoder (``sluice-core``'s ``ModelEncoder``) runs the same targets and schedules,
so its rows sit next to x264's. Encode times are wall times of single-threaded
``x264_encoder_encode`` calls on this machine; compare runs made on the same one.

Clips: the shipped ``data/videos`` clip, plus the clips of ``--videos-dir`` (default
``../shared/videos``) when present; missing ones are listed under ``skipped``.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
from sluice import _core, config
from sluice.video import prepare

ROOT = Path(__file__).resolve().parent.parent

# (name, file, directory key): "data" = the shipped clip, "shared" = --videos-dir.
CLIPS = [
    ("animation", "bbb-intro_1280x720_24fps_10s.mp4", "data"),
    ("talking-head", "talking-head_call_1280x720_24fps_10s.mp4", "shared"),
    ("handheld", "handheld_flower_1280x720_30fps_10s.mp4", "shared"),
    ("nature", "nature_squirrel_1280x720_25fps_10s.mp4", "shared"),
    ("screen", "screen_pdf-scroll_1024x768_25fps_2s.mp4", "shared"),
    ("street", "street_traffic_768x432_12.5fps_30s.mp4", "shared"),
]
WIDTH = 1280
TARGET_BPS = 4_000_000
LEVELS = ["preset", "c0", "c1", "c2"]
RD_QPS = [22, 26, 30, 34]
PRESETS = ["ultrafast", "superfast", "veryfast", "faster", "fast", "medium"]
HIGH_BPS, LOW_BPS = 30_000_000, 3_000_000
DROP_SCHEDULE = [(0, HIGH_BPS), (90, LOW_BPS), (150, HIGH_BPS), (240, LOW_BPS)]
DROP_FRAMES = 300
CONVERGE_TOLERANCE = 0.5
SWITCH_EVERY = 10
OFFSET_QPS = (1, 2)  # quant offsets on single c0 frames (x264's size-per-QP law)
VBVS = ("vbv_0.5s", "vbv_1frame")  # 0.5 s of the target, one frame of it


def git(*args: str) -> str:
    try:
        out = subprocess.run(["git", *args], capture_output=True, text=True, cwd=ROOT, check=True)
        return out.stdout.strip()
    except (OSError, subprocess.CalledProcessError):
        return "unknown"


def cpu_model() -> str:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or "unknown"


def step(
    frame: int,
    bps: int | None = None,
    vbv_s: float | None = 0.5,
    fps: float = 30.0,
    complexity: str | None = None,
) -> dict:
    """A schedule step; ``vbv_s`` None means a one-frame VBV buffer."""
    s: dict = {"frame": frame}
    if bps is not None:
        buffer = bps / fps if vbv_s is None else bps * vbv_s
        s.update(bitrate_bps=bps, vbv_max_bps=bps, vbv_buffer_bits=int(buffer))
    if complexity is not None and complexity != "preset":
        s["complexity"] = complexity
    return s


def encode(video, frames: int, jobs: list[dict], start: int = 0) -> list[list[dict]]:
    out = _core.encode_clip(
        video.path, video.width, video.height, video.fps, frames, json.dumps(jobs), start
    )
    return json.loads(out)


def model_encode(fps: float, frames: int, jobs: list[dict]) -> list[list[dict]]:
    return json.loads(_core.model_encode(fps, frames, json.dumps(jobs)))


# --- statistics ---------------------------------------------------------------------------


def size_stats(sizes: np.ndarray, target_frame_bytes: float) -> dict:
    mean = float(sizes.mean())
    return {
        "frames": int(sizes.size),
        "mean_bytes": round(mean, 1),
        "mean_over_target": round(mean / target_frame_bytes, 3),
        "cv": round(float(sizes.std() / mean), 3),
        "p_over_2x_mean": round(float((sizes > 2 * mean).mean()), 4),
        "p_over_5x_mean": round(float((sizes > 5 * mean).mean()), 4),
        "max_over_mean": round(float(sizes.max() / mean), 2),
    }


def ccdf(sizes: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    x = np.sort(sizes / sizes.mean())
    y = 1.0 - np.arange(1, x.size + 1) / x.size
    return x, y


def frames_to_converge(sizes: np.ndarray, target: float, tolerance: float) -> int:
    """As ``sluice_core::encoder::model::frames_to_converge``: index of the first window of
    three frames whose mean is at most ``(1 + tolerance) * target`` (len if none)."""
    for i in range(len(sizes) - 2):
        if sizes[i : i + 3].mean() <= target * (1 + tolerance):
            return i
    return len(sizes)


def frames_below_target(sizes: np.ndarray, target: float) -> int:
    """MAE §3: index of the first of two consecutive frames each at most the target."""
    for i in range(len(sizes) - 1):
        if sizes[i] <= target and sizes[i + 1] <= target:
            return i
    return len(sizes)


def backlog_ms(sizes: np.ndarray, target: float, rate_bps: float) -> float:
    """Peak backlog (ms) of a link draining exactly ``target`` bytes per frame."""
    backlog = peak = 0.0
    for s in sizes:
        backlog = max(0.0, backlog + s - target)
        peak = max(peak, backlog)
    return peak * 8 / rate_bps * 1000


def bd_rate(rates_a, psnr_a, rates_b, psnr_b) -> float | None:
    """Bjontegaard delta rate of B against A (VCEG-M33): mean relative bitrate difference at
    equal PSNR over the overlapping PSNR range, from cubic fits of log rate over PSNR."""
    lo = max(min(psnr_a), min(psnr_b))
    hi = min(max(psnr_a), max(psnr_b))
    if not hi > lo:
        return None
    pa = np.polyfit(psnr_a, np.log(rates_a), 3)
    pb = np.polyfit(psnr_b, np.log(rates_b), 3)
    ia, ib = np.polyint(pa), np.polyint(pb)
    avg_a = (np.polyval(ia, hi) - np.polyval(ia, lo)) / (hi - lo)
    avg_b = (np.polyval(ib, hi) - np.polyval(ib, lo)) / (hi - lo)
    return float(np.exp(avg_b - avg_a) - 1.0)


def times_ms(records: list[dict]) -> np.ndarray:
    return np.array([r["encode_us"] for r in records[1:]]) / 1000.0


def sizes_of(records: list[dict], skip_first: bool = True) -> np.ndarray:
    return np.array([r["size_bytes"] for r in records[1 if skip_first else 0 :]], dtype=float)


# --- benchmarks ---------------------------------------------------------------------------


def switch_schedule(fps: float, level: str, frames: int, size_scale: float = 1.0) -> list[dict]:
    """c0 at TARGET_BPS, with every SWITCH_EVERY-th frame at ``level`` (as ACE-C does) and
    planned at ``size_scale`` of the rate control's plan (ACE §5.1's correction)."""
    sched = [step(0, TARGET_BPS, fps=fps, complexity="c0")]
    for f in range(SWITCH_EVERY, frames, SWITCH_EVERY):
        sched += [
            {"frame": f, "complexity": level, "size_scale": size_scale},
            {"frame": f + 1, "complexity": "c0", "size_scale": 1.0},
        ]
    return sched


def ace_c_size_scale() -> list[float]:
    """ACE-C's default planned-size scale per level (c0, c1, c2)."""
    return config.get_path(
        {"scheme": config.scheme_config("ace-c")}, "encoder_controller.planned_size_scale"
    )


def bench_abr(video, frames: int) -> dict:
    """Size distribution of the preset and encode time of every level, ABR at TARGET_BPS;
    single frames switched to c1 or c2 within a c0 stream, with and without ACE-C's
    planned-size correction, against the same frames at c0; and single c0 frames with a quant
    offset of OFFSET_QPS, for x264's size-per-QP law."""
    scale = ace_c_size_scale()
    jobs = [
        {"psnr": lvl == "c0", "schedule": [step(0, TARGET_BPS, fps=video.fps, complexity=lvl)]}
        for lvl in LEVELS
    ]
    switches = [(lvl, corrected) for lvl in ("c1", "c2") for corrected in (False, True)]
    jobs += [
        {
            "psnr": True,
            "schedule": switch_schedule(
                video.fps, lvl, frames, scale[int(lvl[1])] if corrected else 1.0
            ),
        }
        for lvl, corrected in switches
    ]
    # The size scales whose quant offsets are exactly OFFSET_QPS.
    jobs += [
        {
            "psnr": True,
            "schedule": switch_schedule(
                video.fps, "c0", frames, 2 ** (-qp / _core.X264_QP_PER_SIZE_HALVING)
            ),
        }
        for qp in OFFSET_QPS
    ]
    out_runs = encode(video, frames, jobs)
    runs = out_runs[: len(LEVELS)]
    switch_runs = out_runs[len(LEVELS) : len(LEVELS) + len(switches)]
    offset_runs = out_runs[len(LEVELS) + len(switches) :]
    res = dict(zip(LEVELS, runs))
    target_frame = TARGET_BPS / 8 / video.fps
    sizes = sizes_of(res["preset"])
    out = {
        "size": size_stats(sizes, target_frame),
        "i_frames_after_first": sum(r["type"] in ("I", "IDR") for r in res["preset"][1:]),
        "levels": {},
        "_sizes": sizes,
    }
    t_c0 = times_ms(res["c0"]).mean()
    t_preset = times_ms(res["preset"]).mean()
    for lvl in LEVELS:
        t = times_ms(res[lvl])
        out["levels"][lvl] = {
            "time_mean_ms": round(float(t.mean()), 3),
            "time_p50_ms": round(float(np.percentile(t, 50)), 3),
            "time_p95_ms": round(float(np.percentile(t, 95)), 3),
            "time_vs_c0": round(float(t.mean() / t_c0), 3),
            "time_vs_preset": round(float(t.mean() / t_preset), 3),
            "mean_bytes": round(float(sizes_of(res[lvl]).mean()), 1),
            "mean_qp": round(float(np.mean([r["qp"] for r in res[lvl][1:]])), 2),
        }
    switched = list(range(SWITCH_EVERY, frames, SWITCH_EVERY))
    out["single_frame_switch"] = {}
    base = res["c0"]

    def ratio(run: list[dict], key: str) -> float:
        return round(float(np.mean([run[i][key] / base[i][key] for i in switched])), 3)

    def next_frames(run: list[dict]) -> float:
        # Bytes over bytes: the frame after a near-empty static one (screen content) would
        # dominate a mean of ratios.
        nxt = [i + 1 for i in switched if i + 1 < frames]
        total = sum(base[i]["size_bytes"] for i in nxt)
        return round(sum(run[i]["size_bytes"] for i in nxt) / total, 3)

    def minus(run: list[dict], key: str) -> float:
        return round(float(np.mean([run[i][key] - base[i][key] for i in switched])), 2)

    for (lvl, corrected), run in zip(switches, switch_runs):
        out["single_frame_switch"][lvl + ("_corrected" if corrected else "")] = {
            "frames": len(switched),
            "size_scale": scale[int(lvl[1])] if corrected else 1.0,
            "size_vs_c0_mean": ratio(run, "size_bytes"),
            "psnr_minus_c0_mean": minus(run, "psnr_y"),
            "qp_minus_c0_mean": minus(run, "qp"),
            "time_vs_c0_mean": ratio(run, "encode_us"),
            "next_frame_bytes_vs_c0": next_frames(run),
        }
    out["quant_offset"] = {}
    for qp, run in zip(OFFSET_QPS, offset_runs):
        size = ratio(run, "size_bytes")
        out["quant_offset"][str(qp)] = {
            "size_vs_c0_mean": size,
            "psnr_minus_c0_mean": minus(run, "psnr_y"),
            "qp_per_size_halving": round(-qp / float(np.log2(size)), 2),
        }
    return out


def bench_rd(video, frames: int) -> dict:
    """Bytes and PSNR per level at constant quantisers; BD-rate against c0."""
    keys = [(lvl, qp) for lvl in LEVELS for qp in RD_QPS]
    jobs = [{"qp": qp, "psnr": True, "schedule": [step(0, complexity=lvl)]} for lvl, qp in keys]
    # From the middle of the clip (the shipped one opens with a fade from black).
    start = max(0, video.frames // 2 - frames // 2)
    res = dict(zip(keys, encode(video, frames, jobs, start)))
    points: dict = {lvl: {} for lvl in LEVELS}
    for (lvl, qp), recs in res.items():
        p_frames = recs[1:]
        points[lvl][str(qp)] = {
            "mean_bytes": round(float(np.mean([r["size_bytes"] for r in p_frames])), 1),
            "psnr_y": round(float(np.mean([r["psnr_y"] for r in p_frames])), 3),
        }

    def curve(lvl):
        pts = [points[lvl][str(qp)] for qp in RD_QPS]
        return [p["mean_bytes"] for p in pts], [p["psnr_y"] for p in pts]

    ra, pa = curve("c0")
    out = {
        "start_frame": start,
        "points": points,
        "bd_rate_vs_c0": {},
        "size_at_equal_qp_vs_c0": {},
        "psnr_at_equal_qp_minus_c0": {},
    }
    for lvl in LEVELS:
        rb, pb = curve(lvl)
        bd = bd_rate(ra, pa, rb, pb)
        out["bd_rate_vs_c0"][lvl] = None if bd is None else round(bd, 4)
        out["size_at_equal_qp_vs_c0"][lvl] = round(float(np.mean(np.divide(rb, ra))), 4)
        out["psnr_at_equal_qp_minus_c0"][lvl] = round(float(np.mean(np.subtract(pb, pa))), 3)
    # Bytes per pixel of a P frame at QP 26 with the preset's settings (the model encoder's
    # `bytes_per_pixel_at_qp26`).
    out["preset_bytes_per_pixel_qp26"] = round(
        points["preset"]["26"]["mean_bytes"] / (video.width * video.height), 5
    )
    return out


def drop_points(repeats: int = 1) -> list[tuple[int, int]]:
    """DROP_SCHEDULE, repeated ``repeats`` times back to back."""
    return [(f + k * DROP_FRAMES, b) for k in range(repeats) for f, b in DROP_SCHEDULE]


def drop_schedule(fps: float, vbv_s: float | None, repeats: int = 1) -> list[dict]:
    return [step(f, bps, vbv_s=vbv_s, fps=fps) for f, bps in drop_points(repeats)]


def drop_metrics(records: list[dict], fps: float, repeats: int = 1) -> dict:
    sizes = sizes_of(records, skip_first=False)
    target = LOW_BPS / 8 / fps
    drops = []
    points = drop_points(repeats)
    for f, bps in points:
        if bps != LOW_BPS:
            continue
        nxt = [g for g, _ in points if g > f] + [len(sizes)]
        after = sizes[f : nxt[0]]
        drops.append(
            {
                "drop_frame": f,
                "frames_to_1_5x": frames_to_converge(after, target, CONVERGE_TOLERANCE),
                "frames_to_target": frames_below_target(after, target),
                "first_frame_over_target": round(float(after[0] / target), 2),
                "backlog_ms": round(backlog_ms(after, target, LOW_BPS), 1),
            }
        )
    mean = lambda k: round(float(np.mean([d[k] for d in drops])), 2)  # noqa: E731
    return {
        "drops": drops,
        "mean_frames_to_1_5x": mean("frames_to_1_5x"),
        "mean_frames_to_target": mean("frames_to_target"),
        "mean_backlog_ms": mean("backlog_ms"),
        "_around": [
            (sizes[d["drop_frame"] - 10 : d["drop_frame"] + 30] / target).tolist() for d in drops
        ],
    }


def bench_convergence(video) -> dict:
    jobs = [{"schedule": drop_schedule(video.fps, v)} for v in (0.5, None)]
    res = encode(video, DROP_FRAMES, jobs)
    return {key: drop_metrics(r, video.fps) for key, r in zip(VBVS, res)}


def bench_presets(video, frames: int) -> dict:
    jobs = [{"preset": p, "schedule": [step(0, TARGET_BPS, fps=video.fps)]} for p in PRESETS]
    res = dict(zip(PRESETS, encode(video, frames, jobs)))
    ref = times_ms(res["superfast"]).mean()
    return {
        p: {
            "time_mean_ms": round(float(times_ms(r).mean()), 3),
            "time_p95_ms": round(float(np.percentile(times_ms(r), 95)), 3),
            "time_vs_superfast": round(float(times_ms(r).mean() / ref), 3),
        }
        for p, r in res.items()
    }


REFS = (1, 2, 4)


def bench_references(video, frames: int) -> dict:
    """Encode time and quality of x264 keeping 1, 2 or 4 reference frames (superfast, ABR at
    TARGET_BPS): what a scheme pays to be able to re-reference an older frame (Salsify,
    Vidaptive, Co-RTV) instead of sending a keyframe."""
    jobs = [
        {"refs": r, "psnr": True, "schedule": [step(0, TARGET_BPS, fps=video.fps)]} for r in REFS
    ]
    res = dict(zip(REFS, encode(video, frames, jobs)))
    ref = times_ms(res[1]).mean()
    out = {}
    for refs, r in res.items():
        psnr = np.array([x["psnr_y"] for x in r[1:]], dtype=float)
        out[str(refs)] = {
            "time_mean_ms": round(float(times_ms(r).mean()), 3),
            "time_p95_ms": round(float(np.percentile(times_ms(r), 95)), 3),
            "time_vs_1_ref": round(float(times_ms(r).mean() / ref), 3),
            "mean_bytes": round(float(sizes_of(r).mean()), 1),
            "psnr_y_mean_db": round(float(psnr.mean()), 3),
        }
    return out


def bench_model(fps: float = 25.0, repeats: int = 20) -> dict:
    """The model encoder (its default config) on the same target and drop schedule: 30000
    frames for the size distribution, the drop schedule ``repeats`` times (40 drops)."""
    (rec,) = model_encode(fps, 30_000, [{"schedule": [step(0, TARGET_BPS, fps=fps)]}])
    sizes = sizes_of(rec)[300:]
    jobs = [{"schedule": drop_schedule(fps, v, repeats)} for v in (0.5, None)]
    conv = model_encode(fps, DROP_FRAMES * repeats, jobs)
    metrics = {key: drop_metrics(r, fps, repeats) for key, r in zip(VBVS, conv)}
    for m in metrics.values():
        m["drops"] = len(m["drops"])
    return {
        "fps": fps,
        "size": size_stats(sizes, TARGET_BPS / 8 / fps),
        "_sizes": sizes,
        "convergence": metrics,
    }


# --- plots --------------------------------------------------------------------------------


def plot_all(report: dict, ccdfs: dict, around: dict, out_dir: Path) -> list[str]:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    paths = []
    colors = dict(zip(ccdfs, plt.rcParams["axes.prop_cycle"].by_key()["color"]))
    colors["model"] = "black"

    fig, ax = plt.subplots(figsize=(6.4, 4.2))
    clips = [n for n in ccdfs if n != "model"]
    if len(clips) > 1:
        pooled = np.concatenate([ccdfs[n] / ccdfs[n].mean() for n in clips])
        x, y = ccdf(pooled)
        ax.step(x, np.maximum(y, 1e-5), where="post", label="x264 pooled", color="grey",
                linewidth=3, alpha=0.5)  # fmt: skip
    for name, sizes in ccdfs.items():
        x, y = ccdf(sizes)
        ax.step(
            x,
            np.maximum(y, 1e-5),
            where="post",
            label=name,
            color=colors[name],
            linestyle="--" if name == "model" else "-",
        )
    for k in (2, 5):
        ax.axvline(k, color="grey", linewidth=0.8, linestyle=":")
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.set_ylim(1e-3, 1.05)
    ax.set_xlim(0.1, 15)
    ax.set_xlabel("frame size / mean frame size")
    ax.set_ylabel("P(size > x)")
    ax.set_title(
        f"x264 frame sizes, superfast zerolatency, ABR {TARGET_BPS / 1e6:g} Mbps + 0.5 s VBV",
        fontsize=9,
    )
    ax.legend(fontsize=8)
    ax.grid(True, which="both", alpha=0.3)
    paths.append(_save(fig, out_dir / "encoder_ccdf.png"))

    clips = [c for c in report["complexity"]]
    fig, (a1, a3, a2) = plt.subplots(1, 3, figsize=(14, 4))
    width = 0.8 / len(LEVELS)
    xs = np.arange(len(clips))
    for k, lvl in enumerate(LEVELS):
        bd = [report["complexity"][c]["rd"]["bd_rate_vs_c0"][lvl] for c in clips]
        phi = [np.nan if b is None else 1 + b for b in bd]
        a1.bar(xs + k * width, phi, width, label=lvl)
        lv = [report["complexity"][c]["abr"]["levels"][lvl] for c in clips]
        mean = [v["time_mean_ms"] for v in lv]
        p95 = [v["time_p95_ms"] for v in lv]
        a2.bar(xs + k * width, mean, width, label=lvl)
        a2.errorbar(
            xs + k * width,
            mean,
            yerr=[np.zeros(len(mean)), np.subtract(p95, mean)],
            fmt="none",
            ecolor="black",
            elinewidth=0.7,
            capsize=2,
        )
    level_colors = dict(zip(LEVELS, plt.rcParams["axes.prop_cycle"].by_key()["color"]))
    for k, key in enumerate(("c1", "c1_corrected", "c2", "c2_corrected")):
        sw = [report["complexity"][c]["abr"]["single_frame_switch"][key] for c in clips]
        corrected = key.endswith("_corrected")
        label = f"{key[:2]}, planned at {sw[0]['size_scale']:g}x" if corrected else key
        a3.bar(xs + k * width, [v["size_vs_c0_mean"] for v in sw], width, label=label,
               color=level_colors[key[:2]], hatch="//" if corrected else None,
               alpha=0.6 if corrected else 1.0)  # fmt: skip
    a3.axhline(1.0, color="grey", linewidth=0.8)
    a3.set_ylabel("size / same frame at c0")
    a3.set_title(
        f"One frame in {SWITCH_EVERY} switched under ABR {TARGET_BPS / 1e6:g} Mbps", fontsize=9
    )
    a3.legend(fontsize=8)
    for a in (a1, a3, a2):
        a.set_xticks(xs + width * (len(LEVELS) - 1) / 2)
        a.set_xticklabels(clips, fontsize=8, rotation=20)
        a.grid(True, axis="y", alpha=0.3)
    a1.axhline(1.0, color="grey", linewidth=0.8)
    a1.set_ylabel("size at equal PSNR / c0 (BD-rate)")
    a1.set_title("Frame size vs complexity (ACE Fig. 4)", fontsize=9)
    a2.set_ylabel("encode time per frame, ms (bar mean, whisker p95)")
    a2.set_title(
        f"Encode time, 1280 px wide, ABR {TARGET_BPS / 1e6:g} Mbps (ACE Fig. 5)", fontsize=9
    )
    a1.legend(fontsize=8)
    paths.append(_save(fig, out_dir / "encoder_complexity.png"))

    fig, axes = plt.subplots(1, 2, figsize=(10, 4), sharey=True)
    for ax, key, title in zip(
        axes, ("vbv_0.5s", "vbv_1frame"), ("VBV 0.5 s (default)", "VBV one frame (cbr)")
    ):
        for name, series in around[key].items():
            x = np.arange(-10, -10 + len(series))
            ax.plot(
                x,
                np.maximum(series, 1e-2),
                label=name,
                color=colors.get(name, "black"),
                linestyle="--" if name.startswith("model") else "-",
                marker=".",
                markersize=3,
            )
        ax.axhline(1.0, color="grey", linewidth=0.8)
        ax.axhline(1 + CONVERGE_TOLERANCE, color="grey", linewidth=0.8, linestyle=":")
        ax.axvline(-0.5, color="red", linewidth=0.8)
        ax.set_yscale("log")
        ax.set_xlabel("frames after the 30 -> 3 Mbps target drop")
        ax.set_title(title, fontsize=9)
        ax.grid(True, which="both", alpha=0.3)
    axes[0].set_ylabel("frame size / new target frame size")
    axes[0].legend(fontsize=8)
    paths.append(_save(fig, out_dir / "encoder_convergence.png"))
    return paths


def _save(fig, path: Path) -> str:
    fig.tight_layout()
    fig.savefig(path, dpi=90)
    import matplotlib.pyplot as plt

    plt.close(fig)
    return str(path)


# --- main ---------------------------------------------------------------------------------


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", default="bench/out/encoder.json")
    parser.add_argument(
        "--videos-dir",
        default=str(ROOT.parent / "shared" / "videos"),
        help="directory of the extra clips (skipped if missing)",
    )
    parser.add_argument("--cache", default=os.path.join("results", ".video-cache"))
    parser.add_argument(
        "--frames",
        type=int,
        default=300,
        help="frames per clip for the size distribution and encode times",
    )
    parser.add_argument(
        "--rd-frames",
        type=int,
        default=60,
        help="frames per clip and quantiser for the size-vs-complexity curves",
    )
    parser.add_argument(
        "--quick",
        action="store_true",
        help="shipped clip only, few frames (a smoke test, not a measurement)",
    )
    args = parser.parse_args(argv)
    if args.quick:
        args.frames, args.rd_frames = 40, 12
    started = time.perf_counter()
    load_start = os.getloadavg()

    dirs = {"data": ROOT / "data" / "videos", "shared": Path(args.videos_dir)}
    clips, skipped = [], []
    for name, file, where in CLIPS:
        path = dirs[where] / file
        if args.quick and where != "data":
            continue
        if not path.is_file():
            skipped.append({"clip": name, "file": str(path), "why": "not found"})
            print(f"encoder bench: skipping {name}: {path} not found", file=sys.stderr)
            continue
        clips.append((name, path))

    report: dict = {
        "schema_version": 1,
        "git_sha": git("rev-parse", "HEAD"),
        "git_dirty": git("status", "--porcelain") not in ("", "unknown"),
        "host": {
            "machine": platform.machine(),
            "cpu": cpu_model(),
            "cpus": os.cpu_count(),
            "python": sys.version.split()[0],
            "loadavg_1min_at_start": round(load_start[0], 2),
        },
        "settings": {
            "width": WIDTH,
            "encoder": "libx264 superfast, tune zerolatency, 1 thread, 1 reference, no "
            "B-frames, endless GOP (scene cuts allowed)",
            "target_bps": TARGET_BPS,
            "vbv": "max rate = target, buffer 0.5 s",
            "frames": args.frames,
            "rd_frames": args.rd_frames,
            "rd_qps": RD_QPS,
            "drop_schedule": [{"frame": f, "bitrate_bps": b} for f, b in DROP_SCHEDULE],
            "converge_tolerance": CONVERGE_TOLERANCE,
            "quick": args.quick,
        },
        "clips": [],
        "skipped": skipped,
        "size_distribution": {},
        "complexity": {},
        "convergence": {},
        "references": {},
    }
    ccdfs: dict = {}
    around: dict = {"vbv_0.5s": {}, "vbv_1frame": {}}
    for name, path in clips:
        t0 = time.perf_counter()
        video = prepare(path, args.cache, width=WIDTH)
        report["clips"].append(
            {
                "clip": name,
                "source": str(path.name),
                "width": video.width,
                "height": video.height,
                "fps": video.fps,
                "frames_in_clip": video.frames,
            }
        )
        abr = bench_abr(video, args.frames)
        ccdfs[name] = abr.pop("_sizes")
        report["size_distribution"][name] = {
            **abr["size"],
            "i_frames_after_first": abr["i_frames_after_first"],
        }
        rd = bench_rd(video, args.rd_frames)
        report["complexity"][name] = {
            "abr": {
                "levels": abr["levels"],
                "single_frame_switch": abr["single_frame_switch"],
                "quant_offset": abr["quant_offset"],
            },
            "rd": rd,
        }
        conv = bench_convergence(video)
        for key in around:
            around[key][name] = conv[key].pop("_around")[0]
        report["convergence"][name] = conv
        report["references"][name] = bench_references(video, min(args.frames, 150))
        print(f"encoder bench: {name} done in {time.perf_counter() - t0:.1f} s", file=sys.stderr)

    if clips:
        shipped = next((c for c in clips if c[0] == "animation"), clips[0])
        video = prepare(shipped[1], args.cache, width=WIDTH)
        report["presets"] = {
            "clip": shipped[0],
            "per_preset": bench_presets(video, min(args.frames, 150)),
        }

    model = bench_model()
    ccdfs["model"] = model.pop("_sizes")
    for key in around:
        # The model's mean trajectory over its 40 drops (x264: each clip's first drop).
        series = model["convergence"][key].pop("_around")
        around[key][f"model (mean of {len(series)} drops)"] = np.mean(series, axis=0)
    report["model"] = model

    if clips:
        pooled = np.concatenate([s / s.mean() for n, s in ccdfs.items() if n != "model"])
        report["size_distribution"]["pooled (size / clip mean)"] = size_stats(pooled, 1.0)
        report["calibration"] = calibration(report)
    report["wall_s"] = round(time.perf_counter() - started, 1)
    report["host"]["loadavg_1min_at_end"] = round(os.getloadavg()[0], 2)

    out = Path(args.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    report["plots"] = plot_all(report, ccdfs, around, out.parent) if clips else []
    out.write_text(json.dumps(report, indent=2) + "\n")
    print(json.dumps({k: report[k] for k in ("git_sha", "wall_s", "plots", "skipped")}, indent=2))
    if "calibration" in report:
        print(json.dumps(report["calibration"], indent=2))
    return 0


def calibration(report: dict) -> dict:
    """The numbers the simulator's models are fitted to (means over the clips)."""
    cx = report["complexity"]
    clips = list(cx)

    def mean_over(f):
        vals = [f(c) for c in clips]
        vals = [v for v in vals if v is not None]
        return round(float(np.mean(vals)), 3) if vals else None

    pixels = {c["clip"]: c["width"] * c["height"] for c in report["clips"]}
    out = {
        # Per 1280x720 frame: each clip's time scaled by its pixel count.
        "superfast_ms_per_720p_frame": mean_over(
            lambda c: cx[c]["abr"]["levels"]["preset"]["time_mean_ms"] * 1280 * 720 / pixels[c]
        ),
        "time_vs_preset": {
            lvl: mean_over(lambda c, lvl=lvl: cx[c]["abr"]["levels"][lvl]["time_vs_preset"])
            for lvl in LEVELS
        },
        "phi_bd_rate_vs_c0": {
            lvl: mean_over(
                lambda c, lvl=lvl: (lambda b: None if b is None else 1 + b)(
                    cx[c]["rd"]["bd_rate_vs_c0"][lvl]
                )
            )
            for lvl in LEVELS
        },
        "single_frame_switch": {
            key: {
                k: mean_over(lambda c, key=key, k=k: cx[c]["abr"]["single_frame_switch"][key][k])
                for k in (
                    "size_vs_c0_mean",
                    "psnr_minus_c0_mean",
                    "time_vs_c0_mean",
                    "next_frame_bytes_vs_c0",
                )
            }
            for key in ("c1", "c1_corrected", "c2", "c2_corrected")
        },
        "quant_offset_qp_per_size_halving": mean_over(
            lambda c: float(
                np.mean([v["qp_per_size_halving"] for v in cx[c]["abr"]["quant_offset"].values()])
            )
        ),
        "time_vs_c0_whole_run": {
            lvl: mean_over(lambda c, lvl=lvl: cx[c]["abr"]["levels"][lvl]["time_vs_c0"])
            for lvl in LEVELS
        },
        "preset_bytes_per_pixel_qp26_median": round(
            float(np.median([cx[c]["rd"]["preset_bytes_per_pixel_qp26"] for c in clips])), 5
        ),
        "frames_to_1_5x": {
            k: mean_over(lambda c, k=k: report["convergence"][c][k]["mean_frames_to_1_5x"])
            for k in ("vbv_0.5s", "vbv_1frame")
        },
    }
    if "presets" in report:
        sf = out["superfast_ms_per_720p_frame"]
        out["modeled_ms_720p"] = {
            p: round(sf * v["time_vs_superfast"], 2)
            for p, v in report["presets"]["per_preset"].items()
        }
    return out


if __name__ == "__main__":
    sys.exit(main())
