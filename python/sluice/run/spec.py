"""The first stage of a run: what it is. A :class:`RunSpec` names the scheme, the inputs and
the front end's settings; :func:`planned_config` resolves it into the core's run config
(defaults, the scheme's composition, the encoder, the overrides) and :func:`check` refuses
what the core or libx264 would refuse, before any trace is read or video decoded."""

from __future__ import annotations

import copy
import os
from dataclasses import dataclass
from typing import Any

from .. import config, quality
from ..errors import SluiceError
from ..traces import trace_name, trace_stem
from ..video import X264_PRESETS

ENCODERS = ("model", "x264")
ENCODE_TIME_MODES = ("measured", "modeled")


@dataclass(frozen=True)
class RunSpec:
    """Everything one run needs. Picklable, so it can be shipped to worker processes.

    The run's config is the core's ``RunConfig``: the defaults, the scheme's composition
    (the registry's, or ``scheme_config``), the encoder's kind and the names of the traces,
    then ``overrides``: ``(config path, value)`` pairs applied in order
    (:mod:`sluice.config`), so any field can be set (``("duration_s", 20.0)``,
    ``("downlink.queue_bytes", 100000)``, ``("pacer.threshold_packets", 12.5)``); for x264,
    last, the clip's frame rate (the clip was prepared at an overridden one) and fields
    (:func:`~sluice.run.inputs.with_clip`, which refuses an override of the fields). The
    other fields are front-end settings that are not part of the config.
    """

    scheme: str = "webrtc"  # a registered scheme, or the name of ``scheme_config``
    scheme_config: dict[str, Any] | None = None  # a custom composition (SchemeConfig JSON)
    overrides: tuple[tuple[str, Any], ...] = ()
    trace: str | None = None  # file path, "gen:SPEC", or None for an unlimited link
    uplink_trace: str | None = None
    trace_format: str | None = None  # None: detect
    video: str | None = None  # any clip ffmpeg reads; x264 is then the default encoder
    encoder: str | None = None  # "model" | "x264" | None (x264 with a video, else model)
    width: int | None = None  # scale the video to this width (height keeps the aspect)
    quality: str = "fast"  # none | fast | full (runs on real video only)
    encode_time: str = "measured"  # x264 encode time: measured wall time or modeled
    preset: str = "superfast"
    out_dir: str | None = None  # None: default_out_dir()
    progress: bool = True
    cache_dir: str = os.path.join("results", ".video-cache")
    # False: once quality is scored, the run's H.264 files (stream.264, its index and
    # delivered.264) are not kept (a big matrix: about 60 MB a minute of 720p video)
    keep_streams: bool = True

    def __post_init__(self) -> None:
        items = self.overrides.items() if isinstance(self.overrides, dict) else self.overrides
        pairs = []
        for item in items:
            path, value = item
            pairs.append((str(path), value))
        object.__setattr__(self, "overrides", tuple(pairs))

    def config(self) -> dict[str, Any]:
        """The resolved run config this spec asks for, before the front end fills in the
        video's fields: defaults, the scheme, the encoder's kind, the traces' names, the
        overrides.
        Raises :class:`SluiceError` for an unknown scheme or a bad override."""
        cfg = planned_config(self, resolve_encoder(self))
        if (cfg.get("encoder") or {}).get("kind") == "x264" and not self.video:
            raise SluiceError("the x264 encoder needs a video: add --video CLIP (an override "
                              f"set encoder.kind to x264; {self.scheme})")  # fmt: skip
        return cfg

    def default_out_dir(self) -> str:
        stem = trace_stem(self.trace) if self.trace else "unlimited"
        return os.path.join("results", f"{self.scheme}-{stem}-s{self.config()['seed']}")

    def resolved_out_dir(self) -> str:
        return self.out_dir or self.default_out_dir()


def overridden(spec: RunSpec, path: str) -> bool:
    """Whether ``spec``'s overrides set config ``path`` (short or full)."""
    want = config.short_path(path)
    return any(config.short_path(p) == want for p, _ in spec.overrides)


