"""Analysis of experiment results: small modules that read a results table and the run
directories it points to, never the simulator.

``sluice matrix PLAN`` writes ``<results>/<name>/results.csv`` (one row per run, see
:mod:`sluice.experiments`) and ``plan.json`` (the plan as run). :func:`load` reads both back;
the generic helpers here make Markdown tables of per-scheme means. Per-system analyses
(report text, figures of one system's internals) are modules of this package, e.g.
:mod:`sluice.analysis.ace`.
"""

from __future__ import annotations

import argparse
import datetime as dt
import functools
import math
import os
import re
import shlex
import string
import sys
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ..errors import SluiceError, read_json_object
from ..experiments import read_table
from ..plan import PLAN_FILE, load_plan
from ..report import markdown

__all__ = [
    "Results",
    "load",
    "means_table",
    "fmt",
    "pct",
    "signed_pct",
    "signed",
    "markdown",
    "existing_analysis",
    "relative_to_cwd",
    "provenance",
    "report_main",
    "report_parser",
    "add_results_root",
    "add_report_dir",
    "report_dir_of",
    "ANALYSIS_OPEN",
    "ANALYSIS_CLOSE",
    "ANALYSIS_PLACEHOLDER",
]

#: A report's hand-written analysis sits between these markers and survives regeneration.
ANALYSIS_OPEN = "<!-- analysis -->"
ANALYSIS_CLOSE = "<!-- /analysis -->"
ANALYSIS_PLACEHOLDER = (
    "\n_Hand-written analysis goes here; it is kept when the report is regenerated._\n"
)


@dataclass
class Results:
    """A results table, the plan it was run from (``plan.json``; {} if absent) and where."""

    table: Any  # pandas.DataFrame
    plan: dict[str, Any]
    path: Path  # the results directory (<results>/<name>)

    @property
    def name(self) -> str:
        return str(self.plan.get("name") or self.path.name)


def report_parser(prog: str, doc: str | None) -> argparse.ArgumentParser:
    """A report command's parser, described by the first paragraph of its module's ``doc``."""
    return argparse.ArgumentParser(prog=prog, description=(doc or "").split("\n\n")[0])


def add_results_root(p: argparse.ArgumentParser) -> None:
    """``--results-root``: where the results of plan files given in place of results are."""
    p.add_argument("--results-root", default="results", metavar="DIR",
                   help="with plan files: where their results are (default results)")


def add_report_dir(p: argparse.ArgumentParser, writes: str, beside: str,
                   make: str | None = None) -> None:  # fmt: skip
    """``--report-dir``: where the report (``writes``) goes; by default a ``report`` folder
    beside the results named ``beside`` (:func:`report_dir_of`); ``make``: the make target that
    writes the shipped report into docs/results."""
    shipped = f"; make {make} gives docs/results" if make else ""
    p.add_argument("--report-dir", default=None, metavar="DIR",
                   help=f"where {writes} go (default: {beside}/report{shipped})")


def report_dir_of(args: argparse.Namespace, beside: str | os.PathLike[str]) -> Path:
    """The folder a report goes to: ``--report-dir``, else ``report`` in ``beside`` (its
    results directory; given as a plan file or a results.csv, the directory it names), so a
    user's own runs never overwrite the report shipped in docs/results."""
    if args.report_dir:
        return _folder(Path(args.report_dir), "--report-dir")
    p = Path(beside)
    if p.suffix == ".toml" or p.is_file():
        p = load(p, getattr(args, "results_root", None) or "results").path
    return _folder(p / "report", "the report folder")


def _folder(p: Path, what: str) -> Path:
    """``p`` if it is a folder or can be made one: a :class:`SluiceError` if it, or the
    nearest of its parents that exists, is not a folder."""
    for q in (p, *p.parents):
        if q.exists():
            if not q.is_dir():
                raise SluiceError(f"{what} {p}: {q} is a file, not a folder")
            break
    return p


def user_error(prog: str, e: Exception) -> int:
    """What a report command does with a user's mistake: one line on stderr, exit status 2."""
    print(f"{prog}: error: {' '.join(str(e).split())}", file=sys.stderr)
    return 2


def report_main(
    prog: str,
    argv: Sequence[str] | None,
    parse: Callable[[list[str]], Any],
    write: Callable[[Any, str], str],
) -> int:
    """A report command's ``main``: ``parse`` the arguments, then ``write(args, command)``
    the report (``command``: the line that regenerates it) and print the line it returns; a
    user's mistake (:class:`SluiceError`) is one line on stderr and exit status 2."""
    global _CHECKOUT
    args_list = list(sys.argv[1:] if argv is None else argv)
    args = parse(args_list)
    from .. import results

    # The checkout as it was before the report wrote anything: its own figures and text,
    # rewritten, would otherwise make every regenerated report say "dirty tree".
    _CHECKOUT = results.git_info()
    try:
        line = write(args, shlex.join([*prog.split(), *args_list]))
    except SluiceError as e:
        return user_error(prog, e)
    finally:
        _CHECKOUT = None
    print(line)
    return 0


