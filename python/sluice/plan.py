"""Experiment plans: a TOML file naming a matrix of runs, for ``sluice matrix PLAN``.

::

    name = "ace"                          # results go to <results>/ace/
    description = "ACE (SIGCOMM '25) §6"
    seeds = [1]                           # default: the config's seed (1)

    [set]                                 # config overrides for every cell (full paths)
    duration_s = 20
    "downlink.queue_bytes" = 100000       # or, as TOML dotted keys: downlink.queue_bytes = ...

    [video]                               # front-end settings of the clip cells
    width = 1280                          # also: quality, encode_time, preset, encoder,
                                          # keep_streams (false: no .264 files kept)
    encode_time = "modeled"

    [[scheme]]                            # a registered scheme
    name = "webrtc-x264"
    [[scheme]]                            # a variant: a base scheme and overrides
    name = "ace-uncorrected"
    base = "ace"
    set = { "encoder_controller.planned_size_scale" = [1.0, 1.0, 1.0] }

    [[trace]]
    path = "../../shared/traces/zhuge/4g_trace2.mahi"   # relative to the plan; or gen:SPEC
    label = "4g-zhuge2"                   # default: the file stem
    network = "4G"                        # a group for the analysis (default "-")
    optional = true                       # missing file: skip its cells with a warning
    set = { "downlink.queue_packets" = 14 }   # properties of this path (every scheme)

    [[clip]]                              # none: the model encoder, no video
    path = "../data/videos/bbb-intro_1280x720_24fps_10s.mp4"
    set = { "encoder_controller.max_video_rate_bps" = 4e6 }   # a property of this clip

    [[sweep]]                             # variants of listed schemes, one path each
    path = "pacer.threshold_packets"
    values = [7.5, 10, 12.5, 15]
    schemes = ["ace"]                     # default: every scheme the path exists in
    label = "T"                           # variant names: ace-T7.5, ... (default: first letter)

The matrix is schemes (with the sweeps' variants) x traces x clips x seeds. A ``[[scheme]]``
is a registered name, or a new name with ``base`` (a registered scheme) or ``file`` (a
``SchemeConfig`` JSON file, relative to the plan), plus ``set`` (overrides for its cells)
and ``encoder``. ``schemes = ["a", "b", {name = ..., base = ...}]`` is the same list inline.
A sweep value equal to the scheme's own (``ace``'s T is 10) is the scheme's own cells, not a
new variant. A trace's ``set`` holds properties of that network path (delay, queue, loss),
applied to all of its cells. A clip's ``set`` holds properties of that clip (e.g.
Vidaptive's maximum useful video rate): each path applies to the cells of the schemes whose
config has it (a path that no scheme of the plan has is an error). Overrides apply in the
order ``[set]``, the trace's ``set``, the clip's ``set``, the scheme's ``set``, the sweep's
value, the seed. Every config path is checked against the resolved config of the cells it
applies to (:mod:`sluice.config`).

Every mistake (unknown key, wrong type, unknown scheme or config path, duplicate labels) is
a :class:`~sluice.errors.SluiceError` ``PLAN: ...`` raised by :func:`load_plan`, before
anything runs; missing input files are checked by :meth:`Plan.check_inputs`.
"""

from __future__ import annotations

import json
import math
import os
import re
import sys
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from . import config, results, run
from .errors import SluiceError, regular_file
from .experiments import (
    MAX_NAME_CHARS,
    Cell,
    Outcome,
    clip_label,
    name_problem,
    results_table,
    run_cells,
    safe_label,
    todo_cells,
    write_table,
)
from .traces import is_generated, load_trace, trace_stem

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover - Python < 3.11
    import tomli as tomllib

TOP_KEYS = ("name", "description", "seeds", "set", "video", "scheme", "schemes", "trace",
            "clip", "sweep")  # fmt: skip
VIDEO_KEYS = ("width", "quality", "encode_time", "preset", "encoder", "keep_streams")
SCHEME_KEYS = ("name", "base", "file", "set", "encoder", "description")
TRACE_KEYS = ("path", "label", "network", "uplink", "format", "optional", "set")
CLIP_KEYS = ("path", "label", "optional", "set")
SWEEP_KEYS = ("path", "values", "schemes", "label")


@dataclass(frozen=True)
class PlanScheme:
    """A scheme of a plan: registered (``config`` None) or a composition named ``name``."""

    name: str
    base: str | None  # the registered scheme it comes from (None: from a file)
    config: dict[str, Any] | None = field(default=None, compare=False, hash=False)
    overrides: tuple[tuple[str, Any], ...] = ()
    encoder: str | None = None
    parent: str | None = None  # the scheme a sweep variant was made from
    sweep: tuple[str, Any] | None = None  # (path, value) of a sweep variant


@dataclass(frozen=True)
class PlanTrace:
    path: str  # absolute file path or gen:SPEC
    label: str
    network: str = "-"
    uplink: str | None = None
    format: str | None = None
    optional: bool = False
    # Properties of the network path (delay, queue, loss): (path, value) pairs for every cell.
    overrides: tuple[tuple[str, Any], ...] = ()


