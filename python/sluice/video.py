"""Video input: any file ffmpeg reads, decoded once to raw I420 (yuv420p) frames.

The encoder and the quality metrics read the same raw file, so the reference frames VMAF sees
are exactly the frames the encoder got. A run longer than the clip plays it back and forth
(0, 1, ..., n-1, n-2, ..., 1, 0, 1, ...: ``_core.clip_frame``), so nothing longer than the clip
is ever stored and the loop has no cut for the encoder to answer with a keyframe.

ffmpeg comes from the ``imageio-ffmpeg`` package (a static build with libvmaf) or, failing
that, from ``PATH``.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import shutil
import subprocess
from dataclasses import asdict, dataclass
from pathlib import Path

from .errors import SluiceError, regular_file

#: x264's presets (an unknown one is refused before x264 sees it).
X264_PRESETS = ("ultrafast", "superfast", "veryfast", "faster", "fast", "medium", "slow",
                "slower", "veryslow", "placebo")  # fmt: skip


def ffmpeg_exe() -> str:
    """Path of an ffmpeg binary; imageio-ffmpeg's bundled one first."""
    try:
        import imageio_ffmpeg

        return imageio_ffmpeg.get_ffmpeg_exe()
    except (ImportError, RuntimeError):
        pass
    exe = shutil.which("ffmpeg")
    if exe is None:
        raise SluiceError(
            "ffmpeg not found: install the Python package imageio-ffmpeg "
            "(pip install imageio-ffmpeg) or a system ffmpeg"
        )
    return exe


@dataclass(frozen=True)
class RawVideo:
    """A raw yuv420p file of ``frames`` frames of ``width`` x ``height``."""

    path: str
    width: int
    height: int
    fps: float
    frames: int
    source: str

    @property
    def frame_bytes(self) -> int:
        return self.width * self.height * 3 // 2

    def to_json(self) -> dict:
        return asdict(self)


def _probe(path: Path) -> tuple[int, int, float]:
    """(width, height, fps) of the first video stream, from one ffmpeg pass that copies its
    packets (no decoding): the size and rate from ffmpeg's stream line, and the rate the
    packets' own timestamps give (:func:`_average_fps`) where the line's is more than 5 %
    off it, as for a variable-rate WebM, whose line says the container's default (24)."""
    proc = subprocess.run(
        [ffmpeg_exe(), "-hide_banner", "-nostdin", "-i", str(path), "-map", "0:v:0",
         "-c", "copy", "-f", "framecrc", "-"],
        capture_output=True, text=True, check=False,
    )  # fmt: skip
    for line in proc.stderr.splitlines():
        if " Video: " not in line:
            continue
        width = height = 0
        fps = 0.0
        for part in line.split(","):
            tokens = part.strip().split()
            if tokens and "x" in tokens[0]:
                w, _, h = tokens[0].partition("x")
                if w.isdigit() and h.isdigit():
                    width, height = int(w), int(h)
            if len(tokens) == 2 and tokens[1] in ("fps", "tbr") and fps == 0.0:
                try:
                    fps = float(tokens[0])
                except ValueError:
                    pass
        if width and height:
            still = "attached pic" in line or proc.returncode != 0
            avg = None if still else _average_fps(proc.stdout)
            if avg and (not fps or abs(avg - fps) > 0.05 * fps):
                fps = avg
            return width, height, fps or 30.0
    raise SluiceError(f"{path}: not a video file ffmpeg can read")


def _average_fps(framecrc: str) -> float | None:
    """The video stream's frames over its own span, from ffmpeg's ``framecrc`` of its
    packets: frames shown from time 0 on (a clip cut without re-encoding keeps hidden
    packets before 0, at negative times), from the first one's start to the last one's end.
    To 0.01, or the whole number within 1 % of it; None if unknown (a stream without
    timestamps)."""
    tb = re.search(r"^#tb 0: (\d+)/(\d+)$", framecrc, re.M)
    if not tb or int(tb[1]) <= 0:
        return None
    starts, ends = [], []
    for line in framecrc.splitlines():
        f = line.split(",")
        if len(f) < 4 or f[0].strip() != "0":
            continue
        try:
            pts, dur = int(f[2]), int(f[3])
        except ValueError:
            return None
        if pts >= 0:
            starts.append(pts)
            ends.append(pts + max(dur, 0))
    if len(starts) < 2:
        return None
    span_s = (max(ends) - min(starts)) * int(tb[1]) / int(tb[2])
    if span_s <= 0:
        return None
    avg = len(starts) / span_s
    whole = round(avg)
    return float(whole) if whole and abs(avg - whole) <= 0.01 * whole else round(avg, 2)


