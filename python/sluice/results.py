"""The versioned result format.

A run directory holds:

``run.jsonl``
    Raw results, written once and never rewritten by analysis. Line 1 is the header::

        {"record": "header", "schema_version": 3, "sluice_version": ..., "git_sha": ...,
         "git_dirty": ..., "seed": ..., "scheme": ..., "config": <resolved RunConfig>,
         "trace": {"name", "sha256", "mean_rate_bps"}, "uplink_trace": {...} | null}

    then one ``{"record": "frame", ...}`` line per encoded frame, one
    ``{"record": "skip", "source_index", "capture_us", "reason"}`` line per capture slot
    that was never encoded, one ``{"record": "sample", ...}`` line per time-series sample
    and, for runs on real video scored with ``--quality``, one
    ``{"record": "quality", "slot", "shown_frame", "vmaf", "ssim", "psnr"}`` line per
    scored frame slot (what the viewer saw in the place of source frame ``slot``). The file
    holds no wall-clock time and its keys are in a fixed order, so the same seed, config and
    code give a byte-identical file (with the model encoder, or x264 with modeled encode
    time).

``summary.json``
    The run summary (derived; may be rewritten).

:func:`load_run` reads a run directory back into pandas DataFrames.
"""

from __future__ import annotations

import functools
import json
import os
import subprocess
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from . import __version__
from .errors import SluiceError

if TYPE_CHECKING:
    import pandas as pd

# 2: frames gained `complexity` and `predicted_relative_size`, samples the pacer's
# `pacer_bucket_bytes`, `pacer_tokens_bytes`, `pacer_predicted_queue_bytes` and
# `pacer_link_capacity_bps` (version 1 files simply lack them).
# 3: frames gained `source_index` (the capture slot; older files: the frame id),
# `ref_frame_id`, `pacer_head_us` and `purged`; `skip` records list capture slots never
# encoded; the congestion controller's, pacer's and encoder controller's state are named
# columns each run has only when its components publish them (`cc_*`, `pacer_*`, ACE-C's
# `complexity`), no longer null columns in every run.
SCHEMA_VERSION = 3
SUPPORTED_SCHEMA_VERSIONS = (1, 2, 3)
RUN_FILE = "run.jsonl"
SUMMARY_FILE = "summary.json"

# The fixed frame columns; each run adds its encoder controller's named columns.
FRAME_COLUMNS = [
    "frame_id", "source_index", "capture_us", "encode_start_us", "encode_end_us", "size_bytes",
    "is_keyframe", "qp", "target_rate_bps", "packets", "ref_frame_id", "first_packet_sent_us",
    "last_packet_sent_us", "pacer_head_us", "completed_us", "displayed_us", "latency_us",
    "discarded", "purged",
]  # fmt: skip
SKIP_COLUMNS = ["source_index", "capture_us", "reason"]
# The fixed sample columns; each run adds the named debug columns its congestion controller
# and pacer publish (`cc_*`, `pacer_*`), whatever they are.
SAMPLE_COLUMNS = [
    "t_us", "target_rate_bps", "encoder_rate_bps", "pacing_rate_bps", "link_capacity_bps",
    "send_rate_bps",
    "delivered_rate_bps", "queue_bytes", "queue_packets", "queue_delay_us", "pacer_queue_bytes",
    "pacer_delay_us", "rtt_us", "in_flight_bytes", "cwnd_bytes", "lost_packets",
]  # fmt: skip


@functools.lru_cache(maxsize=1)
def git_info() -> tuple[str, bool | None]:
    """(SHA, dirty) of the checkout this package is imported from; ("unknown", None) if none.

    Untracked files do not count as dirty (results written inside the checkout must not
    change the next run's header). Never raises.
    """
    src = Path(__file__).resolve().parent

    def git(*args: str) -> str | None:
        try:
            out = subprocess.run(
                ["git", *args], cwd=src, capture_output=True, text=True, timeout=10, check=True
            )
        except (OSError, subprocess.SubprocessError):
            return None
        return out.stdout.strip()

    sha = git("rev-parse", "HEAD")
    if not sha:
        return "unknown", None
    status = git("status", "--porcelain", "--untracked-files=no")
    return sha, (None if status is None else bool(status))