@dataclass(frozen=True)
class PlanClip:
    path: str | None  # None: no video (the model encoder)
    label: str
    optional: bool = False
    # Properties of the clip: (path, value) pairs for the schemes whose config has the path.
    overrides: tuple[tuple[str, Any], ...] = ()


@dataclass(frozen=True)
class Sweep:
    path: str  # short form (sluice.config.short_path)
    values: tuple[Any, ...]
    schemes: tuple[str, ...]
    label: str


@dataclass
class Plan:
    """A loaded, checked plan (see the module doc)."""

    path: Path
    name: str
    description: str
    seeds: tuple[int, ...] | None
    overrides: tuple[tuple[str, Any], ...]
    video: dict[str, Any]
    schemes: list[PlanScheme]  # declared schemes, each followed by its sweep variants
    traces: list[PlanTrace]
    clips: list[PlanClip]
    sweeps: list[Sweep]
    skipped: list[str] = field(default_factory=list)  # notes on optional inputs left out

    @property
    def swept_paths(self) -> list[str]:
        return list(dict.fromkeys(s.path for s in self.sweeps))

    @property
    def probe_trace(self) -> PlanTrace:
        """The trace a check of a scheme's config runs with: the plan's first, without its
        own overrides (a config names its traces, and a link object pasted from a run's
        header names the trace the run reads), else a constant link."""
        if self.traces:
            return replace(self.traces[0], overrides=())
        return PlanTrace("gen:constant:1", "x")

    def scheme(self, name: str) -> PlanScheme:
        return next(s for s in self.schemes if s.name == name)

    def clip_overrides(self, s: PlanScheme, clip: PlanClip) -> list[tuple[str, Any]]:
        """The clip's overrides that apply to scheme ``s`` (those whose path its config has)."""
        if not clip.overrides:
            return []
        base = self.spec(s, self.probe_trace, clip, None, with_clip=False)
        cfg = base.config()
        return [(p, v) for p, v in clip.overrides if config.has_path(cfg, p)]

    def spec(self, s: PlanScheme, trace: PlanTrace, clip: PlanClip, seed: int | None,
             out_dir: str | None = None, with_clip: bool = True) -> run.RunSpec:  # fmt: skip
        """The run of one cell (``with_clip=False``: without the clip's overrides)."""
        clip_set = self.clip_overrides(s, clip) if with_clip else []
        overrides = [*self.overrides, *trace.overrides, *clip_set, *s.overrides]
        if s.sweep is not None:
            overrides.append(s.sweep)
        if seed is not None:
            overrides.append(("seed", seed))
        video = {k: v for k, v in self.video.items() if k != "encoder"}
        return run.RunSpec(
            scheme=s.name, scheme_config=s.config, overrides=tuple(overrides),
            trace=trace.path, uplink_trace=trace.uplink, trace_format=trace.format,
            video=clip.path, encoder=s.encoder or self.video.get("encoder"),
            out_dir=out_dir, **video,
        )  # fmt: skip

    def cell_count(self) -> int:
        """How many cells :meth:`cells` gives (without making them)."""
        return len(self.traces) * len(self.clips) * len(self.schemes) * len(self.seeds or [1])

    def cells(self, results_root: str | os.PathLike[str] = "results") -> list[Cell]:
        """One cell per (trace, clip, scheme, seed), written to
        ``<results_root>/<name>/<trace>/<clip>/<scheme>/s<seed>``."""
        return list(self.iter_cells(results_root))

    def iter_cells(self, results_root: str | os.PathLike[str] = "results") -> Iterator[Cell]:
        """:meth:`cells`, one at a time."""
        root = Path(results_root) / safe_label(self.name)
        seeds: list[int | None] = list(self.seeds) if self.seeds else [None]
        default_seed = int(config.default_config()["seed"])
        values = self._swept_values()
        for t in self.traces:
            for c in self.clips:
                for s in self.schemes:
                    for seed in seeds:
                        spec = self.spec(s, t, c, seed)
                        # The seed the run takes: the plan's seeds, else the last `seed` any
                        # of its sets gives ([set], a trace's, a clip's, a scheme's).
                        own = [v for p, v in spec.overrides if config.short_path(p) == "seed"]
                        sd = seed if seed is not None else int(own[-1]) if own else default_seed
                        d = root / safe_label(t.label) / safe_label(c.label) / safe_label(s.name)
                        spec = replace(spec, out_dir=str(d / f"s{sd}"))
                        yield Cell(
                            spec=spec, scheme=s.name, base_scheme=s.base, trace=t.label,
                            network=t.network, clip=c.label, seed=sd,
                            swept=tuple(values.get(s.name, {}).items()),
                        )  # fmt: skip

    def _swept_values(self) -> dict[str, dict[str, Any]]:
        """Scheme -> {swept path: value} for the schemes a sweep covers: its variants, and
        the scheme itself when its own value is one of the sweep's."""
        out: dict[str, dict[str, Any]] = {}
        for sw in self.sweeps:
            for s in self.schemes:
                if s.sweep is not None and s.sweep[0] == sw.path and s.parent in sw.schemes:
                    out.setdefault(s.name, {})[sw.path] = s.sweep[1]
                elif s.sweep is None and s.name in sw.schemes:
                    own = config.get_path(self._template(s), sw.path)
                    if any(_same(v, own) for v in sw.values):  # the scheme is one of the points
                        out.setdefault(s.name, {})[sw.path] = own
        return out

    def _template(self, s: PlanScheme) -> dict[str, Any]:
        clip = self.clips[0]
        return self.spec(s, self.probe_trace, clip, None).config()

    def check_inputs(self, warn: bool = True) -> None:
        """Checks that trace and clip files exist and traces parse. A missing optional one is
        dropped with its cells and a warning (recorded in :attr:`skipped`); anything else (a
        directory, a malformed trace, optional or not) is a :class:`SluiceError` naming the
        input."""
        per_input = len(self.schemes) * len(self.seeds or [None])
        keep_t = []
        for t in self.traces:
            problem = _trace_problem(t)
            if problem is None:
                keep_t.append(t)
                continue
            why, missing = problem
            if t.optional and missing:
                n = per_input * len(self.clips)
                self._skip(f"trace '{t.label}' and its {n} cells skipped: {why}", warn)
            else:
                raise SluiceError(f"{self.path}: trace '{t.label}': {why}{_hint(missing)}")
        keep_c = []
        for c in self.clips:
            problem = None if c.path is None else _file_problem(c.path, "video")
            if problem is None:
                keep_c.append(c)
                continue
            why, missing = problem
            if c.optional and missing:
                n = per_input * len(keep_t)
                self._skip(f"clip '{c.label}' and its {n} cells skipped: {why}", warn)
            else:
                raise SluiceError(f"{self.path}: clip '{c.label}': {why}{_hint(missing)}")
        if not keep_t:
            raise SluiceError(f"{self.path}: no trace left to run ({'; '.join(self.skipped)})")
        if not keep_c:
            raise SluiceError(f"{self.path}: no clip left to run ({'; '.join(self.skipped)})")
        self.traces, self.clips = keep_t, keep_c

    def _skip(self, note: str, warn: bool) -> None:
        self.skipped.append(note)
        if warn:
            print(f"warning: {self.path}: {note}", file=sys.stderr)

    def to_json(self) -> dict[str, Any]:
        """The plan as run (``plan.json`` next to the results): everything resolved."""
        return {
            "plan": str(self.path),
            "name": self.name,
            "description": self.description,
            "seeds": list(self.seeds) if self.seeds else None,
            "set": [list(o) for o in self.overrides],
            "video": self.video,
            "schemes": [
                {
                    "name": s.name,
                    "base": s.base,
                    "set": [list(o) for o in s.overrides],
                    "encoder": s.encoder,
                    "parent": s.parent,
                    "sweep": list(s.sweep) if s.sweep else None,
                }
                for s in self.schemes
            ],  # fmt: skip
            "traces": [
                {**vars(t), "overrides": [list(o) for o in t.overrides]} for t in self.traces
            ],
            "clips": [
                {**vars(c), "overrides": [list(o) for o in c.overrides]} for c in self.clips
            ],
            "sweeps": [
                {
                    "path": w.path,
                    "values": list(w.values),
                    "schemes": list(w.schemes),
                    "label": w.label,
                }
                for w in self.sweeps
            ],  # fmt: skip
            "skipped": self.skipped,
        }


