"""Experiment matrices: schemes x traces x clips, run resumably, one summary row per run.

:func:`run_matrix` builds one :class:`~sluice.runner.RunSpec` per cell with a deterministic
output directory ``<results_root>/<experiment>/<trace>/<clip>/<scheme>``, skips the cells
whose results already exist for the same spec, runs the others with
:func:`~sluice.runner.run_many` (process pool, or Ray) and returns a pandas DataFrame with one
row per run (:data:`ROW_COLUMNS`).

Resuming: before a cell runs, its ``experiment-spec.json`` (the spec, minus where it writes)
is written and any old ``summary.json`` removed; a cell is done when ``summary.json`` exists
next to a matching ``experiment-spec.json``. An interrupted matrix therefore reruns only the
cells that had not finished, and a changed setting (duration, scheme config, ...) reruns the
cells it affects.
"""

from __future__ import annotations

import copy
import json
import math
import re
import sys
from collections.abc import Iterable, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Union

from . import results
from .errors import SluiceError, core
from .runner import RunSpec, run_many

if TYPE_CHECKING:
    import pandas as pd

SPEC_FILE = "experiment-spec.json"
RERUN_MODES = ("missing", "stale", "all")
# RunSpec fields that do not change a run's results.
_NOT_IN_KEY = ("out_dir", "progress", "cache_dir")

# ACE-N's threshold T (ACE §4.1, §6.5), in packets, in the ace-n pacer config; and the
# packet size that converts packets to bytes.
ACE_N_T_FIELD = "threshold_packets"
ACE_N_PACKET_FIELD = "packet_size_bytes"

# A frame left as a burst if its packets left at least this many times faster than the
# congestion controller's target rate: faster than any leaky-bucket pacer in the registry
# (1.1x, 2.5x) can send. See frame_burst().
BURST_RATE_FACTOR = 4.0

ROW_COLUMNS = [
    "experiment", "scheme", "trace", "network", "clip", "seed",
    "p50_ms", "p95_ms", "p95_steady_ms", "p99_ms", "mean_ms", "vmaf_mean", "vmaf_p5",
    "loss_rate", "stall_rate", "fps", "video_bitrate_bps", "utilization",
    "c0_share", "burst_share", "frames", "git_sha", "run_dir",
]  # fmt: skip


@dataclass(frozen=True)
class SchemeSpec:
    """A registered scheme (``config=None``) or a custom composition named ``name``."""

    name: str
    config: dict[str, Any] | None = field(default=None, compare=False, hash=False)


@dataclass(frozen=True)
class TraceSpec:
    """A downlink trace (file path or ``gen:SPEC``), its label (a directory name) and the
    network type it stands for (e.g. ``Wi-Fi``, ``4G``, ``5G``)."""

    path: str
    label: str
    network: str = "-"


@dataclass(frozen=True)
class ClipSpec:
    """A video clip (``path=None``: no video, the model encoder) and its label."""

    path: str | None
    label: str


SchemeArg = Union[str, tuple[str, dict[str, Any]], SchemeSpec]
TraceArg = Union[str, TraceSpec]
ClipArg = Union[str, None, ClipSpec]


def safe_label(s: str) -> str:
    """A filesystem-safe directory name for a label."""
    return re.sub(r"[^A-Za-z0-9._-]+", "-", s).strip("-") or "x"


def clip_label(path: str) -> str:
    """``handheld_flower_1280x720_30fps_10s.mp4`` -> ``handheld_flower``."""
    stem = Path(path).stem
    return safe_label(re.sub(r"_\d+x\d+.*$", "", stem) or stem)


def _scheme(s: SchemeArg) -> SchemeSpec:
    if isinstance(s, SchemeSpec):
        return s
    if isinstance(s, str):
        return SchemeSpec(s)
    name, cfg = s
    return SchemeSpec(name, cfg)


def _trace(t: TraceArg) -> TraceSpec:
    if isinstance(t, TraceSpec):
        return t
    from .traces import trace_stem

    return TraceSpec(t, trace_stem(t))


def _clip(c: ClipArg) -> ClipSpec:
    if isinstance(c, ClipSpec):
        return c
    if c is None:
        return ClipSpec(None, "model")
    return ClipSpec(c, clip_label(c))


# --- the registry ---------------------------------------------------------------------------


def registry() -> list[dict[str, Any]]:
    """The core's scheme registry (``sluice schemes --json``)."""
    return json.loads(core().schemes_json())


