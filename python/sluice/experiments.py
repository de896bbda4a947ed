"""Running a matrix of cells resumably, and its results table.

A :class:`Cell` is one run (a :class:`~sluice.run.RunSpec` with a fixed output directory)
and what it stands for (scheme, trace, clip, seed, the swept config values). Plans
(:mod:`sluice.plan`) make the cells; :func:`run_cells` runs those without results on a
process pool or Ray (:func:`~sluice.pool.run_many`) and :func:`results_table` gives one row
per finished cell (:func:`write_table`: ``results.csv``, and ``results.parquet`` when pyarrow
is importable).

Resuming: before a cell runs, its ``experiment-spec.json`` (the spec, minus where it writes)
is written and any old ``summary.json`` removed; a cell is done when its directory holds a
complete result (:func:`sluice.results.incomplete_reason`: the manifest matches the files'
sizes) next to a matching ``experiment-spec.json``. An interrupted matrix therefore reruns
only the cells that had not finished, a damaged result is run again (with a warning), and a
changed setting (duration, scheme config, ...) reruns the cells it affects.
"""

from __future__ import annotations

import functools
import hashlib
import json
import os
import re
import sys
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from . import metrics, results
from .errors import SluiceError
from .pool import RunFailure, run_many
from .run import RunSpec

if TYPE_CHECKING:
    import pandas as pd

SPEC_FILE = "experiment-spec.json"
TABLE_CSV = "results.csv"
TABLE_PARQUET = "results.parquet"
RERUN_MODES = ("missing", "stale", "all")
# RunSpec fields that do not change a run's results.
_NOT_IN_KEY = ("out_dir", "progress", "cache_dir", "keep_streams")

#: The label columns of the results table; then one column per swept config path, the
#: metrics (every one of :data:`sluice.metrics.METRICS`, then the rest of the summary,
#: :func:`sluice.metrics.summary_row`) and :data:`TAIL_COLUMNS`.
LABEL_COLUMNS = ["plan", "scheme", "base_scheme", "trace", "network", "clip", "seed"]
TAIL_COLUMNS = ["run_dir", "git_sha"]
#: Columns without which a results table cannot be read as one (:func:`read_table`).
REQUIRED_COLUMNS = ("scheme", "trace", "network", "seed", "run_dir")


#: The longest name that becomes one component of a path (a plan's name, a scheme, trace or
#: clip label, a sweep variant's name): far below the file systems' 255 bytes, with room for
#: the prefixes and suffixes Sluice adds (docs/cli.md, "Limits").
MAX_NAME_CHARS = 100


def name_problem(name: str) -> str | None:
    """Why ``name`` cannot be one component of a path Sluice writes (a path separator, ``.``
    or ``..``, a leading dot, too long), or None."""
    if not name:
        return "is empty"
    if any(c in name for c in "/\\\0"):
        return "has a path separator"
    if name in (".", ".."):
        return f"is '{name}'"
    if name.startswith("."):
        return "starts with '.'"
    if len(name) > MAX_NAME_CHARS:
        return f"is {len(name)} characters long, above the limit of {MAX_NAME_CHARS}"
    return None


def safe_label(s: str) -> str:
    """A filesystem-safe directory name for a label."""
    return re.sub(r"[^A-Za-z0-9._-]+", "-", s).strip("-") or "x"


def clip_label(path: str) -> str:
    """``handheld_flower_1280x720_30fps_10s.mp4`` -> ``handheld_flower``."""
    stem = Path(path).stem
    return safe_label(re.sub(r"_\d+x\d+.*$", "", stem) or stem)


@dataclass(frozen=True)
class Cell:
    """One run of a matrix and what it stands for."""

    spec: RunSpec
    scheme: str
    base_scheme: str | None = None  # the registered scheme it is (or derives from)
    trace: str = "-"
    network: str = "-"
    clip: str = "model"
    seed: int = 1
    swept: tuple[tuple[str, Any], ...] = field(default=())  # (config path, value)

    @property
    def run_dir(self) -> Path:
        return Path(self.spec.resolved_out_dir())

    def labels(self) -> dict[str, Any]:
        return {"scheme": self.scheme, "base_scheme": self.base_scheme, "trace": self.trace,
                "network": self.network, "clip": self.clip, "seed": self.seed}  # fmt: skip


def spec_key(spec: RunSpec) -> dict[str, Any]:
    """What identifies a run's results: the spec without where it writes."""
    d = asdict(spec)
    for k in _NOT_IN_KEY:
        d.pop(k, None)
    return json.loads(json.dumps(d))  # tuples -> lists, as read back


def spec_matches(cell: Cell) -> bool:
    """The cell's saved ``experiment-spec.json`` is its spec (its results are of this
    version of the plan)."""
    try:
        saved = json.loads((cell.run_dir / SPEC_FILE).read_text(encoding="utf-8"))
    except (OSError, ValueError):  # missing, not UTF-8 or not JSON: run the cell again
        return False
    return bool(saved == spec_key(cell.spec))


