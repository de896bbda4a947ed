"""The inspection commands: ``sluice config``, ``schemes``, ``trace gen`` and ``trace info``."""

from __future__ import annotations

import argparse
import json
import os
import sys
from pathlib import Path
from typing import Any

from ..errors import SluiceError
from . import options as o


def add_commands(sub: Any) -> None:
    """Adds ``config``, ``schemes`` and ``trace gen|info``."""
    p = sub.add_parser(
        "config", help="print a run's resolved config, or the valid config paths",
        description="Prints the run config a scheme resolves to, with --set overrides "
        "applied (the config a run's header records, before trace names and video).",
    )  # fmt: skip
    o.add_scheme(p, help_file="a custom composition (its config instead of a scheme's)")
    p.add_argument(
        "--encoder", choices=("x264", "model"), default=None,
        help="the encoder's config to show (default: the scheme's, else model)",
    )  # fmt: skip
    p.add_argument(
        "--set", action="append", default=[], metavar="PATH=VALUE", dest="overrides",
        type=o.assignment, help="override (repeatable)",
    )  # fmt: skip
    p.add_argument("--paths", action="store_true",
                   help="one PATH=VALUE line per field --set can set")  # fmt: skip
    p.set_defaults(func=cmd_config)

    p = sub.add_parser("schemes", help="list the registered schemes")
    p.add_argument("--json", action="store_true", help="the registry as JSON")
    p.set_defaults(func=cmd_schemes)

    p = sub.add_parser("trace", help="generate or inspect traces")
    tsub = p.add_subparsers(dest="trace_command", metavar="SUBCOMMAND", required=True)
    g = tsub.add_parser("gen", help="write a generated trace as a Mahimahi file")
    g.add_argument("spec", metavar="SPEC", help="e.g. constant:12, markov:20,2,5,1[,seed]")
    g.add_argument("--duration", type=o.duration, required=True, metavar="S")
    g.add_argument("--out", type=o.out_path, metavar="FILE", help="output file (default: stdout)")
    g.set_defaults(func=cmd_trace_gen)
    i = tsub.add_parser("info", help="mean rate, period, min/max over 1 s bins")
    i.add_argument("file", metavar="FILE", help="trace file (or gen:SPEC with --duration)")
    i.add_argument("--trace-format", choices=("mahimahi", "rate"))
    i.add_argument("--duration", type=o.duration, default=None, metavar="S",
                   help="for gen:SPEC: how long to generate (default 60)")  # fmt: skip
    i.add_argument("--json", action="store_true")
    i.set_defaults(func=cmd_trace_info)


def cmd_config(args: argparse.Namespace) -> int:
    from .. import config
    from ..run import RunSpec, planned_config, validate_config

    name, composition = o.scheme_from_args(args)
    info = (config.scheme_info(name) or {}) if composition is None else {}
    encoder = info.get("encoder") or args.encoder or "model"
    if args.encoder and info.get("encoder") and args.encoder != info["encoder"]:
        raise SluiceError(f"scheme {name} is defined with the {info['encoder']} encoder")
    spec = RunSpec(scheme=name, scheme_config=composition, overrides=tuple(args.overrides))
    cfg = planned_config(spec, encoder)
    validate_config(cfg)  # what `run` refuses, `config` refuses too
    if args.paths:
        flat = config.flatten(cfg)
        for k, v in flat.items():
            if k not in config.FRONT_END_PATHS:
                print(f"{k}={json.dumps(v)}")
        print(f"# set by a run from its options ({', '.join(config.FRONT_END_PATHS)}): "
              "--trace, --uplink-trace, --scheme")
        # What a run's config holds only once set (--set creates it from these defaults).
        optional = {k: v for k, v in config.flatten(config.OPTIONAL_FIELDS).items()
                    if k not in flat and not any(k.startswith(f + ".") for f in flat)}  # fmt: skip
        if optional:
            print("# optional: absent from a run's config unless set to other values; defaults:")
            for k, v in optional.items():
                print(f"{k}={json.dumps(v)}")
    else:
        print(json.dumps(cfg, indent=2))
    return 0


def cmd_schemes(args: argparse.Namespace) -> int:
    from ..config import registry

    reg = registry()
    if args.json:
        print(json.dumps(reg, indent=2))
        return 0
    width = max((len(s["name"]) for s in reg), default=0)
    for s in reg:
        print(f"{s['name'].ljust(width)}  {s['color']}  {s['description']}")
    return 0


def cmd_trace_gen(args: argparse.Namespace) -> int:
    from ..errors import output_file
    from ..results import not_a_result_file, temp_path
    from ..traces import generate, mahimahi_pieces

    if args.out:  # before generating: nothing is written over a device or a run's data
        not_a_result_file(args.out, "--out")
    trace = generate(args.spec, args.duration)
    if args.out:
        path = output_file(args.out, "--out")
        if path.parent != Path(""):
            path.parent.mkdir(parents=True, exist_ok=True)
        tmp = temp_path(path)  # renamed into place when complete
        try:
            try:
                with open(tmp, "w", encoding="utf-8", newline="\n") as f:
                    for piece in mahimahi_pieces(trace):
                        f.write(piece)
            except OSError as e:  # a full disk: said with the file it was for
                raise SluiceError(f"cannot write {path}: {e.strerror or e}") from None
            os.replace(tmp, path)
        finally:
            tmp.unlink(missing_ok=True)
        print(
            f"wrote {path}: mean {trace.mean_rate_bps / 1e6:.3f} Mbit/s, "
            f"period {trace.period_s:g} s",
            file=sys.stderr,
        )
    else:
        for piece in mahimahi_pieces(trace):
            sys.stdout.write(piece)
    return 0


def cmd_trace_info(args: argparse.Namespace) -> int:
    from ..traces import bin_rates_bps, is_generated, load_trace

    if args.duration is not None and not is_generated(args.file):
        raise SluiceError(f"--duration is for a generated trace (gen:SPEC); {args.file} has its "
                          "own length")  # fmt: skip
    o.check_trace_format(args.trace_format, args.file)
    duration = 60.0 if args.duration is None else args.duration
    lt = load_trace(args.file, duration_s=duration, fmt=args.trace_format)
    bins = bin_rates_bps(lt.trace, 1.0)
    info = {
        "name": lt.name,
        "format": lt.format,
        "sha256": lt.sha256,
        "period_s": lt.trace.period_s,
        "mean_rate_mbps": lt.trace.mean_rate_bps / 1e6,
        "min_1s_mbps": min(bins) / 1e6 if bins else None,
        "max_1s_mbps": max(bins) / 1e6 if bins else None,
    }
    if args.json:
        print(json.dumps(info, indent=2))
        return 0
    print(f"trace:     {args.file} ({lt.format})")
    print(f"period:    {info['period_s']:.3f} s")
    print(f"mean rate: {info['mean_rate_mbps']:.3f} Mbit/s")
    if bins:
        print(f"1 s bins:  min {info['min_1s_mbps']:.3f}  max {info['max_1s_mbps']:.3f} Mbit/s")
    print(f"sha256:    {lt.sha256}")
    return 0

