"""The simulator's commands: ``sluice run``, ``compare``, ``matrix``, ``report``, ``plot``."""

from __future__ import annotations

import argparse
import json
import os
import sys
from dataclasses import replace
from pathlib import Path
from typing import Any

from ..errors import SluiceError
from . import options as o


def add_commands(sub: Any) -> None:
    """Adds ``run``, ``compare``, ``matrix``, ``report`` and ``plot``."""
    p = sub.add_parser("run", help="run one scheme on one trace")
    o.add_scheme(p, "a custom composition (SchemeConfig JSON); named after the file stem")
    o.add_network(p)
    o.add_sharing(p)
    o.add_path_faults(p)
    o.add_seeds_and_frame_drop(p)
    p.add_argument(
        "--out", type=o.out_path, metavar="DIR",
        help="default results/<scheme>-<trace>-s<seed> (with --seeds: one per seed; with --out, "
        "DIR/s<seed>)",
    )  # fmt: skip
    p.add_argument("--json", action="store_true", help="print only the summary JSON on stdout")
    p.set_defaults(func=cmd_run)

    p = sub.add_parser("compare", help="run several schemes on the same network, in parallel")
    p.add_argument(
        "--schemes", default="", metavar="A,B,C", help="comma-separated registered schemes"
    )
    p.add_argument(
        "--scheme-file", action="append", default=[], metavar="FILE.json",
        help="add a custom composition (repeatable)",
    )  # fmt: skip
    o.add_network(p)
    o.add_sharing(p)
    o.add_path_faults(p)
    o.add_seeds_and_frame_drop(p)
    _add_pool(p)
    p.add_argument("--out", type=o.out_path, metavar="DIR", help="default results/compare-<trace>")
    p.add_argument("--log-x", action="store_true", help="log-scale latency CDF")
    p.add_argument("--no-report", action="store_true", help="skip the HTML report (report.html)")
    p.set_defaults(func=cmd_compare)

    p = sub.add_parser(
        "matrix", help="run an experiment plan (TOML): schemes x traces x clips x seeds",
        description="Runs the cells of PLAN that have no results yet (resumable) and writes "
        "one results table, <results>/<name>/results.csv (and results.parquet with pyarrow). "
        "See docs/experiments.md for the plan format.",
    )  # fmt: skip
    p.add_argument("plan", metavar="PLAN.toml", help="the experiment plan")
    _add_pool(p)
    p.add_argument(
        "--rerun", choices=("missing", "stale", "all"), default="missing",
        help="missing (default): cells without results for their spec; stale: also results "
        "from another commit or a dirty checkout; all: every cell",
    )  # fmt: skip
    p.add_argument(
        "--results", metavar="DIR", default="results",
        help="results root (default results): cells go to "
        "DIR/<name>/<trace>/<clip>/<scheme>/s<seed>/",
    )  # fmt: skip
    p.add_argument("--dry-run", action="store_true", help="list the cells and what would run")
    p.add_argument("--no-report", action="store_true", help="skip the HTML report (report.html)")
    p.add_argument(
        "--only", metavar="SCHEME,...", default=None,
        help="run only the cells of these schemes (the table still has every finished cell "
        "of this version of the plan)",
    )  # fmt: skip
    p.set_defaults(func=cmd_matrix)

    p = sub.add_parser(
        "report", help="one self-contained HTML page for a run, compare or matrix directory",
        description="Writes DIR/report.html: the table with 95 % intervals (all-slot latency "
        "first), latency against quality per trace family, latency CDFs on a log axis, time "
        "series, the settings the schemes differ in, and provenance. It opens offline.",
    )  # fmt: skip
    p.add_argument("dir", metavar="DIR", help="a run, compare or matrix results directory")
    p.add_argument("--out", type=o.out_path, metavar="FILE", help="default DIR/report.html")
    p.set_defaults(func=cmd_report)

    p = sub.add_parser("plot", help="redraw plots from saved results")
    p.add_argument(
        "run_dirs", nargs="+", metavar="RUN_DIR",
        help="run directories (or a compare directory holding them)",
    )  # fmt: skip
    p.add_argument(
        "--out", type=o.out_path, metavar="DIR",
        help="default: the run (or compare) directory; runs given one by one: the folder they "
        "are in (--out is needed for runs in different folders)",
    )  # fmt: skip
    p.add_argument("--log-x", action="store_true", help="log-scale latency CDF")
    p.set_defaults(func=cmd_plot)


