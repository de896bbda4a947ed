"""The second stage of a run: its inputs. The traces it names (generated ones long enough
for the run and its drain) and, for x264, the video decoded into the raw frames the encoder
reads, with the config filled in from them (trace names, the clip's frame rate and size, where
the encoder writes its stream)."""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from .. import config, results, video
from ..errors import SluiceError
from ..traces import load_trace
from .spec import RunSpec, overridden

#: The x264 encoder's fields the front end sets from the clip (an override of one would make
#: x264 read the prepared frames with the wrong size or count), and what to give instead.
CLIP_FIELDS = (
    ("width", "give --width (a plan's width = ...); the height follows the clip"),
    ("height", "give --width (a plan's width = ...); the height follows the clip"),
    ("video_path", "give --video"),
    ("video_frames", "it is the prepared clip's frame count"),
    ("bitstream_path", "the stream is written into the run directory"),
)


def clip_encoder_fields(raw: Any, stream: Path | None) -> dict[str, Any]:
    """The x264 encoder's :data:`CLIP_FIELDS` for the prepared clip ``raw``
    (:func:`sluice.video.prepare`), its stream written to ``stream`` (None: not written)."""
    return {"video_path": os.path.abspath(raw.path), "width": raw.width, "height": raw.height,
            "video_frames": raw.frames, "bitstream_path": None if stream is None else str(stream)}


def prepare_clip(spec: RunSpec, cfg: dict[str, Any], clip: str | None = None,
                 width: int | None = None, fps: float | None = None) -> Any:  # fmt: skip
    """The raw frames of ``clip`` (default ``spec.video``) at ``spec``'s width (default
    ``width``: the clip's own if None) and at the frame rate an override gives (``cfg``'s
    ``fps``; else ``fps``, else the clip's own); :func:`sluice.video.prepare`."""
    rate = float(cfg["fps"]) if overridden(spec, "fps") else fps
    return video.prepare(clip or spec.video, spec.cache_dir, width=spec.width or width, fps=rate)


def with_clip(spec: RunSpec, cfg: dict[str, Any], raw: Any, stream: Path | None
              ) -> dict[str, Any]:  # fmt: skip
    """``cfg`` (``spec``'s config, its overrides applied) for x264 on the prepared clip
    ``raw``: its frame rate (``raw`` was prepared at an overridden one) and
    :func:`clip_encoder_fields`, refused where an override sets one of those to something
    else (:func:`keep_clip_fields`)."""
    fields = clip_encoder_fields(raw, stream)
    keep_clip_fields(spec, fields)
    cfg["fps"] = raw.fps
    cfg["encoder"].update(fields)
    return config.resolve(cfg)


def keep_clip_fields(spec: RunSpec, fields: dict[str, Any]) -> None:
    """Refuses an override of ``spec`` that sets one of the clip's ``fields`` to another
    value: by its path (``encoder.width``), or in a whole ``encoder`` object."""
    given: dict[str, Any] = {}
    for path, value in spec.overrides:
        keys = config.short_path(path).split(".")
        if keys == ["encoder"] and isinstance(value, dict):
            # An object with `kind` replaces the encoder's config; one without sets its
            # fields one by one (config.set_path).
            given = dict(value) if "kind" in value else {**given, **value}
        elif len(keys) == 2 and keys[0] == "encoder":
            given[keys[1]] = value
    for field, instead in CLIP_FIELDS:
        if field in given and given[field] != fields[field]:
            raise SluiceError(f"encoder.{field} is set from the clip for an x264 run: {instead}")


def load_traces(spec: RunSpec, cfg: dict[str, Any]) -> tuple[Any, Any]:
    """(downlink, uplink) :class:`~sluice.traces.LoadedTrace` or None, generated traces long
    enough for the config's duration plus drain; their names go into ``cfg``."""
    total_s = float(cfg["duration_s"]) + float(cfg["drain_s"])
    down = load_trace(spec.trace, duration_s=total_s, fmt=spec.trace_format) if spec.trace else None
    up = (
        load_trace(spec.uplink_trace, duration_s=total_s, fmt=spec.trace_format)
        if spec.uplink_trace
        else None
    )
    cfg["downlink"]["trace"] = down.name if down else None
    cfg["uplink"]["trace"] = up.name if up else None
    return down, up


@dataclass
class Inputs:
    """What a run reads: its traces (or None), its config as the inputs fill it in, the raw
    video (x264 only) and, while it runs, the encoder's stream under its temporary name.
    ``created_dir``: the run directory did not exist before (a run that fails leaves none
    behind)."""

    down: Any
    up: Any
    #: The run's config: the trace names, for x264 the clip's fields (:func:`with_clip`).
    config: dict[str, Any]
    raw: Any = None
    stream_tmp: Path | None = None
    created_dir: bool = False

    def discard(self, run_dir: Path) -> None:
        """Removes what a run that did not finish left: the encoder's stream and its index,
        and the run directory if this run created it and it is empty."""
        if self.stream_tmp is not None:
            self.stream_tmp.unlink(missing_ok=True)
            Path(f"{self.stream_tmp}.idx").unlink(missing_ok=True)
        if self.created_dir and run_dir.is_dir() and not any(run_dir.iterdir()):
            run_dir.rmdir()


def prepare(spec: RunSpec, cfg: dict[str, Any], encoder: str, run_dir: Path) -> Inputs:
    """Loads the traces and, with x264, prepares the video; the run's config (``cfg``, its
    overrides applied) filled in from them."""
    down, up = load_traces(spec, cfg)
    inputs = Inputs(down, up, cfg)
    if encoder != "x264":
        return inputs
    assert spec.video is not None  # resolve_encoder checked it
    if cfg["encoder"]["kind"] != "x264":
        raise SluiceError(
            f"an override replaced the x264 encoder's config with a {cfg['encoder']['kind']} "
            "one: choose the encoder with --encoder (a plan's encoder = ...) instead"
        )
    inputs.raw = prepare_clip(spec, cfg)
    # The stream is written under a temporary name and becomes part of the result only when
    # the run is complete (results.write_run).
    inputs.stream_tmp = results.temp_path(run_dir.resolve() / results.STREAM_FILE)
    inputs.config = with_clip(spec, cfg, inputs.raw, inputs.stream_tmp)
    inputs.created_dir = not run_dir.exists()
    try:
        run_dir.mkdir(parents=True, exist_ok=True)
    except OSError as e:
        raise SluiceError(f"cannot create output directory {run_dir}: {e}") from None
    return inputs