def matrix_report_main(
    prog: str,
    doc: str | None,
    argv: Sequence[str] | None,
    example: str,
    writes: str,
    make: str,
    write_report: Callable[..., Path],
    options: Callable[[argparse.ArgumentParser], None] | None = None,
) -> int:
    """``main`` of a report over one matrix's results: ``RESULTS [--report-dir DIR]``
    (``example``: a results directory for the help; ``writes``: what it writes; ``make``: the
    target that writes the shipped report), then ``write_report(results, report_dir,
    command)``; with ``options`` (which adds the report's own arguments to the parser), also
    the parsed arguments: ``write_report(results, report_dir, command, args)``."""

    def parse(args: list[str]) -> argparse.Namespace:
        ap = report_parser(prog, doc)
        ap.add_argument("results", metavar="RESULTS",
                        help=f"the matrix's results directory ({example})")  # fmt: skip
        add_report_dir(ap, writes, "RESULTS", make)
        if options is not None:
            options(ap)
        return ap.parse_args(args)

    def write(args: argparse.Namespace, command: str) -> str:
        res = Path(args.results)
        extra = (args,) if options is not None else ()
        return f"report: {write_report(res, report_dir_of(args, res), command, *extra)}"

    return report_main(prog, argv, parse, write)


#: The checkout a report command is writing from (:func:`report_main`), read before it
#: wrote anything; None outside one.
_CHECKOUT: tuple[str, bool | None] | None = None


def load(where: str | Path, results_root: str | Path = "results") -> Results:
    """The results of a plan: ``where`` is a results directory (``results/ace``), its
    ``results.csv``, or the plan file (its results under ``results_root``)."""
    p = Path(where)
    if p.suffix == ".toml":
        p = Path(results_root) / load_plan(p).name
    elif p.is_file():
        p = p.parent
    if not p.is_dir():
        raise SluiceError(f"no results directory: {p} (run `sluice matrix PLAN` first)")
    table = read_table(p)
    plan: dict[str, Any] = {}
    if (p / PLAN_FILE).is_file():
        plan = read_json_object(p / PLAN_FILE, "the plan's copy")
    return Results(table, plan, p)


def quality_words(mode: str | None) -> str:
    """How a plan's quality mode scored (``quality fast (VMAF, SSIM, PSNR on every 5th
    slot)``), for report headers."""
    mode = mode or "fast"
    how = {"fast": " (VMAF, SSIM, PSNR on every 5th slot)", "full": " (VMAF, SSIM, PSNR on "
           "every slot)", "none": " (not scored)"}.get(mode, "")  # fmt: skip
    return f"quality {mode}{how}"


def require_schemes(res: Results, wanted: Sequence[str], reports: str) -> None:
    """A :class:`SluiceError` unless ``res`` holds runs of some of ``wanted``: a report on
    results without its schemes would be a page of dashes (``reports``: the plans it is
    written for)."""
    have = set(res.table["scheme"]) if "scheme" in res.table else set()
    if not have & set(wanted):
        raise SluiceError(f"{res.path}: no runs of this report's schemes "
                          f"({', '.join(wanted)}); it reports {reports}")  # fmt: skip


def run_encoder(res: Results) -> str:
    """``x264`` or ``model``: the encoder of the results' first run."""
    from .. import results

    d = res.table["run_dir"] if "run_dir" in res.table else []
    if len(d) == 0:
        return "model"
    enc = (results.read_header(d.iloc[0]).get("config") or {}).get("encoder") or {}
    return "x264" if enc.get("kind") == "x264" else "model"


# --- formatting -----------------------------------------------------------------------------


def fmt(spec: str) -> Callable[[Any], str]:
    """A formatter: ``format(v, spec)``, ``-`` for a missing value."""

    def f(v: Any) -> str:
        try:
            x = float(v)
        except (TypeError, ValueError):
            return "-" if v is None else str(v)
        return "-" if math.isnan(x) else format(x, spec)

    return f


def pct(v: Any) -> str:
    """A share as a percentage with two decimals (no % sign)."""
    return fmt(".2f")(None if v is None else float(v) * 100)


def signed_pct(v: Any) -> str:
    return "-" if v is None or math.isnan(float(v)) else f"{100 * float(v):+.1f}%"


def signed(v: Any) -> str:
    return "-" if v is None or math.isnan(float(v)) else f"{float(v):+.2f}"


#: (header, column, formatter) of a means table.
Column = tuple[str, str, Callable[[Any], str]]