def registered_config(name: str) -> dict[str, Any] | None:
    """A registered scheme's composition (SchemeConfig dict), or None if it is unknown."""
    for s in registry():
        if s["name"] == name:
            return copy.deepcopy(s["config"])
    return None


def find_param(cfg: Any, key: str) -> Any:
    """The value of the first ``key`` found anywhere in a nested config, else None."""
    if isinstance(cfg, dict):
        if key in cfg:
            return cfg[key]
        for v in cfg.values():
            if (found := find_param(v, key)) is not None:
                return found
    elif isinstance(cfg, list):
        for v in cfg:
            if (found := find_param(v, key)) is not None:
                return found
    return None


def with_param(cfg: dict[str, Any], key: str, value: Any) -> dict[str, Any]:
    """A copy of ``cfg`` with every ``key`` (at any depth) set to ``value``; raises
    :class:`SluiceError` if the config has no such field."""
    out = copy.deepcopy(cfg)
    hits = 0

    def walk(node: Any) -> None:
        nonlocal hits
        if isinstance(node, dict):
            if key in node:
                node[key] = value
                hits += 1
            for v in node.values():
                walk(v)
        elif isinstance(node, list):
            for v in node:
                walk(v)

    walk(out)
    if not hits:
        raise SluiceError(f"the scheme config has no field {key!r}")
    return out


def variant(base: str, key: str, value: float, name: str | None = None) -> SchemeSpec:
    """Registered scheme ``base`` with config field ``key`` set to ``value``, named
    ``<base>-<letter><value>`` unless ``name`` is given (``ace-T7.5``)."""
    cfg = registered_config(base)
    if cfg is None:
        raise SluiceError(f"unknown scheme '{base}'")
    return SchemeSpec(name or f"{base}-{key[:1].upper()}{value:g}", with_param(cfg, key, value))


def known_schemes(
    schemes: Iterable[SchemeArg], warn: bool = True
) -> tuple[list[SchemeSpec], list[str]]:
    """(schemes to run, names skipped): registered names that are not in the registry are
    skipped (with a warning on stderr); custom compositions are kept."""
    names = {s["name"] for s in registry()}
    keep, skipped = [], []
    for s in map(_scheme, schemes):
        if s.config is None and s.name not in names:
            skipped.append(s.name)
            if warn:
                print(f"warning: scheme '{s.name}' is not registered; skipped", file=sys.stderr)
            continue
        keep.append(s)
    return keep, skipped


# --- the matrix -----------------------------------------------------------------------------


@dataclass(frozen=True)
class Cell:
    """One run of a matrix and what it stands for."""

    spec: RunSpec
    scheme: str
    trace: TraceSpec
    clip: ClipSpec

    @property
    def run_dir(self) -> Path:
        return Path(self.spec.resolved_out_dir())


def build_cells(
    experiment: str,
    schemes: Sequence[SchemeArg],
    traces: Sequence[TraceArg],
    clips: Sequence[ClipArg] = (None,),
    *,
    results_root: str = "results",
    **common: Any,
) -> list[Cell]:
    """One cell per (trace, clip, scheme); ``common`` are RunSpec fields shared by all
    (``queue_bytes``, ``duration_s``, ``width``, ``fps``, ``encode_time``, ``quality``,
    ``seed``, ...)."""
    per_cell = {"scheme", "scheme_config", "trace", "video", "out_dir"}
    bad = sorted(set(common) - (set(RunSpec.__dataclass_fields__) - per_cell))
    if bad:
        raise SluiceError(f"not common RunSpec settings: {', '.join(bad)}")
    ss = [_scheme(s) for s in schemes]
    ts = [_trace(t) for t in traces]
    cs = [_clip(c) for c in clips]
    for what, labels in (
        ("scheme", [s.name for s in ss]),
        ("trace", [t.label for t in ts]),
        ("clip", [c.label for c in cs]),
    ):
        dup = sorted({x for x in labels if labels.count(x) > 1})
        if dup:
            raise SluiceError(f"{what} listed twice: {', '.join(dup)}")
    root = Path(results_root) / safe_label(experiment)
    cells = []
    for t in ts:
        for c in cs:
            for s in ss:
                out = root / safe_label(t.label) / safe_label(c.label) / safe_label(s.name)
                spec = RunSpec(
                    scheme=s.name, scheme_config=s.config, trace=t.path, video=c.path,
                    out_dir=str(out), **common,
                )  # fmt: skip
                cells.append(Cell(spec, s.name, t, c))
    return cells


