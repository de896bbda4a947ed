"""Quality as the viewer saw it.

For every capture slot ``i`` of the session (source frame ``i``), the viewer saw a frame
encoding source frame ``i`` if one was displayed, otherwise the most recent displayed frame of
an earlier slot (a freeze repeats it; before the first displayed frame the screen is black).
Skipped slots are slots too. Frames are matched to slots by their ``source_index``, not their
frame id (a source frame can be encoded twice, a skipped one not at all). The encoder's whole
stream (every encode, in frame-id order) is decoded with ffmpeg and the displayed frames are
picked from it by frame id; the viewer's sequence is rebuilt from them frame by frame
(streamed: one decoded frame is held at a time), and scored against the source with VMAF
(libvmaf's default model), SSIM and PSNR in one ffmpeg pass.

Why the whole stream and not the delivered frames' (``delivered.264``, still written for
players): a displayed frame is one whose references were all displayed, so its picture is the
encoder's, but ffmpeg's H.264 decoder does not output every frame of a delivered stream with
gaps. After a gap in ``frame_num`` that crosses its wrap (x264 codes 32 values with 16
references) it decodes the frames but, with the picture order counted from ``frame_num``
(x264's ``pic_order_cnt_type`` 2 without B frames), it does not carry the wrap into the
order count, takes the next frames for late ones and drops them until ``frame_num`` passes
its value before the gap (libavcodec ``h264_slice.c``, the frame-num gap loop). Schemes that
re-reference instead of coding a keyframe (``co-rtv``, ``co-rtv-nofb``) make such gaps: one
``co-rtv-nofb`` run lost 18 of 1033 displayed frames this way, which ended its scoring.

Summary keys: ``vmaf_mean``, ``vmaf_p5``, ``ssim_mean``, ``psnr_mean`` over all scored slots and
``vmaf_delivered_mean`` over the slots whose own frame was displayed; ``ssim_db_mean``, the
mean over scored slots of SSIM in decibels as Salsify reports it (``-10 log10(1 - SSIM)``,
Vidaptive §5.2's "SSIM (dB)"; capped at 100 dB for identical frames).
``mode="fast"`` scores every ``fast_step``-th slot only.
"""

from __future__ import annotations

import json
import math
import os
import signal
import subprocess
import sys
import tempfile
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from . import _core
from .errors import SluiceError
from .video import RawVideo, ffmpeg_exe

MODES = ("none", "fast", "full")
FAST_STEP = 5
# Identical frames have infinite PSNR; it is capped so means stay finite (and JSON valid).
PSNR_CAP_DB = 100.0
# Likewise SSIM in dB (SSIM = 1).
SSIM_DB_CAP = 100.0


def ssim_db(ssim: float) -> float:
    """SSIM in decibels, Salsify's ``-10 log10(1 - SSIM)`` (capped at ``SSIM_DB_CAP``)."""
    loss = 1.0 - ssim
    if loss <= 10 ** (-SSIM_DB_CAP / 10):
        return SSIM_DB_CAP
    return -10.0 * math.log10(loss)


@dataclass
class FrameQuality:
    slot: int
    shown_frame: int | None
    vmaf: float
    ssim: float
    psnr: float


def _read_exact(stream, n: int) -> bytes | None:
    buf = bytearray()
    while len(buf) < n:
        chunk = stream.read(n - len(buf))
        if not chunk:
            return None if not buf else bytes(buf)
        buf += chunk
    return bytes(buf)


def _picked_frames(bitstream: Path, frame_ids: Sequence[int], video: RawVideo) -> Iterator[bytes]:
    """The pictures of ``frame_ids`` (ascending), from the encoder's whole stream (picture
    ``k`` is frame id ``k``)."""
    if any(b <= a for a, b in zip(frame_ids, frame_ids[1:])):
        raise ValueError("frame ids must be ascending")
    wanted = iter(frame_ids)
    want = next(wanted, None)
    for k, frame in enumerate(_decoded_frames(bitstream, video)):
        if want is None:
            return
        if k == want:
            yield frame
            want = next(wanted, None)
    if want is not None:
        raise SluiceError(f"the encoded stream {bitstream} has no picture for displayed frame "
                          f"{want}")  # fmt: skip


