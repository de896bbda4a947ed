"""The fourth stage of a run: what the viewer saw. For a run on real video, the frames the
receiver displayed are cut out of the encoder's stream (``delivered.264``) and scored slot
by slot against the source (:mod:`sluice.quality`: VMAF, SSIM, PSNR)."""

from __future__ import annotations

import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from .. import quality, results
from ..errors import SluiceError
from .spec import RunSpec


@dataclass
class Scores:
    """A run's per-slot scores, what they add to its summary, and why scoring failed if it
    did (the run is still written, then this is said)."""

    per_slot: list[dict[str, Any]] = field(default_factory=list)
    summary: dict[str, Any] = field(default_factory=dict)
    error: str | None = None


def score(spec: RunSpec, run_dir: Path, raw: Any, frames: list[dict[str, Any]],
          skips: list[dict[str, Any]], files: dict[str, Path]) -> Scores:  # fmt: skip
    """Scores the displayed frames of a run on ``raw`` video; adds ``delivered.264`` to
    ``files`` (under its temporary name) if it was written, and with ``keep_streams`` off
    removes the run's H.264 files once scored."""
    out = Scores()
    shown = quality.displayed_frames(frames)
    delivered = results.temp_path(run_dir / results.DELIVERED_FILE)
    files[results.DELIVERED_FILE] = delivered
    try:
        quality.delivered_stream(files[results.STREAM_FILE], [f for _, f in shown], delivered)
        slots = quality.slot_count(frames, skips)
        per_frame, out.summary = quality.score(
            raw, shown, slots, files[results.STREAM_FILE], spec.quality,
            progress=spec.progress and hasattr(sys.stderr, "isatty") and sys.stderr.isatty(),
        )  # fmt: skip
    except SluiceError as e:  # the run is kept; what failed is said once it is written
        out.error = str(e)
    else:
        out.per_slot = [
            {"slot": q.slot, "shown_frame": q.shown_frame, "vmaf": round(q.vmaf, 4),
             "ssim": round(q.ssim, 6), "psnr": round(q.psnr, 4)}
            for q in per_frame
        ]  # fmt: skip
    if not delivered.is_file():
        files.pop(results.DELIVERED_FILE)
    if not spec.keep_streams and out.error is None:
        for name in (results.STREAM_FILE, results.STREAM_INDEX_FILE, results.DELIVERED_FILE):
            path = files.pop(name, None)
            if path is not None:
                Path(path).unlink(missing_ok=True)
    return out
