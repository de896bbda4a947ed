"""Each clip's maximum useful video rate for Vidaptive's dummy cap and target clamp.

Vidaptive turns dummy packets off "once the video reaches its maximum achievable bitrate
(12 Mbps in our experiments)", the peak their 1080p clips reached (§3.1, footnote 4). x264
under ABR follows any target, so Sluice takes the rate above which more bits stop buying
quality: each clip is encoded by libx264 as Sluice drives it (superfast, zerolatency, ABR
with VBV max rate = target and a 0.5 s buffer, one reference), at the plan's size and 30
fps, at a ladder of targets; VMAF (libvmaf's default model) is measured against the source.
The cap is the lowest rung whose VMAF is within ``--within`` (1) point of the top rung's.

    python experiments/vidaptive_clip_rates.py --out docs/results/vidaptive-clip-rates.json

prints the ladder and writes it with the chosen caps (the plans' ``[[clip]] set`` values).
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
from pathlib import Path

import imageio_ffmpeg

HERE = Path(__file__).resolve().parent
SHARED = HERE.parent.parent / "shared" / "videos"
#: (label, file, width): the clips of experiments/vidaptive*.toml at their plan sizes.
CLIPS = [
    ("driving-1080p", SHARED / "driving_suburban-road_1920x1080_25fps_2s.mp4", 1920),
    ("handheld-720p", SHARED / "handheld_flower_1280x720_30fps_10s.mp4", 1280),
    ("talking-head-720p", SHARED / "talking-head_call_1280x720_24fps_10s.mp4", 1280),
]
LADDER_MBPS = (1, 1.5, 2, 3, 4, 6, 8, 12, 16, 24)
FPS = 30
FRAMES = 90


def vmaf_at(ff: str, src: Path, width: int, mbps: float, tmp: Path) -> float:
    ref = tmp / "ref.y4m"
    if not ref.exists():
        subprocess.run([ff, "-v", "error", "-stream_loop", "-1", "-i", str(src), "-vf",
                        f"scale={width}:-2,fps={FPS}", "-pix_fmt", "yuv420p", "-frames:v",
                        str(FRAMES), str(ref)], check=True)  # fmt: skip
    enc = tmp / "enc.264"
    kbps = int(mbps * 1000)
    subprocess.run([ff, "-v", "error", "-y", "-i", str(ref), "-c:v", "libx264",
                    "-preset", "superfast", "-tune", "zerolatency", "-b:v", f"{kbps}k",
                    "-maxrate", f"{kbps}k", "-bufsize", f"{kbps // 2}k", "-refs", "1",
                    "-bf", "0", "-g", "100000", str(enc)], check=True)  # fmt: skip
    log = tmp / "vmaf.json"
    subprocess.run([ff, "-v", "error", "-i", str(enc), "-i", str(ref), "-lavfi",
                    f"libvmaf=log_fmt=json:log_path={log}:n_threads=2", "-f", "null", "-"],
                   check=True)  # fmt: skip
    return float(json.loads(log.read_text())["pooled_metrics"]["vmaf"]["mean"])


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--out", type=Path, default=None, help="write the ladder and caps (JSON)")
    ap.add_argument("--within", type=float, default=1.0,
                    help="VMAF points below the top rung (default 1)")  # fmt: skip
    args = ap.parse_args(argv)
    ff = imageio_ffmpeg.get_ffmpeg_exe()
    out = {"rule": f"lowest rung within {args.within:g} VMAF of the top rung", "fps": FPS,
           "frames": FRAMES, "ladder_mbps": list(LADDER_MBPS), "clips": {}}  # fmt: skip
    for label, path, width in CLIPS:
        if not path.is_file():
            print(f"{label}: {path} missing, skipped", file=sys.stderr)
            continue
        with tempfile.TemporaryDirectory(prefix="sluice-rates-") as t:
            scores = [vmaf_at(ff, path, width, r, Path(t)) for r in LADDER_MBPS]
        top = scores[-1]
        cap = next(r for r, s in zip(LADDER_MBPS, scores) if s >= top - args.within)
        out["clips"][label] = {"file": path.name, "width": width,
                               "vmaf": [round(s, 2) for s in scores], "cap_mbps": cap}  # fmt: skip
        ladder = ", ".join(f"{r:g}: {s:.1f}" for r, s in zip(LADDER_MBPS, scores))
        print(f"{label}: VMAF by Mbps {ladder}; cap {cap:g} Mbps")
    if args.out:
        args.out.parent.mkdir(parents=True, exist_ok=True)
        args.out.write_text(json.dumps(out, indent=2) + "\n", encoding="utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main())