def spec_key(spec: RunSpec) -> dict[str, Any]:
    """What identifies a run's results: the spec without where it writes."""
    d = asdict(spec)
    for k in _NOT_IN_KEY:
        d.pop(k, None)
    return json.loads(json.dumps(d))  # tuples -> lists, as read back


def is_done(cell: Cell, require_sha: str | None = None) -> bool:
    """The cell has results for its spec (and, with ``require_sha``, from that commit of a
    clean checkout)."""
    d = cell.run_dir
    if not (d / results.SUMMARY_FILE).is_file() or not results.is_run_dir(d):
        return False
    try:
        saved = json.loads((d / SPEC_FILE).read_text(encoding="utf-8"))
        if require_sha is not None:
            header = results.read_header(d)
            if header.get("git_sha") != require_sha or header.get("git_dirty") is not False:
                return False
    except (OSError, json.JSONDecodeError, SluiceError):
        return False
    return bool(saved == spec_key(cell.spec))


def _mark_pending(cell: Cell) -> None:
    d = cell.run_dir
    d.mkdir(parents=True, exist_ok=True)
    (d / results.SUMMARY_FILE).unlink(missing_ok=True)
    (d / SPEC_FILE).write_text(json.dumps(spec_key(cell.spec), indent=2), encoding="utf-8")


def run_matrix(
    experiment: str,
    schemes: Sequence[SchemeArg],
    traces: Sequence[TraceArg],
    clips: Sequence[ClipArg] = (None,),
    *,
    results_root: str = "results",
    jobs: int | None = None,
    backend: str = "process",
    progress: bool = True,
    skip_unknown: bool = True,
    rerun: str = "missing",
    **common: Any,
) -> pd.DataFrame:
    """Runs the missing cells of the matrix and returns one row per cell (all of them).

    ``schemes``: names or ``(name, SchemeConfig dict)`` or :class:`SchemeSpec`; unregistered
    names are skipped with a warning (``skip_unknown``). ``traces``: paths or
    :class:`TraceSpec`; ``clips``: paths, ``None`` (model encoder) or :class:`ClipSpec`.
    ``rerun``: ``"missing"`` runs only the cells without results for their spec; ``"stale"``
    also those whose results come from another commit or a dirty checkout (the runs'
    headers); ``"all"`` every cell. The DataFrame's ``attrs`` hold ``ran`` (cells run now),
    ``reused`` and ``skipped_schemes``.
    """
    if rerun not in RERUN_MODES:
        raise SluiceError(f"rerun must be one of {', '.join(RERUN_MODES)}, got {rerun!r}")
    if skip_unknown:
        ss, skipped = known_schemes(schemes)
    else:
        ss, skipped = [_scheme(s) for s in schemes], []
    cells = build_cells(experiment, ss, traces, clips, results_root=results_root, **common)
    sha = None
    if rerun == "stale":
        sha, dirty = results.git_info()
        if dirty is not False:
            print("warning: the checkout is dirty or unknown; every cell counts as stale",
                  file=sys.stderr)  # fmt: skip
            sha = "dirty"
    todo = [c for c in cells if rerun == "all" or not is_done(c, sha)]
    if progress:
        print(
            f"{experiment}: {len(cells)} runs, {len(cells) - len(todo)} already done, "
            f"{len(todo)} to run",
            file=sys.stderr,
        )
    for c in todo:
        _mark_pending(c)
    if todo:
        run_many([c.spec for c in todo], jobs=jobs, backend=backend, progress=progress)
    df = collect(cells, experiment)
    df.attrs.update(ran=len(todo), reused=len(cells) - len(todo), skipped_schemes=skipped)
    return df


# --- rows -----------------------------------------------------------------------------------


