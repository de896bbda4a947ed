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

``manifest.json``
    Written last: the size and SHA-256 of every file of the result (``run.jsonl``,
    ``summary.json`` and, for x264 runs, ``stream.264`` and ``delivered.264``). Each file is
    written under a temporary name (``.NAME.tmp<pid>``) and renamed into place, and before
    the first rename the old manifest is replaced by ``{"writing": true}``, so a run
    directory whose manifest says so or does not match its files is an incomplete result
    (:func:`is_complete`), never read as a whole: :func:`load_run` refuses it. Temporary
    files left by a killed writer are removed by the next write into the directory. (Run
    directories written before the manifest existed, which have none, are accepted when
    the last line of their ``run.jsonl`` is whole.)

:func:`load_run` reads a run directory back into pandas DataFrames.
"""

from __future__ import annotations

import functools
import hashlib
import json
import os
import re
import shutil
import stat
import subprocess
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from . import __version__
from .errors import SluiceError, output_file

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
MANIFEST_FILE = "manifest.json"
#: Files of a result besides run.jsonl and summary.json, when a run has them (x264).
STREAM_FILE = "stream.264"
DELIVERED_FILE = "delivered.264"
STREAM_INDEX_FILE = "stream.264.idx"
# A live run's own files (sluice.live): its counters and the stream the receiver reassembled.
LIVE_FILE = "live.json"
#: A browser run's relay log (one datagram per line) and the pages' raw getStats and events.
RELAY_LOG_FILE = "relay.jsonl"
BROWSER_FILE = "browser.json"
RECEIVED_FILE = "received.264"
# The summary key of a run whose quality scoring failed (the run is kept without scores; a
# matrix runs the cell again).
QUALITY_ERROR_KEY = "quality_error"
# Files a run may have of its own: an older run's that the new result lacks are removed.
RUN_OWN_FILES = (STREAM_FILE, STREAM_INDEX_FILE, DELIVERED_FILE, LIVE_FILE, RECEIVED_FILE,
                 RELAY_LOG_FILE, BROWSER_FILE)  # fmt: skip
_TMP_RE = re.compile(r"^\.(?P<name>.+)\.tmp(?P<pid>\d+)(\.idx)?$")

@functools.lru_cache(maxsize=1)
def record_columns() -> dict[str, list[str]]:
    """The fixed columns of the ``frame``, ``skip`` and ``sample`` records, in file order: the
    core's record schema (``sluice_core::metrics::RECORD_SCHEMA``, checked there against the
    records' serialisation). Each run adds its components' named columns after them."""
    from .errors import core

    return {k: list(v) for k, v in json.loads(core().record_schema()).items()}


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
    live: dict[str, Any] | None = None,
) -> dict[str, Any]:
    """A result header, keys in the format's fixed order; ``live``: a live run's settings
    that the run config does not hold (transport, the relay's garbage and spoof faults,
    endpoint restarts), last, only in a live run's header."""
    sha, dirty = git_info()
    out = {
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
    if live is not None:
        out["live"] = live
    return out


def _dumps(obj: Any) -> str:
    # Insertion order is the fixed order (header above; frames and samples in the core's
    # field order). NaN/inf are not JSON: refuse rather than write an unreadable file.
    return json.dumps(obj, separators=(",", ":"), allow_nan=False)


def temp_path(path: str | os.PathLike[str]) -> Path:
    """Where ``path`` is written before it is renamed into place: ``.NAME.tmp<pid>`` beside
    it (removed on any error or interrupt; a killed writer's is removed by the next write)."""
    p = Path(path)
    return p.with_name(f".{p.name}.tmp{os.getpid()}")


def pid_alive(pid: int) -> bool:
    """Whether process ``pid`` (of this machine) still runs: the owner of a temporary file."""
    if pid == os.getpid():
        return True
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except OSError:
        return True
    return True


def clean_stale_temps(run_dir: str | os.PathLike[str]) -> list[Path]:
    """Removes the temporary files a killed writer left in ``run_dir`` (those of processes
    no longer alive); returns them."""
    removed = []
    try:
        entries = list(Path(run_dir).iterdir())
    except OSError:
        return removed
    for f in entries:
        m = _TMP_RE.match(f.name)
        if m and f.is_file() and not pid_alive(int(m["pid"])):
            f.unlink(missing_ok=True)
            removed.append(f)
    return removed


#: Files that only Sluice writes: a directory holding one (or a temporary file of Sluice's),
#: or holding nothing but directories that are Sluice's (:func:`is_own_dir`), is Sluice's
#: own, and a run, compare, plan or live part may write into it. (summary.json is not among
#: them: other programs write files of that name.)
OWN_FILES = (MANIFEST_FILE, RUN_FILE, LIVE_FILE, "compare.md", "plan.json", "results.csv",
             "experiment-spec.json", "part.json", "events.json", RELAY_LOG_FILE)  # fmt: skip


def not_a_result_file(path: str | os.PathLike[str], what: str) -> Path:
    """``path`` (a user's ``--out`` file, :func:`~sluice.errors.output_file`) unless it is one
    of the files of a result in its folder (a run's records, summary, manifest, stream or
    logs, a plan's or compare's tables): writing a page or a trace there would destroy the
    data it was made from. Raises :class:`SluiceError`."""
    p = output_file(path, what)
    own = {*OWN_FILES, SUMMARY_FILE, *RUN_OWN_FILES, *COMPARE_FILES[:2], *_PLAN_FILES}
    d = p.parent
    is_result = any((d / f).is_file() for f in (MANIFEST_FILE, RUN_FILE, "plan.json",
                                                 "summary.csv", "part.json"))  # fmt: skip
    if p.name in own and p.is_file() and is_result:
        raise SluiceError(f"{what} {path} is a file of the result in {d}: writing it would "
                          "destroy the data; give another path")  # fmt: skip
    return p


#: Files Sluice writes beside runs it did not make (``sluice report``, ``sluice plot --out``
#: into the directory): allowed there, but not enough to make a directory Sluice's.
_BESIDE_FILES = ("report.html", "latency_cdf.png", "timeseries.png")


def is_own_dir(d: Path, depth: int = 2) -> bool:
    """Whether directory ``d`` is recognisably Sluice's: it holds one of :data:`OWN_FILES`
    (or a temporary file of one being written), or, up to ``depth`` levels down, nothing
    but directories that are Sluice's themselves, or empty, at least one of them Sluice's,
    and the pages and plots Sluice writes of them (a compare directory whose runs are there
    but not yet its ``compare.md``, the parts of a live session, the seeds of a run and
    their ``report.html``). A directory with a file of anyone else's beside
    such directories is not (``--out .`` in a folder of notes and old results)."""
    try:
        entries = list(os.scandir(d))
    except OSError:
        return False
    for e in entries:
        if e.name in OWN_FILES or _TMP_RE.match(e.name):
            return True
    if depth <= 0 or not entries or len(entries) > 1000:
        return False
    own = False
    for e in entries:
        if not e.is_dir(follow_symlinks=False):
            if e.name in _BESIDE_FILES:  # a page or plot Sluice wrote of the runs below
                continue
            return False
        if is_own_dir(Path(e.path), depth - 1):
            own = True
            continue
        with os.scandir(e.path) as inside:
            if next(inside, None) is not None:  # a directory of someone else's
                return False
    return own


def check_result_dir(
    path: str | os.PathLike[str], what: str = "output directory", depth: int = 2
) -> Path:
    """``path`` if a result may be written into it: it does not exist yet (it is created
    fresh), or it is an empty directory, or one that is recognisably Sluice's own
    (:func:`is_own_dir`, ``depth`` levels down: 4 for a plan's directory).
    Otherwise (a file, a FIFO or device, a directory of other files, such as ``--out .``)
    a :class:`SluiceError`: nothing of someone else's is overwritten."""
    d = Path(path)
    try:
        st = os.stat(d)
    except FileNotFoundError:
        return d
    except OSError as e:
        raise SluiceError(f"cannot use {what} {d}: {e.strerror or e}") from None
    if not stat.S_ISDIR(st.st_mode):
        kind = "a file" if stat.S_ISREG(st.st_mode) else "a FIFO, socket or device"
        raise SluiceError(f"{what} {d} is {kind}, not a directory")
    try:
        empty = not any(os.scandir(d))
    except OSError as e:
        raise SluiceError(f"cannot use {what} {d}: {e.strerror or e}") from None
    if not empty and not is_own_dir(d, depth):
        raise SluiceError(
            f"{what} {d} is not a sluice result directory (it holds other files, or "
            f"results beside them): give a new or empty directory"
        )
    return d


#: How ``compare.md`` names the command that made the compare (read back by reports).
MADE_BY = "made by: "


def made_by(d: str | os.PathLike[str]) -> str | None:
    """The command that made the compare in ``d``, as its ``compare.md`` says (None for
    other directories, or a compare from before it said)."""
    try:
        text = (Path(d) / "compare.md").read_text("utf-8")
    except (OSError, UnicodeDecodeError):
        return None
    for line in text.splitlines():
        if line.startswith(MADE_BY + "`") and line.endswith("`"):
            return line[len(MADE_BY) + 1 : -1]
    return None


#: The folder of one seed's run (``run --seeds``, ``compare --seeds``): ``s1``, ``s2``.
SEED_DIR = re.compile(r"s\d+")
#: What ``sluice compare`` writes beside its schemes' run directories.
COMPARE_FILES = ("compare.md", "summary.csv", *_BESIDE_FILES)
#: The files at the top of a plan's results (``sluice matrix``).
_PLAN_FILES = ("plan.json", "results.csv", "results.parquet", "experiment-spec.json")


def _result_subdirs(d: Path) -> list[Path]:
    """The sub-directories of ``d`` that hold Sluice's results (runs, their seeds)."""
    try:
        entries = [Path(e.path) for e in os.scandir(d) if e.is_dir(follow_symlinks=False)]
    except OSError:
        return []
    return sorted(e for e in entries if is_own_dir(e))


def check_run_target(d: Path, seeds: bool = False) -> None:
    """``sluice run`` writes a single run, or with ``seeds`` one folder per seed (``s1``,
    ``s2``), only into a directory that holds the same kind of result: a report or plot of
    a directory holding two kinds (a run beside a compare, a plan's results or seeds) would
    show one of them. A :class:`SluiceError` if it does not."""
    check_result_dir(d)  # someone else's files first
    if (d / "part.json").is_file():
        raise SluiceError(f"{d} is one endpoint's part of a live session: give the run a "
                          "directory of its own")  # fmt: skip
    if seeds and is_run_dir(d):
        raise SluiceError(f"{d} holds a single run: runs of several seeds go into a new "
                          "directory or one that holds seeds")  # fmt: skip
    inside = _result_subdirs(d)
    if seeds:
        others = [p for p in inside if not SEED_DIR.fullmatch(p.name)]
        if others or any((d / f).is_file() for f in ("compare.md", "summary.csv", *_PLAN_FILES)):
            names = ", ".join(p.name for p in others[:4]) or "a compare's or plan's files"
            raise SluiceError(f"{d} holds other results ({names}): runs of several seeds go "
                              "into a new directory or one that holds seeds")  # fmt: skip
    elif inside and not is_run_dir(d):
        names = ", ".join(p.name for p in inside[:4]) + (", ..." if len(inside) > 4 else "")
        raise SluiceError(
            f"{d} holds other runs in its folders ({names}): a run goes into a new directory "
            "or one that holds a single run"
        )


def _is_run_folder(p: str | os.PathLike[str]) -> bool:
    """A run's directory, or one a run was writing when it was stopped (nothing in it but
    the temporary files of its results), or empty."""
    if is_run_dir(p) or (Path(p) / MANIFEST_FILE).is_file():
        return True
    try:
        return all(e.is_file(follow_symlinks=False) and _TMP_RE.match(e.name)
                   for e in os.scandir(p))  # fmt: skip
    except OSError:
        return False


def _is_runs_folder(p: Path) -> bool:
    """Whether ``p`` is a run's directory (:func:`_is_run_folder`), or a directory of a
    run's seeds (``s1``, ``s2``: nothing in it but such runs): what a compare writes per
    scheme."""
    if _is_run_folder(p):
        return True
    try:
        entries = list(os.scandir(p))
    except OSError:
        return False
    return bool(entries) and all(
        e.is_dir(follow_symlinks=False) and SEED_DIR.fullmatch(e.name)
        and _is_run_folder(e.path)
        for e in entries
    )


def _earlier_compare(d: Path) -> list[str] | None:
    """The folders the compare in ``d`` wrote (its schemes', from its summary.csv), or None
    if ``d`` holds no compare of Sluice's."""
    try:
        head = (d / "compare.md").read_text("utf-8")[:64]
    except (OSError, UnicodeDecodeError):
        head = ""
    rows = compare_rows(d) if (d / "summary.csv").is_file() else []
    if not head.startswith("# sluice compare:") and not rows:
        return None
    names = {Path(r["run_dir"]).parts[0] for r in rows if r.get("run_dir")}
    names |= {r["scheme"] for r in rows if r.get("scheme")}
    # A folder of d's own, by a plain name (not /, .., a path).
    return sorted(n for n in names if n and n not in (".", "..") and "/" not in n)


@dataclass
class EarlierCompare:
    """What a compare into a directory replaces (:func:`prepare_compare_dir`): the folders
    of runs and the files of an earlier compare there."""

    folders: list[Path]
    files: list[Path]

    def remove(self) -> None:
        for p in self.folders:
            try:
                shutil.rmtree(p)
            except OSError as e:  # its file name is relative to the folder being removed
                raise SluiceError(f"cannot remove the earlier run in {p} to replace it: "
                                  f"{e.strerror or e}") from None
        for f in self.files:
            f.unlink(missing_ok=True)


def prepare_compare_dir(d: Path, schemes: Sequence[str]) -> EarlierCompare:
    """Checks that ``sluice compare`` of ``schemes`` may write into ``d``, and what it
    replaces there (removed once the compare's own checks passed), so that its report and
    plots show this compare's runs only. Only what a compare writes is replaced: the
    folders the earlier compare's summary.csv names and the folders named for these
    schemes, each a run or a run's seeds, and the earlier compare's files; a folder of
    anything else is left, or refused where this compare would write into it. Refused (a
    :class:`SluiceError`): a run's or a plan's directory, a ``compare.md`` Sluice did not
    write, and runs that are neither the earlier compare's nor these schemes' (a run's
    seeds)."""
    if not d.is_dir():
        return EarlierCompare([], [])
    if is_run_dir(d) or (d / MANIFEST_FILE).is_file():
        raise SluiceError(f"{d} is a run's directory, not a compare's: give a new --out")
    if any((d / f).is_file() for f in _PLAN_FILES):
        raise SluiceError(f"{d} holds a plan's results, not a compare: give a new --out")
    found = _earlier_compare(d)
    if found is None and (d / "compare.md").exists():
        raise SluiceError(f"{d / 'compare.md'} is not a compare of Sluice's, and this compare "
                          "would write over it: give a new --out")  # fmt: skip
    gone = []
    for name in dict.fromkeys([*(found or []), *schemes]):
        p = d / name
        if not p.exists():
            continue
        if p.is_dir() and not p.is_symlink() and _is_runs_folder(p):
            gone.append(p)
        elif name in schemes:
            raise SluiceError(f"{p} is not a run of Sluice's, and this compare would write its "
                              f"{name} runs there: give a new --out")  # fmt: skip
    strangers = [p.name for p in _result_subdirs(d) if p not in gone and _is_runs_folder(p)]
    if strangers:
        raise SluiceError(
            f"{d} holds runs that are not of a compare of these schemes "
            f"({', '.join(strangers[:4])}{', ...' if len(strangers) > 4 else ''}): give a "
            "new --out"
        )
    files = [d / f for f in COMPARE_FILES] if found is not None else []
    return EarlierCompare(gone, files)


def _file_entry(path: Path) -> dict[str, Any]:
    h = hashlib.sha256()
    n = 0
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            h.update(block)
            n += len(block)
    return {"bytes": n, "sha256": h.hexdigest()}


def _write_lines(path: Path, lines: Iterable[str], target: Path | None = None) -> None:
    """Writes ``lines`` into the new file ``path`` (the temporary name of ``target``); a
    failure (a full disk, a quota) is a :class:`SluiceError` naming the target, and the file
    is removed."""
    try:
        with open(path, "w", encoding="utf-8", newline="\n") as f:
            for line in lines:
                f.write(line)
                f.write("\n")
    except OSError as e:
        path.unlink(missing_ok=True)
        raise SluiceError(f"cannot write {target or path}: {e.strerror or e}") from None


def _atomic_write(path: Path, lines: Iterable[str]) -> None:
    output_file(path, "result file")
    tmp = temp_path(path)
    try:
        _write_lines(tmp, lines, path)
        os.replace(tmp, path)
    finally:
        tmp.unlink(missing_ok=True)


def write_text(path: Path, text: str) -> None:
    """Writes ``text`` to ``path`` (a new path or a regular file, :func:`output_file`) under
    a temporary name renamed into place: a reader never sees half of it, and a full disk is
    one :class:`SluiceError` naming the file."""
    _atomic_write(path, [text.removesuffix("\n")])


def write_run(
    run_dir: str | os.PathLike[str],
    header: dict[str, Any],
    frames: list[dict[str, Any]],
    samples: list[dict[str, Any]],
    summary: dict[str, Any],
    quality: list[dict[str, Any]] | None = None,
    skips: list[dict[str, Any]] | None = None,
    extra: dict[str, Path] | None = None,
) -> Path:
    """Writes ``run.jsonl``, ``summary.json`` and ``manifest.json`` into ``run_dir``
    (created if needed) as one result (see the module doc). ``extra``: files written
    elsewhere during the run (name in the run directory -> where it is now, e.g. the x264
    stream under its temporary name), moved in as part of the result.

    Every byte is written first, under temporary names (the files, the manifest and the
    pending marker); only renames follow, which need no space. So a full disk leaves the
    directory as it was (an older result still whole, a new directory removed) and is one
    :class:`SluiceError` naming the file that did not fit."""
    d = check_result_dir(run_dir)
    created = [p for p in (d, *d.parents) if not p.exists()]
    try:
        d.mkdir(parents=True, exist_ok=True)
    except OSError as e:
        raise SluiceError(f"cannot create output directory {d}: {e.strerror or e}") from None
    clean_stale_temps(d)
    extra = dict(extra or {})
    for name in (RUN_FILE, SUMMARY_FILE, MANIFEST_FILE, *extra):
        output_file(d / name, "result file")

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

    staged = {RUN_FILE: temp_path(d / RUN_FILE), SUMMARY_FILE: temp_path(d / SUMMARY_FILE)}
    pending = temp_path(d / f"{MANIFEST_FILE}.pending")
    manifest = temp_path(d / MANIFEST_FILE)
    try:
        try:
            _write_lines(staged[RUN_FILE], lines(), d / RUN_FILE)
            _write_lines(staged[SUMMARY_FILE], [json.dumps(summary, indent=2, allow_nan=False)],
                         d / SUMMARY_FILE)  # fmt: skip
            _write_lines(pending, [json.dumps({"writing": True})], d / MANIFEST_FILE)
            files = {n: _file_entry(p) for n, p in {**staged, **extra}.items()}
            _write_lines(manifest, [json.dumps({"files": files}, indent=2)], d / MANIFEST_FILE)
        except BaseException:
            for p in (*staged.values(), pending, manifest):
                p.unlink(missing_ok=True)
            for p in created:  # deepest first; only what this call made
                if p.is_dir() and not any(p.iterdir()):
                    p.rmdir()
            raise
        # Renames only. The old result stops being one before any of its files is replaced
        # (atomically: a pending manifest replaces the old one, so a killed writer's
        # directory is never taken for one written before manifests existed).
        os.replace(pending, d / MANIFEST_FILE)
        for name, src in staged.items():
            os.replace(src, d / name)
        for name in RUN_OWN_FILES:
            if name not in extra:
                (d / name).unlink(missing_ok=True)  # an older run's, not part of this result
        for name, src in extra.items():
            os.replace(src, d / name)
        os.replace(manifest, d / MANIFEST_FILE)
    finally:
        for p in (*staged.values(), pending, manifest):
            p.unlink(missing_ok=True)
    return d


def _read_manifest(d: Path) -> dict[str, Any] | None:
    try:
        obj = json.loads((d / MANIFEST_FILE).read_text(encoding="utf-8"))
    except FileNotFoundError:
        return None
    except (OSError, UnicodeDecodeError, json.JSONDecodeError):
        return {}
    if isinstance(obj, dict) and obj.get("writing") is True:
        return {"": "writing"}
    files = obj.get("files") if isinstance(obj, dict) else None
    return files if isinstance(files, dict) else {}


def incomplete_reason(run_dir: str | os.PathLike[str], checksums: bool = True) -> str | None:
    """Why ``run_dir`` does not hold a complete result, or None if it does: its manifest
    lists every file with the size and (``checksums``) the SHA-256 it has. A directory
    written before manifests existed: ``run.jsonl`` and ``summary.json`` present and the
    last line of ``run.jsonl`` a whole JSON object."""
    d = Path(run_dir)
    if not (d / RUN_FILE).is_file():
        return f"no {RUN_FILE}"
    if not (d / SUMMARY_FILE).is_file():
        return f"no {SUMMARY_FILE}"
    files = _read_manifest(d)
    if files is None:
        return _legacy_problem(d)
    if files.get("") == "writing":
        return "its writing was interrupted"
    if RUN_FILE not in files or SUMMARY_FILE not in files:
        return f"{MANIFEST_FILE} is damaged"
    for name, want in files.items():
        p = d / name
        if not p.is_file():
            return f"{name} is missing"
        if not isinstance(want, dict) or p.stat().st_size != want.get("bytes"):
            return f"{name} does not match {MANIFEST_FILE} (size)"
        if checksums and _file_entry(p).get("sha256") != want.get("sha256"):
            return f"{name} does not match {MANIFEST_FILE} (checksum)"
    return None


def _legacy_problem(d: Path) -> str | None:
    path = d / RUN_FILE
    try:
        with open(path, "rb") as f:
            size = f.seek(0, os.SEEK_END)
            f.seek(max(0, size - (1 << 20)))
            tail = f.read()
        if not tail.endswith(b"\n"):
            return f"{RUN_FILE} ends in the middle of a line"
        last = tail.rstrip(b"\n").rsplit(b"\n", 1)[-1]
        if not isinstance(json.loads(last.decode("utf-8")), dict):
            return f"{RUN_FILE}: its last line is not a record"
    except (OSError, UnicodeDecodeError, json.JSONDecodeError, RecursionError) as e:
        return f"{RUN_FILE} is damaged ({type(e).__name__})"
    return None


def is_complete(run_dir: str | os.PathLike[str], checksums: bool = True) -> bool:
    """Whether ``run_dir`` holds a complete result (:func:`incomplete_reason`)."""
    return incomplete_reason(run_dir, checksums) is None


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


def compare_rows(d: str | os.PathLike[str]) -> list[dict[str, str]]:
    """The rows of ``sluice compare``'s ``summary.csv`` in directory ``d`` (one per run, in
    the order compare ran them: each scheme's seeds as given), or none without it."""
    import csv

    p = Path(d) / "summary.csv"
    if not p.is_file():
        return []
    try:
        with p.open(encoding="utf-8") as f:
            return [r for r in csv.DictReader(f) if r.get("scheme")]
    except (OSError, ValueError, csv.Error) as e:  # not UTF-8 (saved by a spreadsheet?)
        raise SluiceError(f"cannot read {p}: {e}") from None


def no_run_file(run_dir: str | os.PathLike[str]) -> str:
    """Why ``run_dir`` has no run to read, and what to do where that is known."""
    d = Path(run_dir)
    if (d / "part.json").is_file():
        return (f"{run_dir} is one endpoint's part of a live session: `sluice live merge` "
                "makes the run of a session's parts")  # fmt: skip
    if (d / "plan.json").is_file():
        return (f"{run_dir} holds a plan's results, its runs in folders below it: give one of "
                f"them (each folder holding a run.jsonl, as `find {run_dir} -name run.jsonl` "
                "lists), or use `sluice report` on it")
    if (d / "compare.md").is_file() or _result_subdirs(d):
        return (f"{run_dir} holds several runs in its folders, not one run: give one of "
                "them, or use `sluice report` on it")  # fmt: skip
    return f"not a sluice run directory (no {RUN_FILE}): {run_dir}"


def read_header(run_dir: str | os.PathLike[str]) -> dict[str, Any]:
    """The header of ``run_dir/run.jsonl``, checked (cheap: reads one line)."""
    path = Path(run_dir) / RUN_FILE
    try:
        with open(path, encoding="utf-8") as f:
            first = f.readline()
    except FileNotFoundError:
        raise SluiceError(no_run_file(run_dir)) from None
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
    if path.is_file() and _read_manifest(d) is not None:
        why = incomplete_reason(d)
        if why:
            raise SluiceError(f"{d}: not a complete result ({why}); run it again")
    header: dict[str, Any] | None = None
    frames: list[dict[str, Any]] = []
    samples: list[dict[str, Any]] = []
    scores: list[dict[str, Any]] = []
    skipped: list[dict[str, Any]] = []
    try:
        f = open(path, encoding="utf-8")
    except FileNotFoundError:
        raise SluiceError(no_run_file(run_dir)) from None
    except OSError as e:
        raise SluiceError(f"cannot read {path}: {e.strerror or e}") from None
    with f:
        try:
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
        except UnicodeDecodeError as e:
            raise SluiceError(f"{path}: not a sluice result file (not UTF-8 text: {e.reason} "
                              f"at byte {e.start} of a block)") from None  # fmt: skip
    if header is None:
        raise SluiceError(f"{path}: empty result file")

    summary: dict[str, Any] | None = None
    spath = d / SUMMARY_FILE
    if spath.is_file():
        try:
            summary = json.loads(spath.read_text(encoding="utf-8"))
        except (OSError, UnicodeDecodeError, json.JSONDecodeError) as e:
            raise SluiceError(f"cannot read {spath}: {e}") from None
        if not isinstance(summary, dict):
            raise SluiceError(f"{spath}: expected a JSON object (a run summary)")
    for key in ("config", "trace", "uplink_trace"):
        if header.get(key) is not None and not isinstance(header.get(key), dict):
            raise SluiceError(f"{path}:1: header field {key!r} must be an object")

    def frame(records: list[dict[str, Any]], columns: list[str]) -> pd.DataFrame:
        df = pd.DataFrame.from_records(records)
        if df.empty:
            return pd.DataFrame(columns=columns)
        extra = [c for c in df.columns if c not in columns]
        return df.reindex(columns=[*columns, *extra])

    def numeric(df: pd.DataFrame, what: str) -> pd.DataFrame:
        # Every known column is numeric (or boolean, or null); a mistyped file is named.
        for c in (c for c in cols[what] if c != "reason"):  # the skip's reason is text
            if c in df.columns and not pd.api.types.is_numeric_dtype(df[c]):
                bad = df[c][df[c].map(lambda v: v is not None and not isinstance(v, (int, float)))]
                bad = bad[bad.notna()]
                if len(bad):
                    raise SluiceError(
                        f"{path}: {what} field {c!r} must be a number, got {bad.iloc[0]!r}"
                    )
        return df

    cols = record_columns()
    frames_df = numeric(frame(frames, cols["frame"]), "frame")
    if header.get("schema_version", 0) < 3 and not frames_df.empty:
        frames_df["source_index"] = frames_df["frame_id"]  # one encode per slot then
    return Run(
        path=d,
        header=header,
        frames=frames_df,
        samples=numeric(frame(samples, cols["sample"]), "sample"),
        summary=summary,
        quality=pd.DataFrame.from_records(scores) if scores else None,
        skips=numeric(frame(skipped, cols["skip"]), "skip"),
    )
