"""The ``sluice`` command line: one module per command group.

* :mod:`.run`: ``run``, ``compare``, ``matrix``, ``report``, ``plot`` (the simulator);
* :mod:`.tools`: ``config``, ``schemes``, ``trace gen|info``;
* :mod:`.live`: ``live run|send|recv|relay|merge`` (real UDP);
* :mod:`.browser`: ``browser run`` (Chromium in the loop);
* :mod:`.options`: the options, argument types and spec building they share.

User mistakes (bad arguments, missing or malformed files, invalid configs and plans) are
reported as one ``sluice: error: ...`` line on stderr with exit status 2: they are
:class:`~sluice.errors.SluiceError` (the extension's rejections of user input are converted
where the input is handed to it). Anything else is a bug and shows its traceback. Set
``SLUICE_DEBUG=1`` to get the traceback of user errors too.
"""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Sequence

from .. import __version__
from ..errors import SluiceError
from . import options

EXIT_USAGE = options.EXIT_USAGE


def build_parser() -> argparse.ArgumentParser:
    """The whole command line, every group's parsers."""
    from . import browser, live, run, tools

    parser = options.Parser(
        prog="sluice",
        description="Sluice: pacing, congestion control and encoder control for real-time "
        "video, compared on one simulated pipeline.",
    )
    parser.add_argument("--version", action="version", version=f"sluice {__version__}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", required=True)
    for group in (run, tools, live, browser):
        group.add_commands(sub)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """Runs the CLI; returns the exit status (also raises SystemExit for argparse errors)."""
    from ..errors import Terminated, handle_sigterm

    handle_sigterm()
    parser = build_parser()
    args, extra = parser.parse_known_args(argv)
    args.argv = list(sys.argv[1:] if argv is None else argv)
    if extra:  # said by the command's own parser (`trace info`), whose --help is the one
        own: argparse.ArgumentParser = parser
        while subs := next((a for a in own._actions
                            if isinstance(a, argparse._SubParsersAction)), None):  # fmt: skip
            chosen = getattr(args, subs.dest, None)
            if chosen not in subs.choices:
                break
            own = subs.choices[chosen]
        own.error(f"unrecognized arguments: {' '.join(extra)}")
    debug = os.environ.get("SLUICE_DEBUG", "") not in ("", "0")
    try:
        return int(args.func(args) or 0)
    except SluiceError as e:
        if debug:
            raise
        return options.fail(str(e))
    except BrokenPipeError:  # e.g. `sluice ... | head`: stop quietly
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        return 141
    except OSError as e:
        if debug:
            raise
        if e.filename:
            return options.fail(f"cannot use {e.filename}: {e.strerror or e}")
        return options.fail(f"{e.strerror or e}")
    except KeyboardInterrupt as e:  # SIGINT, or SIGTERM (Terminated)
        import signal
        import threading

        if threading.current_thread() is threading.main_thread():  # unwound: one line only
            signal.signal(signal.SIGINT, signal.SIG_IGN)
            signal.signal(signal.SIGTERM, signal.SIG_IGN)
        print("sluice: interrupted", file=sys.stderr)
        return 143 if isinstance(e, Terminated) else 130