def make_header(
    *,
    seed: int,
    scheme: str,
    config: dict[str, Any],
    trace: dict[str, Any] | None,
    uplink_trace: dict[str, Any] | None,
) -> dict[str, Any]:
    """A result header, keys in the format's fixed order."""
    sha, dirty = git_info()
    return {
        "record": "header",
        "schema_version": SCHEMA_VERSION,
        "sluice_version": __version__,
        "git_sha": sha,
        "git_dirty": dirty,
        "seed": seed,
        "scheme": scheme,
        "config": config,
        "trace": trace,
        "uplink_trace": uplink_trace,
    }


def _dumps(obj: Any) -> str:
    # Insertion order is the fixed order (header above; frames and samples in the core's
    # field order). NaN/inf are not JSON: refuse rather than write an unreadable file.
    return json.dumps(obj, separators=(",", ":"), allow_nan=False)


def _atomic_write(path: Path, lines: Iterable[str]) -> None:
    tmp = path.with_name(f".{path.name}.tmp{os.getpid()}")
    try:
        with open(tmp, "w", encoding="utf-8", newline="\n") as f:
            for line in lines:
                f.write(line)
                f.write("\n")
        os.replace(tmp, path)
    finally:
        tmp.unlink(missing_ok=True)


def write_run(
    run_dir: str | os.PathLike[str],
    header: dict[str, Any],
    frames: list[dict[str, Any]],
    samples: list[dict[str, Any]],
    summary: dict[str, Any],
    quality: list[dict[str, Any]] | None = None,
    skips: list[dict[str, Any]] | None = None,
) -> Path:
    """Writes ``run.jsonl`` and ``summary.json`` into ``run_dir`` (created if needed)."""
    d = Path(run_dir)
    try:
        d.mkdir(parents=True, exist_ok=True)
    except OSError as e:
        raise SluiceError(f"cannot create output directory {d}: {e.strerror or e}") from None

    def lines() -> Iterable[str]:
        yield _dumps(header)
        for fr in frames:
            yield _dumps({"record": "frame", **fr})
        for sk in skips or []:
            yield _dumps({"record": "skip", **sk})
        for s in samples:
            yield _dumps({"record": "sample", **s})
        for q in quality or []:
            yield _dumps({"record": "quality", **q})

    _atomic_write(d / RUN_FILE, lines())
    write_summary(d, summary)
    return d


def write_summary(run_dir: str | os.PathLike[str], summary: dict[str, Any]) -> Path:
    path = Path(run_dir) / SUMMARY_FILE
    _atomic_write(path, [json.dumps(summary, indent=2, allow_nan=False)])
    return path


@dataclass
class Run:
    """A loaded run: header dict, frames and samples DataFrames, summary dict (or None)."""

    path: Path
    header: dict[str, Any]
    frames: pd.DataFrame
    samples: pd.DataFrame
    summary: dict[str, Any] | None
    quality: pd.DataFrame | None = None
    skips: pd.DataFrame | None = None

    @property
    def scheme(self) -> str:
        return str(self.header.get("scheme", "?"))

    @property
    def seed(self) -> Any:
        return self.header.get("seed")

    @property
    def trace_name(self) -> str:
        t = self.header.get("trace") or {}
        return str(t.get("name") or "unlimited")

    @property
    def config(self) -> dict[str, Any]:
        return self.header.get("config") or {}


def is_run_dir(path: str | os.PathLike[str]) -> bool:
    return (Path(path) / RUN_FILE).is_file()


