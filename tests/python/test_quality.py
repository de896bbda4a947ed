"""The quality pipeline: the viewer's sequence (freezes repeat the last displayed frame)
scored against the source with VMAF, SSIM and PSNR."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest
from sluice import quality, video
from sluice.errors import SluiceError


def _clip(tmp: Path, frames: int = 40) -> Path:
    path = tmp / "moving.mp4"
    subprocess.run(
        [video.ffmpeg_exe(), "-v", "error", "-f", "lavfi",
         "-i", f"testsrc2=size=320x240:rate=20:duration={frames / 20}",
         "-pix_fmt", "yuv420p", "-c:v", "libx264", "-qp", "0", "-y", str(path)],
        check=True,
    )  # fmt: skip
    return path


def _all_intra_frames(raw: video.RawVideo, tmp: Path) -> list[bytes]:
    """Each source frame encoded as an IDR frame (so any subset decodes), one access unit per
    list entry, split at the access-unit delimiters."""
    stream = tmp / "intra.264"
    subprocess.run(
        [video.ffmpeg_exe(), "-v", "error", "-f", "rawvideo", "-pix_fmt", "yuv420p",
         "-s", f"{raw.width}x{raw.height}", "-r", "20", "-i", raw.path,
         "-c:v", "libx264", "-preset", "ultrafast", "-x264-params", "keyint=1:aud=1",
         "-qp", "20", "-bsf:v", "h264_mp4toannexb", "-f", "h264", "-y", str(stream)],
        check=True,
    )  # fmt: skip
    data = stream.read_bytes()
    aud = b"\x00\x00\x00\x01\x09"
    starts = []
    i = data.find(aud)
    while i != -1:
        starts.append(i)
        i = data.find(aud, i + 1)
    starts.append(len(data))
    return [data[a:b] for a, b in zip(starts, starts[1:])]


# The decoder stopped after the last displayed frame must not end in an ignored exception.
@pytest.mark.filterwarnings("error::pytest.PytestUnraisableExceptionWarning")
def test_frozen_slots_score_lower_than_delivered(tmp_path: Path) -> None:
    raw = video.prepare(_clip(tmp_path), tmp_path / "cache", fps=20)
    assert (raw.width, raw.height, raw.frames) == (320, 240, 40)
    units = _all_intra_frames(raw, tmp_path)
    assert len(units) == raw.frames
    # The encoder's stream: ids 0..24 encode sources 0..24; ids 25..39 are encodes that were
    # dropped (here: source 0 again, so that showing one would show); ids 40..54 encode
    # sources 25..39 (as re-encodes after a drop); ids 55..59 were never displayed (the
    # decoder is stopped once it has the last displayed frame). Frames 10..24 and 25..39 are never
    # displayed: slots 10..24 freeze on frame 9, and slots 25.. show the re-encodes, picked
    # by frame id (slots follow the source index).
    encoded = tmp_path / "stream.264"
    encoded.write_bytes(b"".join(units[:25]) + units[0] * 15 + b"".join(units[25:]) + units[0] * 5)
    displayed = [(i, i if i < 10 else i + 15) for i in range(raw.frames) if not 10 <= i < 25]
    per_frame, summary = quality.score(raw, displayed, raw.frames, encoded, mode="full")
    assert len(per_frame) == raw.frames
    frozen = [f.vmaf for f in per_frame if f.shown_frame != f.slot]
    shown = [f.vmaf for f in per_frame if f.shown_frame == f.slot]
    assert all(f.shown_frame == 9 for f in per_frame if 10 <= f.slot < 25)
    assert min(f.psnr for f in per_frame if f.slot >= 25) > 30, "the re-encodes are shown"
    assert sum(frozen) / len(frozen) < sum(shown) / len(shown) - 10
    assert summary["vmaf_delivered_mean"] > summary["vmaf_mean"]
    assert 0 < summary["ssim_mean"] <= 1
    assert summary["psnr_mean"] > 20
    # SSIM in dB is the mean of the per-slot values (Salsify's -10 log10(1 - SSIM)).
    db = [quality.ssim_db(f.ssim) for f in per_frame]
    assert summary["ssim_db_mean"] == pytest.approx(sum(db) / len(db))

    # "fast" scores a subsample; "none" scores nothing.
    fast, _ = quality.score(raw, displayed, raw.frames, encoded, mode="fast")
    assert [f.slot for f in fast] == list(range(0, raw.frames, quality.FAST_STEP))
    assert quality.score(raw, displayed, raw.frames, encoded, mode="none") == ([], {})
    # A displayed frame the stream does not have is one clear error.
    with pytest.raises(SluiceError, match="no picture for displayed frame 60"):
        quality.score(raw, [*displayed, (39, 60)], raw.frames, encoded, mode="full")


def test_displayed_frames_and_slots_follow_the_source_index() -> None:
    frames = [
        {"frame_id": 0, "source_index": 0, "displayed_us": 10},
        {"frame_id": 1, "source_index": 2, "displayed_us": None},  # purged
        {"frame_id": 2, "source_index": 2, "displayed_us": 90},  # slot 2 encoded again
    ]
    skips = [{"source_index": 1}, {"source_index": 3}]
    assert quality.displayed_frames(frames) == [(0, 0), (2, 2)]
    assert quality.slot_count(frames, skips) == 4
    assert quality.slot_count([], []) == 0


def test_nothing_displayed_is_black(tmp_path: Path) -> None:
    raw = video.prepare(_clip(tmp_path, 10), tmp_path / "cache")
    per_frame, summary = quality.score(raw, [], raw.frames, tmp_path / "none.264")
    assert all(f.shown_frame is None for f in per_frame)
    assert summary["vmaf_mean"] < 20
    assert summary["vmaf_delivered_mean"] is None


def test_bad_video_path_is_one_clear_error(tmp_path: Path) -> None:
    with pytest.raises(SluiceError, match="video file not found"):
        video.prepare(tmp_path / "missing.mp4", tmp_path)
    junk = tmp_path / "junk.mp4"
    junk.write_bytes(b"not a video")
    with pytest.raises(SluiceError, match="junk.mp4"):
        video.prepare(junk, tmp_path)


def test_ssim_db_is_salsify_s_definition() -> None:
    assert quality.ssim_db(0.9) == pytest.approx(10.0)
    assert quality.ssim_db(0.99) == pytest.approx(20.0)
    assert quality.ssim_db(0.96) == pytest.approx(13.979, abs=1e-3)
    assert quality.ssim_db(1.0) == quality.SSIM_DB_CAP


def test_delivered_stream_links_the_whole_stream_and_copies_a_subset(tmp_path: Path) -> None:
    units = [b"\x00\x00\x00\x01\x09head", b"\x00\x00\x00\x01\x09one", b"\x00\x00\x00\x01\x09two"]
    stream = tmp_path / "stream.264"
    stream.write_bytes(b"".join(units))
    offsets, end = [], 0
    for u in units:
        offsets.append(f"{end} {len(u)}")
        end += len(u)
    Path(f"{stream}.idx").write_text("\n".join(offsets) + "\n")
    whole = quality.delivered_stream(stream, [0, 1, 2], tmp_path / "all.264")
    assert whole.read_bytes() == stream.read_bytes()
    assert whole.stat().st_ino == stream.stat().st_ino  # one copy on disk
    part = quality.delivered_stream(stream, [0, 2], tmp_path / "part.264")
    assert part.read_bytes() == units[0] + units[2]
    assert part.stat().st_ino != stream.stat().st_ino
    # An index that leaves bytes out is not the whole stream: written, not linked.
    Path(f"{stream}.idx").write_text("\n".join(offsets[:2]) + "\n")
    first = quality.delivered_stream(stream, [0, 1], tmp_path / "first.264")
    assert first.read_bytes() == units[0] + units[1]
    assert first.stat().st_ino != stream.stat().st_ino


def test_a_run_without_kept_streams_is_scored_complete_and_has_no_h264(tmp_path: Path) -> None:
    from sluice import results
    from sluice.run import RunSpec, run_one

    clip = _clip(tmp_path)
    common = dict(scheme="webrtc-x264", video=str(clip), quality="fast", encode_time="modeled",
                  overrides=(("duration_s", 1.5),), progress=False)  # fmt: skip
    kept = run_one(RunSpec(out_dir=str(tmp_path / "kept"), **common))
    dropped = run_one(RunSpec(out_dir=str(tmp_path / "dropped"), keep_streams=False, **common))
    assert (kept / results.STREAM_FILE).is_file()
    for name in (results.STREAM_FILE, results.STREAM_INDEX_FILE, results.DELIVERED_FILE):
        assert not (dropped / name).exists()
    assert results.incomplete_reason(dropped) is None
    a, b = (results.load_run(d).summary for d in (kept, dropped))
    assert b["vmaf_mean"] == a["vmaf_mean"] and b["latency_all_ms"] == a["latency_all_ms"]