def frame_burst(frames: pd.DataFrame) -> pd.Series:
    """Per frame: True if it left as a burst, False if paced, NA if it was never sent.

    A frame's packets left over ``span = last - first packet send time``; they carried
    ``size x (n-1)/n`` bytes after the first one, so they left at ``rate = that / span``.
    The frame counts as a burst if ``rate >= BURST_RATE_FACTOR x target_rate_bps`` (or
    ``span == 0``; one-packet frames are bursts by this rule): no leaky-bucket pacer of the
    registry (1.1x, 2.5x the target) sends that fast, while a frame that found a full token
    bucket leaves at once. A fixed span cut-off (say 2 ms) would call a paced 3-packet frame
    at 20 Mbit/s a burst.
    """
    import pandas as pd

    if frames.empty:
        return pd.Series([], dtype="boolean")
    first = pd.to_numeric(frames["first_packet_sent_us"], errors="coerce")
    last = pd.to_numeric(frames["last_packet_sent_us"], errors="coerce")
    span_s = (last - first) / 1e6
    n = pd.to_numeric(frames["packets"], errors="coerce").clip(lower=1)
    bits = frames["size_bytes"].astype(float) * 8 * (n - 1) / n
    target = pd.to_numeric(frames["target_rate_bps"], errors="coerce")
    rate = bits / span_s.where(span_s > 0)
    burst = (span_s <= 0) | (rate >= BURST_RATE_FACTOR * target)
    return burst.astype("boolean").where(first.notna() & last.notna())


def complexity_share(frames: pd.DataFrame, level: str = "c0") -> float:
    """Share of the frames with a recorded complexity level that used ``level`` (NaN if no
    frame recorded one, e.g. schemes without ACE-C)."""
    if frames.empty or "complexity" not in frames:
        return math.nan
    levels = frames["complexity"].dropna()
    return float((levels == level).mean()) if len(levels) else math.nan


def _num(v: Any) -> float:
    try:
        return math.nan if v is None else float(v)
    except (TypeError, ValueError):
        return math.nan


#: Frames captured before this are the start-up (GCC's initial probing and the first
#: rate cuts); ``p95_steady_ms`` leaves them out.
WARMUP_S = 5.0


def steady_p95(frames: pd.DataFrame, warmup_s: float = WARMUP_S) -> float:
    """P95 latency (ms) of the displayed frames captured after ``warmup_s``, the summary's
    P95 without the start-up transient."""
    import numpy as np

    if frames.empty or "latency_us" not in frames:
        return math.nan
    lat = frames.loc[frames["capture_us"] >= warmup_s * 1e6, "latency_us"].dropna()
    return float(np.percentile(lat / 1e3, 95)) if len(lat) else math.nan


def run_row(run_dir: str | Path, **meta: Any) -> dict[str, Any]:
    """One row of :data:`ROW_COLUMNS` from a finished run directory (``meta`` fills or
    overrides the labels: experiment, scheme, trace, network, clip)."""
    run = results.load_run(run_dir)
    s = run.summary or {}
    lat = s.get("latency_ms") or {}
    burst = frame_burst(run.frames)
    row = {
        "experiment": None,
        "scheme": run.scheme,
        "trace": run.trace_name,
        "network": None,
        "clip": None,
        "seed": run.seed,
        "p50_ms": _num(lat.get("p50")),
        "p95_ms": _num(lat.get("p95")),
        "p95_steady_ms": steady_p95(run.frames),
        "p99_ms": _num(lat.get("p99")),
        "mean_ms": _num(lat.get("mean")),
        "vmaf_mean": _num(s.get("vmaf_mean")),
        "vmaf_p5": _num(s.get("vmaf_p5")),
        "loss_rate": _num(s.get("loss_rate")),
        "stall_rate": _num(s.get("stall_rate")),
        "fps": _num(s.get("fps")),
        "video_bitrate_bps": _num(s.get("video_bitrate_bps")),
        "utilization": _num(s.get("utilization")),
        "c0_share": complexity_share(run.frames, "c0"),
        "burst_share": float(burst.dropna().mean()) if burst.notna().any() else math.nan,
        "frames": len(run.frames),
        "git_sha": run.header.get("git_sha"),
        "run_dir": str(run.path),
    }
    row.update(meta)
    return row


def collect(cells: Sequence[Cell], experiment: str) -> pd.DataFrame:
    """The rows of finished cells (a cell without results is left out with a warning)."""
    import pandas as pd

    rows = []
    for c in cells:
        if not (c.run_dir / results.SUMMARY_FILE).is_file():
            print(f"warning: no results in {c.run_dir}", file=sys.stderr)
            continue
        rows.append(
            run_row(
                c.run_dir, experiment=experiment, scheme=c.scheme, trace=c.trace.label,
                network=c.trace.network, clip=c.clip.label,
            )
        )  # fmt: skip
    return pd.DataFrame.from_records(rows, columns=ROW_COLUMNS)