def _add_pool(p: argparse.ArgumentParser) -> None:
    """Where the runs of ``compare`` and ``matrix`` go: processes here, or Ray."""
    p.add_argument("--jobs", type=o.jobs, metavar="N", help="parallel runs (default: CPUs)")
    p.add_argument("--backend", choices=("process", "ray"), default="process")
    p.add_argument(
        "--address", metavar="HOST:PORT", default=None,
        help="with --backend ray: the Ray cluster to run on (default: RAY_ADDRESS, else a "
        "local Ray); see docs/cluster.md",
    )  # fmt: skip


def cmd_run(args: argparse.Namespace) -> int:
    from .. import report, results
    from ..run import run_one

    name, cfg = o.scheme_from_args(args)
    seeds = o.seeds(args)
    if args.out:
        results.check_run_target(Path(args.out), seeds=seeds is not None)
    if seeds is None:
        spec = o.spec_from_args(args, name, cfg, args.out)
        o.say_if_replacing(spec.out_dir, spec.default_out_dir())
        run_dir = run_one(spec)
        o.after_run_notes(name, cfg, spec.config())  # after the run: a failed one says one line
        o.print_summary(name, run_dir, args.json)
        return 0
    summaries = []
    run_dirs = []
    for seed in seeds:
        out = os.path.join(args.out, f"s{seed}") if args.out else None
        spec = o.spec_from_args(args, name, cfg, out)
        spec = replace(spec, overrides=(*spec.overrides, ("seed", seed)))
        o.say_if_replacing(spec.out_dir, spec.default_out_dir())
        run_dirs.append(run_one(spec))
        summaries.append(json.loads((run_dirs[-1] / results.SUMMARY_FILE).read_text("utf-8")))
    o.after_run_notes(name, cfg, spec.config())
    if args.json:
        print(json.dumps(summaries, indent=2))
        return 0
    print(report.text_table([(name, summaries)]))
    print(report.legend([(name, summaries)]))
    for note in report.seed_notes([(name, summaries)]):
        print(f"note: {note}")
    print(f"\nresults: {', '.join(str(d) for d in run_dirs)}")
    return 0