def _decoded_frames(bitstream: Path, video: RawVideo) -> Iterator[bytes]:
    """Frames of an Annex-B H.264 stream decoded to yuv420p at the video's size."""
    cmd = [ffmpeg_exe(), "-v", "error", "-nostdin", "-f", "h264", "-i", str(bitstream),
           "-f", "rawvideo", "-pix_fmt", "yuv420p", "-s", f"{video.width}x{video.height}",
           "-"]  # fmt: skip
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    assert proc.stdout is not None and proc.stderr is not None
    read_all = False
    try:
        while True:
            frame = _read_exact(proc.stdout, video.frame_bytes)
            if frame is None or len(frame) < video.frame_bytes:
                break
            yield frame
        read_all = True
    finally:
        if not read_all:  # the caller has the frames it wanted (or failed): stop ffmpeg
            proc.kill()
        proc.stdout.close()
        err = proc.stderr.read().decode(errors="replace")
        proc.stderr.close()
        code = proc.wait()
    if code != 0:
        raise SluiceError(f"ffmpeg could not decode {bitstream}: {err.strip()}")


def _black(video: RawVideo) -> bytes:
    y = video.width * video.height
    return bytes([16]) * y + bytes([128]) * (y // 2)


def displayed_frames(frames: Sequence[dict]) -> list[tuple[int, int]]:
    """(source index, frame id) of the displayed frames, in display (frame id) order."""
    shown = [f for f in frames if f.get("displayed_us") is not None]
    shown.sort(key=lambda f: f["frame_id"])
    return [(int(f.get("source_index", f["frame_id"])), int(f["frame_id"])) for f in shown]


def slot_count(frames: Sequence[dict], skips: Sequence[dict] = ()) -> int:
    """Capture slots of a run: one past the highest source index encoded or skipped."""
    idx = [int(f.get("source_index", f["frame_id"])) for f in frames]
    idx += [int(s["source_index"]) for s in skips]
    return max(idx) + 1 if idx else 0


def viewer_sequence(
    displayed: Sequence[tuple[int, int]],
    slots: int,
    delivered_frames: Iterator[bytes],
    video: RawVideo,
) -> Iterator[tuple[int, int | None, bytes]]:
    """Yields (slot, shown slot, frame bytes) for each slot: its own frame if one was displayed,
    else the most recent displayed frame of an earlier slot. ``displayed`` are (source index,
    frame id) pairs in display order, the order of ``delivered_frames`` (their pictures)."""
    current: bytes | None = None
    shown: int | None = None
    k = 0
    for slot in range(slots):
        while k < len(displayed) and displayed[k][0] <= slot:
            frame = next(delivered_frames, None)
            if frame is None:
                raise SluiceError(
                    f"delivered stream ended after {k} frames; {len(displayed)} were displayed"
                )
            current, shown = frame, displayed[k][0]
            k += 1
        yield slot, shown, current if current is not None else _black(video)


def score(
    video: RawVideo,
    displayed: Sequence[tuple[int, int]],
    slots: int,
    encoded_stream: Path,
    mode: str = "full",
    fast_step: int = FAST_STEP,
    progress: bool = False,
) -> tuple[list[FrameQuality], dict[str, float | None]]:
    """Scores the viewer's sequence against the source. ``displayed``: (source index, frame
    id) of the displayed frames in frame-id order; ``encoded_stream``: the encoder's whole
    Annex-B stream, every encode in frame-id order. Returns per-slot scores and the summary.
    ``progress``: a bar on stderr over the scored slots, once as the sequences are written
    and once as ffmpeg scores them."""
    if mode not in MODES:
        raise SluiceError(f"quality mode must be one of {', '.join(MODES)}, got {mode!r}")
    if mode == "none" or slots <= 0:
        return [], {}
    step = fast_step if mode == "fast" else 1
    chosen = list(range(0, slots, step))
    with tempfile.TemporaryDirectory(prefix="sluice-quality-") as tmp, \
            _bar(len(chosen), progress) as bar:  # fmt: skip
        tmpd = Path(tmp)
        dist_path = tmpd / "viewer.yuv"
        ref_path = tmpd / "reference.yuv"
        vmaf_log = tmpd / "vmaf.json"
        ssim_log = tmpd / "ssim.log"
        psnr_log = tmpd / "psnr.log"
        shown_by_slot: dict[int, int | None] = {}
        # Write the (possibly subsampled) viewer and reference sequences as raw files. They
        # hold only the scored slots; with mode="fast" that is a fifth of the session.
        ids = [frame_id for _, frame_id in displayed]
        frames = _picked_frames(encoded_stream, ids, video) if displayed else iter(())
        wanted = set(chosen)
        with dist_path.open("wb") as dist, ref_path.open("wb") as ref, \
                open(video.path, "rb") as src:  # fmt: skip
            for slot, shown, data in viewer_sequence(displayed, slots, frames, video):
                if slot not in wanted:
                    continue
                shown_by_slot[slot] = shown
                dist.write(data)
                src.seek(_core.clip_frame(slot, video.frames) * video.frame_bytes)
                ref.write(src.read(video.frame_bytes))
                bar.update(1)
        raw = ["-f", "rawvideo", "-pix_fmt", "yuv420p", "-s", f"{video.width}x{video.height}",
               "-r", f"{video.fps:g}"]  # fmt: skip
        graph = (
            "[1:v]split=3[r1][r2][r3];"
            f"[0:v][r1]libvmaf=log_fmt=json:log_path={vmaf_log}:n_threads=2[d1];"
            f"[d1][r2]ssim=stats_file={ssim_log}[d2];"
            f"[d2][r3]psnr=stats_file={psnr_log}"
        )
        cmd = [ffmpeg_exe(), "-v", "error", "-nostdin", "-nostats", "-progress", "pipe:1",
               *raw, "-i", str(dist_path), *raw, "-i", str(ref_path), "-lavfi", graph,
               "-f", "null", "-"]  # fmt: skip
        bar.reset()  # the second phase, over the same slots
        bar.set_description("quality: scoring")
        returncode, stderr = _run_with_progress(cmd, bar, len(chosen))
        if returncode != 0:
            raise SluiceError(
                f"ffmpeg quality scoring of {video.width}x{video.height} frames failed: "
                + ffmpeg_failure(returncode, stderr)
            )
        vmaf = [f["metrics"]["vmaf"] for f in json.loads(vmaf_log.read_text())["frames"]]
        ssim = _stats(ssim_log, "All:")
        psnr = _stats(psnr_log, "psnr_avg:")
    n = min(len(chosen), len(vmaf), len(ssim), len(psnr))
    per_frame = [
        FrameQuality(
            chosen[i], shown_by_slot.get(chosen[i]), vmaf[i], ssim[i], min(psnr[i], PSNR_CAP_DB)
        )
        for i in range(n)
    ]
    return per_frame, summarize(per_frame)


def _bar(total: int, show: bool) -> Any:
    """A tqdm bar on stderr over the scored slots (a no-op one unless ``show``), first
    for decoding them."""
    from tqdm import tqdm

    return tqdm(total=total, desc="quality: decoding", unit="frame", leave=False,
                file=sys.stderr, disable=not show or total == 0)  # fmt: skip


def _run_with_progress(cmd: list[str], bar: Any, frames: int) -> tuple[int, str]:
    """Runs ffmpeg with ``-progress pipe:1``, moving ``bar`` by the frames it reports (at
    most ``frames``); returns its exit status and stderr."""
    with tempfile.TemporaryFile() as err, \
            subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=err) as proc:  # fmt: skip
        assert proc.stdout is not None
        done = 0
        try:
            for line in proc.stdout:
                if line.startswith(b"frame="):
                    try:
                        n = min(int(line[6:]), frames)
                    except ValueError:
                        continue
                    bar.update(max(n - done, 0))
                    done = max(done, n)
        except BaseException:  # Ctrl-C, SIGTERM: ffmpeg goes too, as with subprocess.run
            proc.kill()
            raise
        returncode = proc.wait()
        err.seek(0)
        return returncode, err.read().decode("utf-8", "replace")