@functools.lru_cache(maxsize=256)
def _file_sha256(path: str, size: int, mtime_ns: int) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


#: Trace files already reported as changed, with their modification time (one note for an
#: edit, not one per cell).
_CHANGED_NOTED: set[tuple[str, str]] = set()


def changed_traces(cell: Cell) -> list[str]:
    """The cell's trace files whose bytes are not those its results were run on (the
    header's ``sha256``): the spec names a file by its path, so an edited file has the same
    spec. Generated traces, and files that cannot be read now, are not compared."""
    from .traces import is_generated

    try:
        header = results.read_header(cell.run_dir)
    except SluiceError:  # not readable here (a newer format): not compared
        return []
    out = []
    for key, arg in (("trace", cell.spec.trace), ("uplink_trace", cell.spec.uplink_trace)):
        ran = (header.get(key) or {}).get("sha256")
        if not arg or not ran or is_generated(arg):
            continue
        try:
            st = os.stat(arg)
            now = _file_sha256(os.path.abspath(arg), st.st_size, st.st_mtime_ns)
        except OSError:
            continue
        if now != ran:
            out.append(arg)
    return out


def is_done(cell: Cell, require_sha: str | None = None) -> bool:
    """The cell has results for its spec and its trace files as they are now
    (:func:`changed_traces`); with ``require_sha``, from that commit of a clean
    checkout."""
    d = cell.run_dir
    why = results.incomplete_reason(d, checksums=False)
    if why is not None:
        if (d / results.SUMMARY_FILE).is_file():  # results there, but not a whole run
            print(f"warning: {d}: not a complete result ({why}); it runs again",
                  file=sys.stderr)  # fmt: skip
        return False
    matches = spec_matches(cell)
    try:
        failed = json.loads((d / results.SUMMARY_FILE).read_text(encoding="utf-8")).get(
            results.QUALITY_ERROR_KEY
        )
        if failed and matches:
            print(f"warning: {d}: its quality scoring failed ({failed}); it runs again",
                  file=sys.stderr)  # fmt: skip
            return False
        if require_sha is not None:
            header = results.read_header(d)
            if header.get("git_sha") != require_sha or header.get("git_dirty") is not False:
                return False
        changed = changed_traces(cell) if matches else []
    except (OSError, json.JSONDecodeError, SluiceError):
        return False
    for arg in changed:
        try:
            key = (arg, str(os.stat(arg).st_mtime_ns))
        except OSError:
            key = (arg, "")
        if key not in _CHANGED_NOTED:
            _CHANGED_NOTED.add(key)
            print(f"note: {arg} changed since its cells ran; they run again", file=sys.stderr)
    return matches and not changed


def _mark_pending(cell: Cell) -> None:
    d = cell.run_dir
    d.mkdir(parents=True, exist_ok=True)
    (d / results.SUMMARY_FILE).unlink(missing_ok=True)
    results.write_text(d / SPEC_FILE, json.dumps(spec_key(cell.spec), indent=2))


def todo_cells(cells: Sequence[Cell], rerun: str = "missing") -> list[Cell]:
    """The cells to run: without results for their spec (``"missing"``), also those whose
    results come from another commit or a dirty checkout (``"stale"``), or all (``"all"``)."""
    if rerun not in RERUN_MODES:
        raise SluiceError(f"rerun must be one of {', '.join(RERUN_MODES)}, got {rerun!r}")
    sha = None
    if rerun == "stale":
        sha, dirty = results.git_info()
        if dirty is not False:
            print("warning: the checkout is dirty or unknown; every cell counts as stale",
                  file=sys.stderr)  # fmt: skip
            sha = "dirty"
    return [c for c in cells if rerun == "all" or not is_done(c, sha)]


@dataclass
class Outcome:
    """What :func:`run_cells` did."""

    ran: list[Cell]
    failed: list[tuple[Cell, str]]


def run_cells(
    cells: Sequence[Cell],
    *,
    jobs: int | None = None,
    backend: str = "process",
    progress: bool = True,
    desc: str = "cells",
    address: str | None = None,
) -> Outcome:
    """Runs ``cells`` (marking each pending first). A cell that fails with a user-facing
    error (a missing input, an invalid setting) is reported in :attr:`Outcome.failed` and
    the others go on; so does a cell that fails otherwise (a bug, a lost worker), its cause
    on one line. ``address``: the Ray cluster's (``backend="ray"``)."""
    cells = list(cells)
    for c in cells:
        _mark_pending(c)
    out = run_many([c.spec for c in cells], jobs=jobs, backend=backend, progress=progress,
                   keep_going=True, desc=desc, address=address)  # fmt: skip
    failed = [(c, r.message) for c, r in zip(cells, out) if isinstance(r, RunFailure)]
    return Outcome([c for c, r in zip(cells, out) if not isinstance(r, RunFailure)], failed)


# --- the table ------------------------------------------------------------------------------