def _file_problem(p: str, what: str) -> tuple[str, bool] | None:
    """Why plan input file ``p`` cannot be used, and whether because it is missing (the one
    problem ``optional = true`` skips: a directory is a mistake to fix); None if it is a
    file."""
    if Path(p).is_dir():
        return f"{what} file {p} is a directory, not a file", False
    if not Path(p).is_file():
        return f"{what} file not found: {p}", True
    return None


def _trace_problem(t: PlanTrace) -> tuple[str, bool] | None:
    """:func:`_file_problem` of the trace's files, or why one does not parse (not missing)."""
    for p in (t.path, t.uplink):
        if p is None:
            continue
        if not is_generated(p) and (problem := _file_problem(p, "trace")):
            return problem
        try:
            load_trace(p, duration_s=1.0, fmt=t.format)
        except SluiceError as e:  # the CLI's option is the plan's `format` key here
            return str(e).replace("use --trace-format to choose", "set the trace's format"), False
    return None


def _hint(missing: bool) -> str:
    """The hint for a plan input that cannot be used: only a missing file may be skipped."""
    return " (mark it optional = true to skip it)" if missing else ""


# --- loading --------------------------------------------------------------------------------


class _Ctx:
    """Where a value came from, for error messages."""

    def __init__(self, path: Path, where: str = "") -> None:
        self.path = path
        self.where = where

    def at(self, where: str) -> _Ctx:
        return _Ctx(self.path, f"{self.where}{where}")

    def error(self, msg: str) -> SluiceError:
        return SluiceError(f"{self.path}: {self.where + ': ' if self.where else ''}{msg}")

    def table(self, v: Any, keys: tuple[str, ...], what: str) -> dict[str, Any]:
        if not isinstance(v, dict):
            raise self.error(f"{what} must be a table, got {_tname(v)}")
        bad = [k for k in v if k not in keys]
        if bad:
            raise self.error(f"unknown key '{bad[0]}' in {what} (valid: {', '.join(keys)})")
        return v

    def str(self, d: dict[str, Any], key: str, default: Any = None, required: bool = False):
        if key not in d:
            if required:
                raise self.error(f"missing key '{key}'")
            return default
        v = d[key]
        if not isinstance(v, str) or not v.strip():
            raise self.error(f"'{key}' must be a non-empty string, got {_tname(v)} {v!r}")
        return v

    def bool(self, d: dict[str, Any], key: str, default: bool = False) -> bool:
        v = d.get(key, default)
        if not isinstance(v, bool):
            raise self.error(f"'{key}' must be true or false, got {_tname(v)} {v!r}")
        return v

    def list(self, d: dict[str, Any], key: str) -> list[Any] | None:
        if key not in d:
            return None
        v = d[key]
        if not isinstance(v, list):
            raise self.error(f"'{key}' must be an array, got {_tname(v)} {v!r}")
        return v