def cmd_compare(args: argparse.Namespace) -> int:
    from .. import differences, plots, pool, report, results, run
    from ..traces import trace_stem

    names = [n.strip() for n in args.schemes.split(",") if n.strip()]
    o.check_schemes(names)
    entries: list[tuple[str, Any]] = [(n, None) for n in names]
    entries += [o.load_scheme_file(f) for f in args.scheme_file]
    if not entries:
        raise SluiceError("give schemes to compare: --schemes a,b,c and/or --scheme-file FILE")
    seen = [n for n, _ in entries]
    dup = sorted({n for n in seen if seen.count(n) > 1})
    if dup:
        files = [str(f) for f in args.scheme_file if Path(f).stem in dup]
        raise SluiceError(f"scheme listed twice: {', '.join(dup)}"
                          + (f" (a scheme file is named by its file name: {', '.join(files)};"
                             " rename it)" if files else ""))  # fmt: skip
    seeds = o.seeds(args)

    pool.check_pool(args.backend, args.jobs, args.address)  # before an earlier compare goes
    out = Path(args.out or os.path.join("results", f"compare-{trace_stem(args.trace)}"))
    results.check_result_dir(out, "compare directory")
    scheme_names = [n for n, _ in entries]
    earlier = results.prepare_compare_dir(out, scheme_names)  # refusals first
    specs = []
    for n, cfg in entries:
        if seeds is None:
            specs.append(o.spec_from_args(args, n, cfg, str(out / n)))
            continue
        for seed in seeds:
            spec = o.spec_from_args(args, n, cfg, str(out / n / f"s{seed}"))
            specs.append(replace(spec, overrides=(*spec.overrides, ("seed", seed))))
    # Configs and traces once up front, so mistakes come before any run starts.
    cfgs = [run.check(s) for s in specs]
    run.load_traces(specs[0], cfgs[0])
    if earlier.folders:
        names = ", ".join(p.name for p in earlier.folders)
        print(f"note: replacing the earlier compare in {out} (its runs: {names}; give --out "
              "to keep both)", file=sys.stderr)  # fmt: skip
    earlier.remove()
    run_dirs = pool.run_many(specs, jobs=args.jobs, backend=args.backend,
                               address=args.address)  # fmt: skip
    runs = [results.load_run(d) for d in run_dirs]
    o.note_unbounded_queue(cfgs[0])  # after the runs: a failed compare says one line
    for (n, base), c in zip(entries, cfgs[::len(seeds) if seeds else 1]):
        o.note_changed_components(n, base, c)  # the network is one: its note once
    by_scheme: dict[str, list[Any]] = {}
    where: dict[str, list[dict[str, Any]]] = {}  # each run's seed, its directory in `out`
    for r, d in zip(runs, run_dirs):
        by_scheme.setdefault(r.scheme, []).append(r)
        where.setdefault(r.scheme, []).append(
            {"seed": r.seed, "run_dir": os.path.relpath(d, out.resolve())})
    named = [(n, [r.summary for r in rs]) for n, rs in by_scheme.items()]

    cfg = cfgs[0]
    chosen = [p for p, _ in specs[0].overrides if p != "seed"]
    firsts = [rs[0] for rs in by_scheme.values()]
    diffs = differences.markdown([(r.scheme, r.config) for r in firsts], chosen)
    command = o.command_line(args)
    seed_text = (f"seeds {', '.join(map(str, seeds))}" if seeds else f"seed {cfg['seed']}")
    header = (
        f"# sluice compare: {args.trace}\n\n"
        f"duration {cfg['duration_s']:g} s, {seed_text}, {report.network_words(cfg)}\n\n"
        + _encoder_desc(args, firsts[0].config) + "\n\n"
        + f"{results.MADE_BY}`{command}`\n\n"
    )
    body = report.markdown_table(named) + "\n\n" + report.legend(named, bold=True) + "\n"
    notes = report.seed_notes(named)
    for note in notes:
        body += f"\nNote: {note}.\n"
    stages = report.stage_rows(by_scheme)
    if stages:
        body += ("\n## Where the displayed frames wait\n\n" + report.markdown(*stages)
                 + "\n\n" + report.STAGE_LEGEND + "\n")  # fmt: skip
    flows = report.flow_rows(named)
    if flows:
        body += ("\n## The flows at the bottleneck\n\n" + report.markdown(*flows) + "\n\n"
                 + report.FLOW_LEGEND + "\n")  # fmt: skip
    if diffs:
        body += ("\n## Settings the schemes differ in, which you did not choose\n\n"
                 + diffs + "\n")  # fmt: skip
    results.write_text(out / "compare.md", header + body)
    labels = [lab for scheme in by_scheme for lab in where[scheme]]
    results.write_text(out / "summary.csv", report.csv_text(named, labels))
    pngs = plots.plot_runs(firsts, out, logx=args.log_x)
    html = None
    if not args.no_report:
        from ..htmlreport import write_report

        html = write_report(out, command=command)

    print(report.text_table(named))
    print(report.legend(named))
    for seed_note in notes:
        print(f"note: {seed_note}")
    note = differences.note([(r.scheme, r.config) for r in firsts], chosen)
    if note:
        print(note)
    print(f"\nresults: {out}")
    print(f"table:   {out / 'compare.md'}, {out / 'summary.csv'}")
    print(f"plots:   {', '.join(str(p) for p in pngs)}")
    if html:
        print(f"report:  {html}")
    return 0


def cmd_report(args: argparse.Namespace) -> int:
    from ..htmlreport import write_report
    from ..results import not_a_result_file

    if args.out:
        not_a_result_file(args.out, "--out")
    path = write_report(args.dir, args.out, command=o.command_line(args))
    print(f"report: {path}")
    return 0


def _encoder_desc(args: argparse.Namespace, cfg: dict[str, Any]) -> str:
    """What the compare's schemes encoded (from a run's resolved config): the clip and
    x264's settings, or the model."""
    enc = cfg.get("encoder") or {}
    if enc.get("kind") == "x264":
        out = (f"clip {args.video} at {enc.get('width')}x{enc.get('height')}, "
               f"{cfg.get('fps', 0):g} fps; x264 preset {enc.get('preset')}, encode time "
               f"{enc.get('encode_time')}; quality {args.quality or 'fast'}")  # fmt: skip
    else:
        out = f"model encoder, {cfg.get('fps', 0):g} fps"
    if getattr(args, "frame_drop", None) is not None:
        out += f"; frame dropping {args.frame_drop} for every scheme"
    return out