def ffmpeg_failure(returncode: int, stderr: str) -> str:
    """What an ffmpeg that failed said, in one line: its last message, and the signal that
    killed it if one did (libvmaf crashes on very small frames without a word)."""
    lines = [ln.strip() for ln in (stderr or "").splitlines() if ln.strip()]
    said = lines[-1][-300:] if lines else ""
    if returncode < 0:
        try:
            name = signal.Signals(-returncode).name
        except ValueError:
            name = f"signal {-returncode}"
        return f"ffmpeg was killed by {name}" + (f" ({said})" if said else " (no message)")
    return said or f"ffmpeg exited with status {returncode} (no message)"


def _stats(path: Path, key: str) -> list[float]:
    values = []
    for line in path.read_text().splitlines():
        for token in line.split():
            if token.startswith(key):
                text = token[len(key) :]
                values.append(math.inf if text == "inf" else float(text))
    return values


def _percentile(values: list[float], q: float) -> float:
    s = sorted(values)
    pos = q / 100 * (len(s) - 1)
    lo, hi = math.floor(pos), math.ceil(pos)
    return s[lo] + (s[hi] - s[lo]) * (pos - lo)


def summarize(per_frame: Sequence[FrameQuality]) -> dict[str, float | None]:
    if not per_frame:
        return {}
    vmaf = [f.vmaf for f in per_frame]
    delivered = [f.vmaf for f in per_frame if f.shown_frame == f.slot]
    finite_psnr = [min(f.psnr, PSNR_CAP_DB) for f in per_frame]
    return {
        "vmaf_mean": sum(vmaf) / len(vmaf),
        "vmaf_p5": _percentile(vmaf, 5),
        "ssim_mean": sum(f.ssim for f in per_frame) / len(per_frame),
        "psnr_mean": sum(finite_psnr) / len(finite_psnr),
        "ssim_db_mean": sum(ssim_db(f.ssim) for f in per_frame) / len(per_frame),
        "vmaf_delivered_mean": sum(delivered) / len(delivered) if delivered else None,
        "quality_frames_scored": len(per_frame),
    }