def means_table(df: Any, names: Sequence[str], columns: Sequence[Column]) -> str:
    """Markdown: one row per scheme of ``names`` present in ``df``, its number of runs and
    the mean of each column over them."""
    rows = []
    for s in names:
        sub = df[df["scheme"] == s]
        if sub.empty:
            continue
        means = [f(sub[c].mean() if c in sub else math.nan) for _, c, f in columns]
        rows.append([f"`{s}`", str(len(sub)), *means])
    return markdown(["scheme", "runs", *(h for h, _, _ in columns)], rows)


# --- reports --------------------------------------------------------------------------------


def existing_analysis(path: Path) -> str:
    """The hand-written block between the analysis markers of an existing report (the
    placeholder if there is none)."""
    try:
        text = path.read_text(encoding="utf-8")
    except OSError:
        return ANALYSIS_PLACEHOLDER
    i, j = text.find(ANALYSIS_OPEN), text.find(ANALYSIS_CLOSE)
    if i < 0 or j < i:
        return ANALYSIS_PLACEHOLDER
    return text[i + len(ANALYSIS_OPEN) : j]


#: Where a report's hand-written analysis goes among its lines (:func:`write_markdown`).
ANALYSIS_SLOT = ANALYSIS_OPEN + "\0" + ANALYSIS_CLOSE + "\n"


def write_markdown(md_path: Path, lines: Sequence[str], analysis: str) -> Path:
    """Writes a report's ``lines`` to ``md_path`` (runs of blank lines folded into one, a
    newline at the end), with ``analysis`` (:func:`existing_analysis`) at
    :data:`ANALYSIS_SLOT`; returns ``md_path``."""
    text = re.sub(r"\n{3,}", "\n\n", "\n".join(lines)).rstrip() + "\n"
    md_path.write_text(text.replace("\0", analysis, 1), encoding="utf-8")
    return md_path


#: The reports' fixed prose: ``templates/<report>.md``, one file a report.
TEMPLATES = Path(__file__).resolve().parent / "templates"
_SECTION = re.compile(r"^<!-- section: ([a-z0-9-]+) -->[ \t]*$", re.M)


@functools.cache
def template_sections(report: str) -> dict[str, str]:
    """The sections of ``templates/<report>.md``: each starts at a line
    ``<!-- section: NAME -->`` and runs to the next (blank lines around it dropped); what
    stands before the first is a note to the file's editors."""
    text = (TEMPLATES / f"{report}.md").read_text(encoding="utf-8")
    parts = _SECTION.split(text)
    sections: dict[str, str] = {}
    for name, body in zip(parts[1::2], parts[2::2]):
        if name in sections:
            raise ValueError(f"{report}.md: section {name!r} twice")
        sections[name] = body.strip("\n") + "\n"
    return sections


def prose(report: str, section: str, **values: Any) -> str:
    """A report's fixed text: section ``section`` of ``templates/<report>.md``, its
    ``$name`` / ``${name}`` placeholders filled from ``values`` (:class:`string.Template`;
    a missing value is an error, ``$$`` a dollar sign)."""
    return string.Template(template_sections(report)[section]).substitute(values)


def figure(path: str | os.PathLike[str], caption: str, out_dir: Path, note: str = "") -> str:
    """A report's figure: the image (linked relative to the report's directory ``out_dir``)
    and its caption (with ``note`` after it), as a markdown paragraph."""
    rel = os.path.relpath(path, out_dir)
    return f"![{caption}]({rel})\n\n_{caption}{'. ' + note if note else ''}._\n\n"


def relative_to_cwd(path: str | os.PathLike[str]) -> str:
    """``path`` relative to the working directory when it is inside it."""
    p = Path(path).resolve()
    cwd = Path.cwd().resolve()
    return str(p.relative_to(cwd)) if p.is_relative_to(cwd) else str(p)


def provenance(run_shas: Any, command: str | None = None) -> list[str]:
    """A report's provenance lines: this checkout's git SHA (and whether it was dirty when
    the report command started: :func:`report_main`), the
    commits the runs were produced at with their counts (``run_shas``: a ``git_sha`` column
    or any iterable of SHAs), the date, and the command that wrote the report."""
    from collections import Counter

    from .. import results

    sha, dirty = _CHECKOUT or results.git_info()
    counts = Counter(str(x) for x in run_shas)
    lines = [
        f"- git: `{sha}`{' (dirty tree)' if dirty else ''}; runs produced at "
        + ", ".join(f"`{k[:12]}` ({v} runs)" for k, v in counts.most_common()),
        f"- date: {dt.datetime.now(dt.timezone.utc).strftime('%Y-%m-%d %H:%M UTC')}",
    ]
    if command:
        lines.append(f"- command: `{command}`")
    return lines