def planned_config(spec: RunSpec, encoder: str) -> dict[str, Any]:
    """See :meth:`RunSpec.config` (``encoder``: from :func:`resolve_encoder`)."""
    if spec.encode_time not in ENCODE_TIME_MODES:
        raise SluiceError(f"encode time must be measured or modeled, got {spec.encode_time!r}")
    cfg = config.default_config()
    cfg["scheme_name"] = spec.scheme
    cfg["scheme"] = (
        copy.deepcopy(spec.scheme_config)
        if spec.scheme_config is not None
        else config.scheme_config(spec.scheme)
    )
    if encoder == "x264":
        cfg["encoder"] = {"kind": "x264", "preset": spec.preset, "threads": 1,
                          "encode_time": spec.encode_time}  # fmt: skip
    try:
        cfg = config.resolve(cfg)
    except SluiceError as e:
        what = f"scheme {spec.scheme}" if spec.scheme_config is not None else "run config"
        msg = str(e).removeprefix("invalid run config: ")
        raise SluiceError(f"invalid {what}: {msg}") from None
    # The names the loaded traces will get (load_traces), before the overrides: a whole link
    # object pasted from a run's header, its trace's name in it, is then as it is.
    for link, arg in (("downlink", spec.trace), ("uplink", spec.uplink_trace)):
        cfg[link]["trace"] = trace_name(arg) if arg else None
    return config.apply_overrides(cfg, spec.overrides)


def resolve_encoder(spec: RunSpec) -> str:
    """The encoder a run uses: ``--encoder`` if given, else the scheme's own if it names one
    (the ACE schemes and webrtc-x264 are defined on x264), else x264 for a video and the model
    encoder otherwise. The model encoder answers ACE-C's complexity levels too."""
    pinned = None
    if spec.scheme_config is None:
        info = config.scheme_info(spec.scheme)
        if info is None:
            config.scheme_config(spec.scheme)  # raises: unknown scheme
        pinned = info["encoder"] if info else None
    if spec.encoder is not None and spec.encoder not in ENCODERS:
        raise SluiceError(f"encoder must be one of {', '.join(ENCODERS)}, got {spec.encoder!r}")
    chosen = spec.encoder or pinned or ("x264" if spec.video else "model")
    if chosen == "x264" and not spec.video:
        hint = " or --encoder model" if pinned else ""
        raise SluiceError(f"the x264 encoder needs a video: add --video CLIP{hint} ({spec.scheme})")
    if chosen == "x264" and spec.preset not in X264_PRESETS:
        raise SluiceError(f"unknown x264 preset {spec.preset!r} (known: {', '.join(X264_PRESETS)})")
    return chosen


def validate_config(cfg: dict[str, Any]) -> None:
    """What a run refuses of a config with its overrides applied: the core's checks (fields,
    ranges, components) and an x264 preset that libx264 does not know. ``sluice config``
    refuses the same. Raises :class:`SluiceError`."""
    config.resolve(cfg, validate=True)
    enc = cfg.get("encoder") or {}
    if enc.get("kind") == "x264" and enc.get("preset") not in X264_PRESETS:
        raise SluiceError(f"encoder.preset: unknown x264 preset {enc.get('preset')!r} "
                          f"(known: {', '.join(X264_PRESETS)})")  # fmt: skip


def check_quality_mode(spec: RunSpec) -> None:
    """Raises :class:`SluiceError` for a quality mode the scorer does not have."""
    if spec.quality not in quality.MODES:
        raise SluiceError(f"quality must be one of {', '.join(quality.MODES)}")


def check(spec: RunSpec) -> dict[str, Any]:
    """Checks what can be checked before running (scheme, encoder, overrides, ranges);
    returns :meth:`RunSpec.config`. Raises :class:`SluiceError`."""
    check_quality_mode(spec)
    cfg = spec.config()
    validate_config(cfg)
    return cfg