def read_header(run_dir: str | os.PathLike[str]) -> dict[str, Any]:
    """The header of ``run_dir/run.jsonl``, checked (cheap: reads one line)."""
    path = Path(run_dir) / RUN_FILE
    try:
        with open(path, encoding="utf-8") as f:
            first = f.readline()
    except FileNotFoundError:
        raise SluiceError(f"not a sluice run directory (no {RUN_FILE}): {run_dir}") from None
    except OSError as e:
        raise SluiceError(f"cannot read {path}: {e.strerror or e}") from None
    return _check_header(_parse_line(first, path, 1), path)


def _parse_line(line: str, path: Path, lineno: int) -> dict[str, Any]:
    try:
        obj = json.loads(line)
    except json.JSONDecodeError as e:
        raise SluiceError(f"{path}:{lineno}: malformed JSON ({e.msg})") from None
    if not isinstance(obj, dict):
        raise SluiceError(f"{path}:{lineno}: expected a JSON object")
    return obj


def _check_header(obj: dict[str, Any], path: Path) -> dict[str, Any]:
    if obj.get("record") != "header":
        raise SluiceError(f"{path}:1: expected a header record, not a sluice result file?")
    version = obj.get("schema_version")
    if version not in SUPPORTED_SCHEMA_VERSIONS:
        supported = ", ".join(str(v) for v in SUPPORTED_SCHEMA_VERSIONS)
        hint = (
            "written by a newer sluice; upgrade sluice to read it"
            if isinstance(version, int) and version > SCHEMA_VERSION
            else "not a result format this sluice knows"
        )
        raise SluiceError(
            f"{path}: unsupported result schema_version {version!r} "
            f"(this sluice {__version__} reads {supported}); {hint}"
        )
    return obj


def load_run(run_dir: str | os.PathLike[str]) -> Run:
    """Reads a run directory into a :class:`Run` (frames and samples as DataFrames)."""
    import pandas as pd

    d = Path(run_dir)
    path = d / RUN_FILE
    header: dict[str, Any] | None = None
    frames: list[dict[str, Any]] = []
    samples: list[dict[str, Any]] = []
    scores: list[dict[str, Any]] = []
    skipped: list[dict[str, Any]] = []
    try:
        f = open(path, encoding="utf-8")
    except FileNotFoundError:
        raise SluiceError(f"not a sluice run directory (no {RUN_FILE}): {run_dir}") from None
    except OSError as e:
        raise SluiceError(f"cannot read {path}: {e.strerror or e}") from None
    with f:
        for lineno, line in enumerate(f, start=1):
            if lineno == 1:
                header = _check_header(_parse_line(line, path, 1), path)
                continue
            if not line.strip():
                continue
            obj = _parse_line(line, path, lineno)
            kind = obj.pop("record", None)
            if kind == "frame":
                frames.append(obj)
            elif kind == "sample":
                samples.append(obj)
            elif kind == "quality":
                scores.append(obj)
            elif kind == "skip":
                skipped.append(obj)
            else:
                raise SluiceError(f"{path}:{lineno}: unknown record type {kind!r}")
    if header is None:
        raise SluiceError(f"{path}: empty result file")

    summary: dict[str, Any] | None = None
    spath = d / SUMMARY_FILE
    if spath.is_file():
        try:
            summary = json.loads(spath.read_text(encoding="utf-8"))
        except (OSError, json.JSONDecodeError) as e:
            raise SluiceError(f"cannot read {spath}: {e}") from None

    def frame(records: list[dict[str, Any]], columns: list[str]) -> pd.DataFrame:
        df = pd.DataFrame.from_records(records)
        if df.empty:
            return pd.DataFrame(columns=columns)
        extra = [c for c in df.columns if c not in columns]
        return df.reindex(columns=[*columns, *extra])

    frames_df = frame(frames, FRAME_COLUMNS)
    if header.get("schema_version", 0) < 3 and not frames_df.empty:
        frames_df["source_index"] = frames_df["frame_id"]  # one encode per slot then
    return Run(
        path=d,
        header=header,
        frames=frames_df,
        samples=frame(samples, SAMPLE_COLUMNS),
        summary=summary,
        quality=pd.DataFrame.from_records(scores) if scores else None,
        skips=frame(skipped, SKIP_COLUMNS),
    )