def _toml(v: Any) -> str:
    """``v`` as TOML writes it (``true``, ``"2"``), for error messages."""
    if isinstance(v, bool):
        return "true" if v else "false"
    return json.dumps(v) if isinstance(v, (str, int, float)) else repr(v)


def _tname(v: Any) -> str:
    return {dict: "a table", list: "an array", str: "a string", bool: "a boolean",
            int: "an integer", float: "a number"}.get(type(v), type(v).__name__)  # fmt: skip


def _overrides(ctx: _Ctx, v: Any, what: str) -> tuple[tuple[str, Any], ...]:
    """A ``set`` table as (path, value) pairs. Quoted dotted keys are paths; TOML dotted keys
    and sub-tables become nested tables, flattened here to paths, except a table with a
    ``kind`` (a component replaced wholesale), which is the value."""
    if not isinstance(v, dict):
        raise ctx.error(f"{what} must be a table of config paths, got {_tname(v)}")
    out: list[tuple[str, Any]] = []

    def walk(prefix: str, d: dict[str, Any]) -> None:
        for k, x in d.items():
            p = f"{prefix}.{k}" if prefix else str(k)
            if isinstance(x, dict) and "kind" not in x and x:
                walk(p, x)
            else:
                out.append((p, x))

    walk("", v)
    seen: dict[str, str] = {}
    for p, _ in out:
        try:
            full = config.short_path(p)
        except SluiceError:
            full = p
        if full in seen:
            raise ctx.error(f"{what}: '{seen[full]}' and '{p}' set one config path ('{full}'): "
                            "a quoted dotted key and a dotted key or table name the same field; "
                            "give it once")  # fmt: skip
        seen[full] = p
    for p, _ in out:
        try:
            config.split_path(p)
        except SluiceError as e:
            raise ctx.error(f"{what}: {e}") from None
    return tuple(out)


def _resolve_file(base: Path, p: str) -> str:
    if is_generated(p):
        return p
    return str((base / os.path.expanduser(p)).resolve())