def cell_row(cell: Cell, plan: str | None = None) -> dict[str, Any]:
    """The results-table row of a finished cell: labels, swept values, metrics, run_dir,
    git_sha."""
    run = results.load_run(cell.run_dir)
    row: dict[str, Any] = {"plan": plan, **cell.labels(), **dict(cell.swept)}
    row.update(metrics.summary_row(run.summary))
    row.update(metrics.frame_row(run))
    row.update(run_dir=str(run.path), git_sha=run.header.get("git_sha"))
    return row


def results_table(
    cells: Sequence[Cell], plan: str | None = None, swept: Sequence[str] = ()
) -> pd.DataFrame:
    """One row per finished cell (:func:`cell_row`; a cell without results, or with results
    of another spec (:func:`spec_matches`: a plan changed since, run with ``--only``) or of
    a trace file edited since (:func:`changed_traces`), is left out, with a warning for the
    latter).
    Columns: :data:`LABEL_COLUMNS`, the ``swept`` paths, the metrics, :data:`TAIL_COLUMNS`
    (the same columns whatever the cells' summaries hold)."""
    import pandas as pd

    rows = []
    other_spec = []
    for c in cells:
        if not results.is_complete(c.run_dir, checksums=False):
            continue
        if not spec_matches(c) or changed_traces(c):
            other_spec.append(c)
            continue
        try:
            rows.append(cell_row(c, plan))
        except SluiceError as e:  # a damaged result: left out of the table, not fatal
            print(f"warning: {c.run_dir} left out of the table: {e}", file=sys.stderr)
    if other_spec:
        schemes = ", ".join(dict.fromkeys(c.scheme for c in other_spec))
        print(f"warning: left out of the table: results of another version of the plan "
              f"(duration, config, trace files, ...) in {len(other_spec)} cell(s) of {schemes}; "
              "run them "
              f"again (without --only, or --only {schemes.replace(', ', ',')})",
              file=sys.stderr)  # fmt: skip
    head = [*LABEL_COLUMNS, *swept]
    # Every known metric (NaN where a run has none, e.g. VMAF without video), then the
    # rest of the summaries: the same columns whatever ran.
    body = list(dict.fromkeys([*metrics.METRICS, *(k for r in rows for k in r)]))
    body = [k for k in body if k not in head + TAIL_COLUMNS]
    return pd.DataFrame.from_records(rows, columns=[*head, *body, *TAIL_COLUMNS])


def write_table(df: pd.DataFrame, out_dir: str | Path) -> list[Path]:
    """Writes ``results.csv`` (and ``results.parquet`` when pyarrow is importable) into
    ``out_dir``; returns the paths written."""
    d = Path(out_dir)
    d.mkdir(parents=True, exist_ok=True)
    if "run_dir" in df:  # relative to the table: the folder can be read from anywhere, moved
        df = df.assign(run_dir=[os.path.relpath(v, d) if isinstance(v, str) else v
                                for v in df["run_dir"]])  # fmt: skip
    paths = [d / TABLE_CSV]
    results.write_text(paths[0], df.to_csv(index=False))
    try:
        import pyarrow  # noqa: F401
    except ImportError:
        (d / TABLE_PARQUET).unlink(missing_ok=True)  # never leave a stale one next to the CSV
        return paths
    try:
        df.to_parquet(d / TABLE_PARQUET, index=False)
    except (TypeError, ValueError, OSError) as e:  # pyarrow's ArrowTypeError / ArrowInvalid
        (d / TABLE_PARQUET).unlink(missing_ok=True)
        print(f"warning: {d / TABLE_PARQUET} not written ({e}); the CSV has every row",
              file=sys.stderr)  # fmt: skip
        return paths
    paths.append(d / TABLE_PARQUET)
    return paths


def read_table(path: str | Path) -> pd.DataFrame:
    """A results table: ``results.csv`` (or ``.parquet``), or the directory holding it."""
    import pandas as pd

    p = Path(path)
    if p.is_dir():
        p = p / TABLE_PARQUET if (p / TABLE_PARQUET).is_file() else p / TABLE_CSV
    if not p.is_file():
        raise SluiceError(f"no results table: {p} (run `sluice matrix PLAN` first)")
    try:
        df = pd.read_parquet(p) if p.suffix == ".parquet" else pd.read_csv(p)
    except (OSError, ValueError) as e:
        raise SluiceError(f"cannot read results table {p}: {e}") from None
    missing = [c for c in REQUIRED_COLUMNS if c not in df]
    if missing:
        raise SluiceError(f"results table {p} has no column {', '.join(missing)}: not a table "
                          "`sluice matrix` wrote (or edited by hand)")  # fmt: skip
    if "run_dir" in df:
        df["run_dir"] = [_run_dir(p.parent, v) for v in df["run_dir"]]
    return df


def _run_dir(table_dir: Path, v: Any) -> Any:
    """A table's ``run_dir`` as a path to read: relative to the table's folder (tables
    written before 2026-12-07 hold it relative to where `sluice matrix` ran: kept as it is
    where the folder has no such run)."""
    if not isinstance(v, str) or os.path.isabs(v):
        return v
    here = table_dir / v
    return str(here) if here.is_dir() or not os.path.isdir(v) else v