#: The largest side of a prepared clip (the --width option's limit too).
MAX_SIDE = 16384


def prepare(
    path: str | os.PathLike,
    cache_dir: str | os.PathLike,
    width: int | None = None,
    height: int | None = None,
    fps: float | None = None,
    max_frames: int | None = None,
) -> RawVideo:
    """Decodes ``path`` to raw yuv420p (scaled and frame-rate converted as asked), cached by
    content and arguments in ``cache_dir``. Raises :class:`SluiceError` if the file is missing
    or unreadable."""
    src = regular_file(path, "video file")
    src_w, src_h, src_fps = _probe(src)
    w = width or src_w
    h = height or (src_h * w // src_w if width else src_h)
    w -= w % 2
    h -= h % 2
    if w <= 0 or h <= 0:
        raise SluiceError(f"{src}: invalid output size {w}x{h}")
    if max(w, h) > MAX_SIDE:  # what --width takes; the height follows the clip's shape
        raise SluiceError(f"{src}: scaled to {w}x{h}, a side above {MAX_SIDE} pixels (the clip "
                          f"is {src_w}x{src_h}): give a smaller --width")  # fmt: skip
    rate = fps or src_fps
    if not rate > 0:
        raise SluiceError(f"{src}: invalid frame rate {rate}")

    digest = hashlib.sha256()
    with src.open("rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            digest.update(block)
    key = json.dumps([digest.hexdigest(), w, h, rate, max_frames], sort_keys=True)
    name = hashlib.sha256(key.encode()).hexdigest()[:16]
    cache = Path(cache_dir)
    cache.mkdir(parents=True, exist_ok=True)
    # The clip's name only helps a reader of the cache (the hash keys it): bounded, so that a
    # long clip name still makes a file name the file system takes (issue 30).
    raw = cache / f"{src.stem[:64]}-{w}x{h}-{rate:g}fps-{name}.yuv"
    meta = raw.with_suffix(".json")
    if raw.is_file() and meta.is_file():
        return RawVideo(**json.loads(meta.read_text()))

    cmd = [ffmpeg_exe(), "-v", "error", "-nostdin", "-i", str(src), "-an",
           "-vf", f"fps={rate:g},scale={w}:{h}:flags=bicubic", "-pix_fmt", "yuv420p"]  # fmt: skip
    if max_frames:
        cmd += ["-frames:v", str(max_frames)]
    # Per-process temporary, renamed atomically: parallel runs may prepare the same clip.
    tmp = raw.with_suffix(f".{os.getpid()}.part")
    cmd += ["-f", "rawvideo", "-y", str(tmp)]
    proc = subprocess.run(cmd, capture_output=True, text=True, check=False)
    if proc.returncode != 0:
        tmp.unlink(missing_ok=True)
        msg = proc.stderr.strip().splitlines()
        raise SluiceError(f"{src}: ffmpeg could not decode it ({msg[-1] if msg else 'no output'})")
    size = tmp.stat().st_size
    frame_bytes = w * h * 3 // 2
    if size < frame_bytes:
        tmp.unlink(missing_ok=True)
        raise SluiceError(f"{src}: no video frames decoded")
    tmp.replace(raw)
    video = RawVideo(str(raw), w, h, rate, size // frame_bytes, str(src))
    meta_tmp = meta.with_suffix(f".{os.getpid()}.part")
    meta_tmp.write_text(json.dumps(video.to_json()))
    meta_tmp.replace(meta)
    return video