def load_plan(path: str | os.PathLike[str]) -> Plan:
    """Reads and checks a plan (see the module doc); :class:`SluiceError` ``PATH: ...`` for
    any mistake. Input files are not looked at (:meth:`Plan.check_inputs`)."""
    p = Path(path)
    if p.exists() and not p.is_dir():
        regular_file(p, "plan file", 1 << 24)  # a FIFO or device would block
    try:
        data = tomllib.loads(p.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise SluiceError(f"plan file not found: {path}") from None
    except IsADirectoryError:
        raise SluiceError(f"plan path is a directory, not a file: {path}") from None
    except (OSError, UnicodeDecodeError) as e:
        raise SluiceError(f"cannot read plan {path}: {e}") from None
    except tomllib.TOMLDecodeError as e:
        raise SluiceError(f"{path}: invalid TOML: {e}") from None
    except RecursionError:
        raise SluiceError(f"{path}: nested too deeply (arrays or tables)") from None
    try:
        return plan_from_dict(data, p)
    except RecursionError:  # a table nested thousands deep (a.a.a...b = 1)
        raise SluiceError(f"{path}: nested too deeply (arrays or tables)") from None


def plan_from_dict(data: dict[str, Any], path: Path) -> Plan:
    """A plan from its parsed TOML; relative paths are relative to ``path``'s directory."""
    ctx = _Ctx(path)
    ctx.table(data, TOP_KEYS, "the plan")
    base = path.resolve().parent
    name = ctx.str(data, "name", required=True)
    if safe_label(name) != name or name_problem(name):
        raise ctx.error(f"'name' must be a plain file name ([A-Za-z0-9._-], not starting "
                        f"with '.', at most {MAX_NAME_CHARS} characters), got {name!r}")
    description = ctx.str(data, "description", default="")

    seeds = ctx.list(data, "seeds")
    if seeds is not None:
        if not seeds or any(isinstance(s, bool) or not isinstance(s, int) or s < 0
                            for s in seeds):  # fmt: skip
            bad = next((s for s in seeds if isinstance(s, bool) or not isinstance(s, int)
                        or s < 0), None) if seeds else None  # fmt: skip
            got = "an empty array" if not seeds else f"{_tname(bad)} {_toml(bad)}"
            raise ctx.error(f"'seeds' must be a non-empty array of integers >= 0, got {got}")
        if len(set(seeds)) != len(seeds):
            raise ctx.error(f"seed listed twice in 'seeds': {seeds}")
    overrides = _overrides(ctx, data.get("set", {}), "[set]")
    if seeds is not None and any(config.short_path(p) == "seed" for p, _ in overrides):
        raise ctx.error("[set] sets 'seed' and 'seeds' is given: use one of them")

    video = dict(ctx.table(data.get("video", {}), VIDEO_KEYS, "[video]"))
    vctx = ctx.at("[video]")
    if "width" in video and (
        isinstance(video["width"], bool)
        or not isinstance(video["width"], int)
        or video["width"] < 16
    ):
        raise vctx.error(f"'width' must be an integer >= 16, got {video['width']!r}")  # fmt: skip
    for key, allowed in (("quality", ("none", "fast", "full")),
                         ("encode_time", run.ENCODE_TIME_MODES),
                         ("encoder", run.ENCODERS)):  # fmt: skip
        if key in video and video[key] not in allowed:
            raise vctx.error(f"'{key}' must be one of {', '.join(allowed)}, got {video[key]!r}")
    if "preset" in video:
        vctx.str(video, "preset")
    if "keep_streams" in video and not isinstance(video["keep_streams"], bool):
        raise vctx.error(f"'keep_streams' must be true or false, got {video['keep_streams']!r}")

    schemes = _schemes(ctx, data, base)
    traces = _traces(ctx, data, base)
    clips = _clips(ctx, data, base)
    for_clips = [k for k in video if k != "encoder"]
    if for_clips and clips[0].path is None:
        raise vctx.error(f"{', '.join(repr(k) for k in for_clips)} "
                         f"{'is' if len(for_clips) == 1 else 'are'} for x264 on a clip, and "
                         "the plan has no [[clip]]: add the clips, or leave "
                         f"{'it' if len(for_clips) == 1 else 'them'} out (the model encoder "
                         "has no video)")  # fmt: skip
    plan = Plan(path, name, description, tuple(seeds) if seeds else None, overrides, video,
                schemes, traces, clips, [])  # fmt: skip
    _check_size(ctx, plan, len(schemes))
    _check_specs(ctx, plan)
    plan.sweeps = _sweeps(ctx, data, plan)
    _check_specs(ctx, plan, only_variants=True)
    return plan


#: The most cells a plan may have (docs/cli.md, "Limits"): checked from the sizes of its
#: lists before any cell or sweep variant is made.
MAX_CELLS = 100_000


def _check_size(ctx: _Ctx, plan: Plan, n_schemes: int) -> None:
    n_seeds = len(plan.seeds or [1])
    n = n_schemes * len(plan.traces) * len(plan.clips) * n_seeds
    if n > MAX_CELLS:
        raise ctx.error(
            f"{n} cells ({n_schemes} schemes and variants x {len(plan.traces)} traces x "
            f"{len(plan.clips)} clips x {n_seeds} seeds), above the limit of {MAX_CELLS}: "
            "split the plan"
        )


def _schemes(ctx: _Ctx, data: dict[str, Any], base: Path) -> list[PlanScheme]:
    if "scheme" in data and "schemes" in data:
        raise ctx.error("give the schemes as 'schemes = [...]' or as [[scheme]] tables, not both")
    raw = data.get("scheme", data.get("schemes"))
    if raw is None:
        raise ctx.error("no schemes: add [[scheme]] tables or 'schemes = [...]'")
    if not isinstance(raw, list) or not raw:
        got = "an empty array" if isinstance(raw, list) else _tname(raw)
        raise ctx.error(f"the schemes must be a non-empty array, got {got}")
    known = config.scheme_names()
    out: list[PlanScheme] = []
    for i, entry in enumerate(raw):
        sctx = ctx.at(f"scheme {i + 1}")
        if isinstance(entry, str):
            entry = {"name": entry}
        entry = sctx.table(entry, SCHEME_KEYS, "a scheme")
        name = sctx.str(entry, "name", required=True)
        sctx = ctx.at(f"scheme '{name}'")
        if safe_label(name) != name or name_problem(name):
            raise sctx.error("a scheme name must be a plain file name ([A-Za-z0-9._-], not "
                             f"starting with '.', at most {MAX_NAME_CHARS} characters)")
        base_name = sctx.str(entry, "base")
        file = sctx.str(entry, "file")
        encoder = sctx.str(entry, "encoder")
        if encoder is not None and encoder not in run.ENCODERS:
            raise sctx.error(f"'encoder' must be one of {', '.join(run.ENCODERS)}, "
                             f"got {encoder!r}")  # fmt: skip
        sets = _overrides(sctx, entry.get("set", {}), "'set'")
        if base_name and file:
            raise sctx.error("give 'base' or 'file', not both")
        cfg = None
        if file:
            cfg = _scheme_file(sctx, base, file)
            base_name = None
        elif base_name:
            if base_name not in known:
                raise sctx.error(f"unknown base scheme '{base_name}' (known: {', '.join(known)})")
            if name in known:
                raise sctx.error(f"'{name}' is a registered scheme: give the variant its own name")
            cfg = config.scheme_config(base_name)
        elif name in known:
            if sets:
                raise sctx.error(f"'{name}' is a registered scheme: to change it, give the "
                                 f"variant its own name and base = \"{name}\"")  # fmt: skip
            base_name = name
        else:
            raise sctx.error(f"unknown scheme '{name}' (known: {', '.join(known)}; a new "
                             "scheme needs 'base' or 'file')")  # fmt: skip
        out.append(PlanScheme(name, base_name, cfg, sets, encoder))
    names = [s.name for s in out]
    dup = sorted({n for n in names if names.count(n) > 1})
    if dup:
        raise ctx.error(f"scheme listed twice: {', '.join(dup)}")
    return out


def _scheme_file(ctx: _Ctx, base: Path, file: str) -> dict[str, Any]:
    path = Path(os.path.normpath(base / file))
    if not path.exists():
        raise ctx.error(f"scheme file not found: {path}")
    try:
        return config.read_scheme_file(path)[0]
    except SluiceError as e:
        raise ctx.error(str(e)) from None


def _entries(ctx: _Ctx, data: dict[str, Any], key: str) -> list[dict[str, Any]]:
    raw = data.get(key, [])
    if not isinstance(raw, list):
        raise ctx.error(f"'{key}' must be an array of tables ([[{key}]]), got {_tname(raw)}")
    return raw


def _label(ctx: _Ctx, what: str, label: str) -> str:
    """``label``, if it can name a directory (:func:`~sluice.experiments.name_problem`, also
    once made file-safe)."""
    why = name_problem(label) or name_problem(safe_label(label))
    if why:
        raise ctx.error(f"{what} label {label!r} {why}: give the {what} a 'label' that can "
                        "name a directory")  # fmt: skip
    return label


def _unique(ctx: _Ctx, what: str, labels: list[str]) -> None:
    safe = [safe_label(x) for x in labels]
    dup = sorted({x for x, s in zip(labels, safe) if safe.count(s) > 1})
    if dup:
        raise ctx.error(f"{what} label listed twice: {', '.join(dup)}")


def _traces(ctx: _Ctx, data: dict[str, Any], base: Path) -> list[PlanTrace]:
    out = []
    for i, entry in enumerate(_entries(ctx, data, "trace")):
        tctx = ctx.at(f"trace {i + 1}")
        entry = tctx.table(entry, TRACE_KEYS, "a [[trace]]")
        path = _resolve_file(base, tctx.str(entry, "path", required=True))
        label = _label(tctx, "trace", tctx.str(entry, "label", default=trace_stem(entry["path"])))
        uplink = tctx.str(entry, "uplink")
        fmt = tctx.str(entry, "format")
        if fmt is not None and fmt not in ("mahimahi", "rate"):
            raise tctx.error(f"'format' must be mahimahi or rate, got {fmt!r}")
        sets = _overrides(tctx, entry["set"], "set") if "set" in entry else ()
        out.append(PlanTrace(
            path, label, tctx.str(entry, "network", default="-"),
            _resolve_file(base, uplink) if uplink else None, fmt, tctx.bool(entry, "optional"),
            sets,
        ))  # fmt: skip
    if not out:
        raise ctx.error("no traces: add [[trace]] tables (path = a file or gen:SPEC)")
    _unique(ctx, "trace", [t.label for t in out])
    return out


def _clips(ctx: _Ctx, data: dict[str, Any], base: Path) -> list[PlanClip]:
    out = []
    for i, entry in enumerate(_entries(ctx, data, "clip")):
        cctx = ctx.at(f"clip {i + 1}")
        entry = cctx.table(entry, CLIP_KEYS, "a [[clip]]")
        raw = cctx.str(entry, "path", required=True)
        path = str((base / os.path.expanduser(raw)).resolve())
        label = _label(cctx, "clip", cctx.str(entry, "label", default=clip_label(raw)))
        sets = _overrides(cctx, entry["set"], "set") if "set" in entry else ()
        out.append(PlanClip(path, label, cctx.bool(entry, "optional"), sets))
    if not out:
        return [PlanClip(None, "model")]
    _unique(ctx, "clip", [c.label for c in out])
    return out


def _check_specs(ctx: _Ctx, plan: Plan, only_variants: bool = False) -> None:
    """Every scheme's run config resolves (one cell per scheme and kind of clip, on every
    trace: a config names its traces, and a link object pasted from a run's header into a
    set names one; and every clip with overrides); every clip override applies to some
    scheme."""
    trace = plan.probe_trace

    def check_traces(with_overrides: bool) -> None:
        for t in plan.traces:
            if bool(t.overrides) != with_overrides:
                continue
            for s in plan.schemes:
                for clip in {c.path is None: c for c in plan.clips}.values():
                    try:
                        run.check(plan.spec(s, t, clip, None))
                    except SluiceError as e:
                        raise ctx.at(f"trace '{t.label}', scheme '{s.name}'").error(
                            str(e)) from None  # fmt: skip

    if not only_variants:
        check_traces(with_overrides=True)
        for clip in plan.clips:
            cctx = ctx.at(f"clip '{clip.label}'")
            used: set[str] = set()
            for s in plan.schemes:
                try:
                    used |= {p for p, _ in plan.clip_overrides(s, clip)}
                except SluiceError as e:
                    raise ctx.at(f"scheme '{s.name}'").error(str(e)) from None
            for p, _ in clip.overrides:
                if p not in used:
                    raise cctx.error(f"set: no scheme of the plan has the config path '{p}'")
            if clip.overrides:
                for s in plan.schemes:
                    try:
                        run.check(plan.spec(s, trace, clip, None))
                    except SluiceError as e:
                        raise cctx.at(f", scheme '{s.name}'").error(str(e)) from None
    for s in plan.schemes:
        if only_variants and s.sweep is None:
            continue
        sctx = ctx.at(f"scheme '{s.name}'")
        for clip in {c.path is None: c for c in plan.clips}.values():
            spec = plan.spec(s, trace, clip, plan.seeds[0] if plan.seeds else None)
            try:
                run.check(spec)
            except SluiceError as e:
                msg = str(e)
                if clip.path is None and "an override set encoder.kind" in msg:
                    msg = ("encoder.kind = \"x264\" needs a clip: add [[clip]] tables (or "
                           "leave the encoder to the scheme)")  # fmt: skip
                elif clip.path is None and "needs a video" in msg:
                    msg = ("it is defined on x264 and needs a clip: add [[clip]] tables, or "
                           "encoder = \"model\" to run it on the model encoder")  # fmt: skip
                # A path the plan's [set] gives (and the scheme's own set does not): unknown
                # to this scheme, or a value of the wrong type.
                bad = re.search(r"config path '([^']+)'", msg) or re.match(r"([\w.]+)=", msg)
                own = {p for p, _ in s.overrides} | ({s.sweep[0]} if s.sweep else set())
                if bad and bad.group(1) in {p for p, _ in plan.overrides} - own:
                    raise ctx.at(f"[set], applied to scheme '{s.name}'").error(msg) from None
                raise sctx.error(msg) from None
    # The other traces differ from the first only in their names: checked (last, so that a
    # scheme's own mistake is said as its) where a set names a link's trace.
    sets = [*plan.overrides, *(o for s in plan.schemes for o in s.overrides),
            *(o for c in plan.clips for o in c.overrides)]  # fmt: skip
    if not only_variants and _names_a_trace(sets):
        check_traces(with_overrides=False)


def _names_a_trace(overrides: Sequence[tuple[str, Any]]) -> bool:
    """Whether ``overrides`` give a link's trace name (``downlink.trace``, or a whole link
    object pasted from a run's header), which a config holds only as the run's own."""
    for path, value in overrides:
        p = config.short_path(path)
        if p in ("downlink.trace", "uplink.trace"):
            return True
        if p in ("downlink", "uplink") and isinstance(value, dict) and "trace" in value:
            return True
    return False


def _variant_name(scheme: str, label: str, value: Any) -> str:
    """``scheme-LABELvalue``; a float as ``:g`` writes it where that is exact (``0.5``,
    ``2``), else in its shortest exact form (``100.00001``), with an exponent's ``+`` left
    out (``2e06``: the name's ``-`` would read as a negative exponent)."""
    if isinstance(value, float):
        v = f"{value:g}"
        if float(v) != value:
            v = repr(value)
        v = v.replace("e+", "e")
    else:
        v = json.dumps(value)
    return safe_label(f"{scheme}-{label}{v.strip(chr(34))}")


def _same(a: Any, b: Any) -> bool:
    if isinstance(a, (int, float)) and isinstance(b, (int, float)) and not isinstance(a, bool):
        return math.isclose(float(a), float(b), rel_tol=1e-12, abs_tol=0.0)
    return bool(a == b)


def _sweeps(ctx: _Ctx, data: dict[str, Any], plan: Plan) -> list[Sweep]:
    out: list[Sweep] = []
    declared = list(plan.schemes)
    for i, entry in enumerate(_entries(ctx, data, "sweep")):
        wctx = ctx.at(f"sweep {i + 1}")
        entry = wctx.table(entry, SWEEP_KEYS, "a [[sweep]]")
        raw_path = wctx.str(entry, "path", required=True)
        try:
            path = config.short_path(raw_path)
        except SluiceError as e:
            raise wctx.error(str(e)) from None
        if path in ("seed", "scheme_name"):
            raise wctx.error(f"cannot sweep '{path}'" + (": use 'seeds'" if path == "seed" else ""))
        values = wctx.list(entry, "values")
        if not values:
            raise wctx.error("'values' must be a non-empty array")
        names = wctx.list(entry, "schemes")
        templates = {s.name: plan._template(s) for s in declared}
        if names is None:
            names = [s.name for s in declared if config.has_path(templates[s.name], path)]
            if not names:
                raise wctx.error(f"no scheme of the plan has the config path '{path}'")
        for n in names:
            if n not in templates:
                raise wctx.error(f"unknown scheme '{n}' (the plan's: {', '.join(templates)})")
            try:
                config.get_path(templates[n], path)
            except SluiceError as e:
                raise wctx.error(f"scheme '{n}': {e}") from None
        for j, v in enumerate(values):
            if any(_same(v, w) for w in values[:j]):
                raise wctx.error(f"'values' lists {json.dumps(v)} twice")
        label = wctx.str(entry, "label", default=path.split(".")[-1][:1].upper())
        if safe_label(label) != label:
            raise wctx.error(f"label {label!r}: letters, digits, '.', '-' and '_' only (it "
                             "names the variants' directories)")  # fmt: skip
        new = sum(not _same(v, config.get_path(templates[n], path)) for n in names
                  for v in values)  # fmt: skip
        _check_size(wctx, plan, len(plan.schemes) + new)
        for n in names:
            parent = plan.scheme(n)
            own = config.get_path(templates[n], path)
            for v in values:
                if _same(v, own):
                    continue  # the scheme's own cells stand for its own value
                vname = _variant_name(n, label, v)
                why = name_problem(vname)
                if why:
                    raise wctx.error(f"variant name {vname!r} {why}: give the sweep a shorter "
                                     "'label'")  # fmt: skip
                if any(s.name == vname for s in plan.schemes):
                    raise wctx.error(f"variant name '{vname}' is taken: give the sweep a "
                                     "'label' (another one if it has one)")  # fmt: skip
                cfg = parent.config if parent.config is not None else config.scheme_config(n)
                # Right after the parent and its earlier variants.
                at = max(i for i, s in enumerate(plan.schemes) if n in (s.name, s.parent)) + 1
                plan.schemes.insert(at, PlanScheme(
                    vname, parent.base, cfg, parent.overrides, parent.encoder, parent=n,
                    sweep=(path, v),
                ))  # fmt: skip
        out.append(Sweep(path, tuple(values), tuple(names), label))
    paths = [w.path for w in out]
    dup = sorted({p for p in paths if paths.count(p) > 1})
    if dup:
        raise ctx.error(f"path swept twice: {', '.join(dup)}")
    return out


# --- running --------------------------------------------------------------------------------


PLAN_FILE = "plan.json"


@dataclass
class MatrixResult:
    """What :func:`run_plan` did: the results table, the cells, what ran and what failed."""

    table: Any  # pandas.DataFrame, one row per finished cell
    cells: list[Cell]
    todo: list[Cell]
    outcome: Outcome | None
    paths: list[Path]  # the results table files written


def check_only(plan: Plan, only: Sequence[str] | None) -> None:
    """:class:`SluiceError` if a name of ``only`` is not a scheme of the plan."""
    names = [s.name for s in plan.schemes]
    bad = [n for n in only or () if n not in names]
    if bad:
        raise SluiceError(f"--only: '{bad[0]}' is not a scheme of {plan.path} "
                          f"(its schemes: {', '.join(names)})")  # fmt: skip


def run_plan(
    plan: Plan,
    results_root: str | os.PathLike[str] = "results",
    *,
    jobs: int | None = None,
    backend: str = "process",
    rerun: str = "missing",
    only: Sequence[str] | None = None,
    dry_run: bool = False,
    progress: bool = True,
    address: str | None = None,
) -> MatrixResult:
    """Runs the cells of ``plan`` that need it (:func:`~sluice.experiments.todo_cells`;
    ``only``: of these schemes) and writes ``<results_root>/<name>/results.csv`` (and
    ``.parquet``) and ``plan.json``. Inputs are checked first (:meth:`Plan.check_inputs`).
    ``dry_run``: decide what would run, run nothing, write nothing. ``address``: the Ray
    cluster to run on (``backend="ray"``, :mod:`sluice.cluster`)."""
    check_only(plan, only)
    plan.check_inputs(warn=progress or dry_run)
    cells = plan.cells(results_root)
    todo = todo_cells([c for c in cells if not only or c.scheme in only], rerun)
    out_dir = results.check_result_dir(Path(results_root) / safe_label(plan.name),
                                       "plan results directory", depth=4)
    if dry_run:
        return MatrixResult(None, cells, todo, None, [])
    if progress:
        print(f"{plan.name}: {len(cells)} cells, {len(todo)} to run", file=sys.stderr)
    out_dir.mkdir(parents=True, exist_ok=True)
    results.write_text(out_dir / PLAN_FILE, json.dumps(plan.to_json(), indent=2))
    outcome = run_cells(todo, jobs=jobs, backend=backend, progress=progress, desc=plan.name,
                        address=address)  # fmt: skip
    df = results_table(cells, plan.name, plan.swept_paths)
    paths = write_table(df, out_dir)
    return MatrixResult(df, cells, todo, outcome, paths)
