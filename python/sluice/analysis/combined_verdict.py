"""Issue 31's test for any scheme on any results directory, printed, not written.

``python -m sluice.analysis.combined_verdict RESULTS [--scheme NAME ...] [--clip LABEL ...]
[--trace LABEL ...]`` prints, for each scheme (default ``combined``; on the cells of the clips
and traces given, default all), the verdict :mod:`sluice.analysis.combined` writes into
docs/results/combined.md: against each of its rivals (WebRTC*, ACE, MAE, Vidaptive), the
pooled all-slot P95 over the cells both ran as a ratio, and the difference of their mean
VMAF, with the issue's tests. Then the same numbers per trace, because a pooled P95 over
traces with long outages is decided by those traces alone. It is how a variant (a plan's
``base`` plus ``set``) is judged without regenerating the whole report, for example
``experiments/checks/combined-heldout2.toml``'s::

    sluice matrix experiments/checks/combined-heldout2.toml
    python -m sluice.analysis.combined_verdict results/combined-heldout2 \\
        --scheme combined --scheme combined-recover --clip game2 \\
        --trace lte-ghent8 --trace hsr-4 --trace lte-bus62 --trace 3g-norway-car12

(only the cells whose clip and trace the project does not ship: that plan's animation is
data/videos/bbb-intro and its Wi-Fi trace data/traces/wifi-hairpin14-70s.mahi.)
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from typing import Any

from ..errors import SluiceError
from . import fmt, load, markdown, user_error
from .cells import pooled_row
from .combined import RIVALS, SCHEME, verdict, verdict_table

PROG = "python -m sluice.analysis.combined_verdict"


def per_trace_table(df: Any, schemes: Sequence[str]) -> str:
    """Markdown: per trace (its cells pooled), each scheme's all-slot P95 and mean VMAF."""
    names = [s for s in (*schemes, *RIVALS) if s in set(df["scheme"])]
    names = list(dict.fromkeys(names))
    rows = []
    for trace in dict.fromkeys(df["trace"]):
        sub = df[df["trace"] == trace]
        row = [f"{trace}"]
        for s in names:
            mine = sub[sub["scheme"] == s]
            if mine.empty:
                row.append("-")
                continue
            p95 = pooled_row(sub, s)["p95"]
            vmaf = mine["vmaf_mean"].astype(float).mean()
            row.append(f"{fmt('.0f')(p95)} / {fmt('.1f')(vmaf)}")
        rows.append(row)
    return markdown(["trace", *(f"`{s}`" for s in names)], rows)


def report(df: Any, schemes: Sequence[str]) -> str:
    have = set(df["scheme"])
    missing = [s for s in schemes if s not in have]
    if missing:
        raise SluiceError(
            f"no finished runs of {', '.join(f'`{s}`' for s in missing)} in these results "
            f"(schemes there: {', '.join(sorted(have))})"
        )
    if not have & set(RIVALS):
        raise SluiceError(f"none of the rivals ({', '.join(RIVALS)}) ran in these results")
    parts = []
    for s in schemes:
        parts.append(f"## `{s}` against the rivals\n\n{verdict_table(verdict(df, scheme=s), s)}")
    parts.append(
        "## Per trace (its cells pooled): all-slot P95 ms / mean VMAF\n\n"
        + per_trace_table(df, schemes)
    )
    return "\n\n".join(parts) + "\n"


def only(df: Any, column: str, labels: Sequence[str] | None, where: str) -> Any:
    """The rows of ``df`` whose ``column`` (clip or trace) is one of ``labels`` (all if none)."""
    if not labels:
        return df
    known = set(df[column].astype(str))
    unknown = [c for c in labels if c not in known]
    if unknown:
        raise SluiceError(
            f"no cells of {column} {', '.join(unknown)} in {where} "
            f"({column}s there: {', '.join(sorted(known))})"
        )
    return df[df[column].astype(str).isin(labels)]


def main(argv: Sequence[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog=PROG, description=__doc__.splitlines()[0])
    ap.add_argument("results", help="a results directory (results/combined-heldout2)")
    ap.add_argument("--scheme", action="append", metavar="NAME",
                    help=f"the scheme to judge (repeatable; default {SCHEME})")  # fmt: skip
    ap.add_argument("--clip", action="append", metavar="LABEL",
                    help="only the cells of this clip (repeatable; default all)")  # fmt: skip
    ap.add_argument("--trace", action="append", metavar="LABEL",
                    help="only the cells of this trace (repeatable; default all)")  # fmt: skip
    args = ap.parse_args(argv)
    try:
        df = load(args.results).table
        if df.empty:
            raise SluiceError(f"no finished runs in {args.results}")
        df = only(df, "clip", args.clip, args.results)
        df = only(df, "trace", args.trace, args.results)
        print(report(df, args.scheme or [SCHEME]), end="")
    except SluiceError as e:
        return user_error(PROG, e)
    return 0


if __name__ == "__main__":
    sys.exit(main())