def _whole_stream(index: Sequence[tuple[int, ...]], size: int, displayed: Sequence[int]) -> bool:
    """Whether ``displayed`` is every encode in order and the index covers the stream's
    ``size`` bytes end to end, so that the delivered stream is the whole stream."""
    if list(displayed) != list(range(len(index))):
        return False
    end = 0
    for offset, length in index:
        if offset != end:
            return False
        end = offset + length
    return end == size


def delivered_stream(bitstream: Path, displayed: Sequence[int], out: Path) -> Path:
    """Writes the displayed frames' access units, in order, from an encoder's Annex-B stream
    and its index (``<bitstream>.idx``: one ``offset length`` line per encode, line ``k`` for
    frame id ``k``)."""
    index_path = Path(f"{bitstream}.idx")
    try:
        index = [tuple(map(int, line.split())) for line in index_path.read_text().splitlines()]
        data = bitstream.read_bytes()
    except (OSError, ValueError) as e:
        raise SluiceError(f"cannot read the encoded stream {bitstream}: {e}") from None
    if _whole_stream(index, len(data), displayed):
        # Every encode displayed, in order: the delivered stream is the encoder's, byte for
        # byte. A hard link keeps one copy on disk (an x264 cell at 20 Mbps writes 150 MB).
        try:
            os.link(bitstream, out)
            return out
        except OSError:
            pass  # a file system without hard links: write the copy
    with out.open("wb") as f:
        for frame_id in displayed:
            if frame_id >= len(index):
                raise SluiceError(f"{index_path}: no entry for displayed frame {frame_id}")
            offset, length = index[frame_id]
            f.write(data[offset : offset + length])
    return out