def cmd_matrix(args: argparse.Namespace) -> int:
    from .. import plan as plans
    from ..pool import check_pool

    check_pool(args.backend, args.jobs, args.address)  # before the plan: also for --dry-run
    p = plans.load_plan(args.plan)
    only = None
    if args.only is not None:
        only = [n.strip() for n in args.only.split(",") if n.strip()]
        if not only:
            raise SluiceError("--only lists no scheme: give SCHEME,... or leave it out")
    res = plans.run_plan(
        p, args.results, jobs=args.jobs, backend=args.backend, rerun=args.rerun, only=only,
        dry_run=args.dry_run, address=args.address,
    )  # fmt: skip
    if args.dry_run:
        todo = {c.run_dir for c in res.todo}
        for c in res.cells:
            if c.run_dir in todo:
                state = "run "
            elif only and c.scheme not in only:
                state = "skip"
            else:
                state = "done"
            print(f"{state}  {c.scheme}  {c.trace}  {c.clip}  s{c.seed}  {c.run_dir}")
        print(f"{p.name}: {len(res.cells)} cells, {len(res.todo)} to run")
        return 0
    assert res.outcome is not None
    for cell, msg in res.outcome.failed:
        print(f"sluice: cell {cell.run_dir} failed: {msg}", file=sys.stderr)
    print(f"{p.name}: {len(res.cells)} cells, {len(res.outcome.ran)} run now, "
          f"{len(res.table)} with results")  # fmt: skip
    if len(res.table):
        from .. import report

        t = res.table
        named = [(sch, t[t["scheme"] == sch].to_dict("records"))
                 for sch in dict.fromkeys(t["scheme"])]  # fmt: skip
        print(report.text_table(named))
        print(report.legend(named))
        if t["trace"].nunique() > 1:
            families = t["network"].where(t["network"] != "-", t["trace"]).nunique()
            per = (" (the report has a table per trace family)"
                   if not args.no_report and families > 1 else "")  # fmt: skip
            print(f"The rows pool {t['trace'].nunique()} traces: their intervals span the "
                  f"traces, not only seeds{per}.")  # fmt: skip
    print(f"table: {', '.join(str(x) for x in res.paths)}")
    if len(res.table) and not args.no_report:
        from ..htmlreport import write_report

        html = write_report(Path(res.paths[0]).parent,
                            command=o.command_line(args))  # fmt: skip
        print(f"report: {html}")
    if res.outcome.failed:
        return o.fail(f"{len(res.outcome.failed)} of {len(res.todo)} runs failed (see above)")
    return 0


def _first_seeds(d: Path) -> list[Path]:
    """Of a compare directory made with ``--seeds`` (``<scheme>/s<seed>``), the runs its own
    plots drew: each scheme's first seed in its ``summary.csv`` (the first given), else its
    lowest."""
    from .. import results

    firsts: dict[str, str] = {}
    for row in results.compare_rows(d):
        firsts.setdefault(row["scheme"], row.get("run_dir") or "")
    dirs = [d / p for p in firsts.values() if p and results.is_run_dir(d / p)]
    if dirs:
        return dirs
    out = []
    for scheme in sorted(s for s in d.iterdir() if s.is_dir()):
        seeds = [s for s in scheme.iterdir() if results.SEED_DIR.fullmatch(s.name)
                 and results.is_run_dir(s)]  # fmt: skip
        if seeds:
            out.append(min(seeds, key=lambda s: int(s.name[1:])))
    return out


def cmd_plot(args: argparse.Namespace) -> int:
    from .. import plots, results

    dirs: list[Path] = []
    for d in map(Path, args.run_dirs):
        if results.is_run_dir(d):
            dirs.append(d)
        elif d.is_dir() and (subs := sorted(s for s in d.iterdir() if results.is_run_dir(s))):
            dirs.extend(subs)  # a compare directory
        elif d.is_dir() and (subs := _first_seeds(d)):
            dirs.extend(subs)  # a compare directory with --seeds: its first seed, as compare
        elif not d.exists():
            raise SluiceError(f"no such run directory: {d}")
        else:
            raise SluiceError(results.no_run_file(d))
    if args.out:
        out = Path(args.out)
    elif len(args.run_dirs) == 1:
        out = Path(args.run_dirs[0])
    else:
        parents = {d.resolve().parent for d in dirs}
        if len(parents) > 1:
            raise SluiceError("runs in different folders: give --out DIR for the plots (without "
                              "it they go into the folder the runs share)")  # fmt: skip
        out = parents.pop()
    runs = [results.load_run(d) for d in dirs]
    for p in plots.plot_runs(runs, out, logx=args.log_x):
        print(p)
    return 0


# --- entry point ----------------------------------------------------------------------------

