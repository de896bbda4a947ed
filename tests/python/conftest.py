"""Shared helpers for the Python tests: run the CLI in-process and capture its output; play a
forwarded RTP stream in ffmpeg."""

from __future__ import annotations

import re
import signal
import subprocess
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

import pytest
from sluice.cli import main

# A test run started in the background (`make test &`, `nohup make check-fresh &`) inherits
# SIGINT ignored, and an ignored signal stays ignored in every child it starts: the tests
# that interrupt a child with SIGINT would then wait for nothing. A handler, unlike SIG_IGN,
# is reset to the default in a child at exec, so the children get Python's usual SIGINT.
if signal.getsignal(signal.SIGINT) == signal.SIG_IGN:
    signal.signal(signal.SIGINT, signal.default_int_handler)


@pytest.fixture(autouse=True)
def _signal_handlers_restored() -> Iterator[None]:
    """An in-process main() that was interrupted ignores SIGINT and SIGTERM from then on
    (one `sluice: interrupted` line, however often the user presses Ctrl-C); in the test
    process every later child would inherit that and outlive the signals its test sends."""
    handlers = {sig: signal.getsignal(sig) for sig in (signal.SIGINT, signal.SIGTERM)}
    yield
    for sig, handler in handlers.items():
        signal.signal(sig, handler)


@dataclass
class Result:
    code: int
    out: str
    err: str

    def assert_one_line_error(self, *needles: str) -> None:
        """Exit status 2 and exactly one ``sluice: error: ...`` line containing ``needles``."""
        assert self.code == 2, self
        lines = self.err.strip().splitlines()
        assert len(lines) == 1, self.err
        assert lines[0].startswith("sluice: error: "), self.err
        assert "Traceback" not in self.err
        for n in needles:
            assert n in lines[0], (n, lines[0])


@pytest.fixture
def sluice(capsys):
    """Calls ``sluice ARGS...`` in-process; returns exit code, stdout and stderr."""

    def run(*argv: str) -> Result:
        capsys.readouterr()
        try:
            code = main(list(argv))
        except SystemExit as e:  # argparse errors and --help
            code = int(e.code or 0)
        captured = capsys.readouterr()
        return Result(code, captured.out, captured.err)

    return run


class Player:
    """ffmpeg playing the RTP stream an SDP file describes (``-f null``)."""

    def __init__(self, proc: subprocess.Popen) -> None:
        self.proc = proc
        self.err = ""

    def stop(self) -> str:
        """Lets the last frames arrive, stops the player (Ctrl-C) and returns what it said."""
        time.sleep(0.5)
        self.proc.send_signal(signal.SIGINT)
        _, self.err = self.proc.communicate(timeout=30)
        return self.err

    def assert_played(self, shown: int, size: str = "320x180") -> None:
        """It decoded H.264 of ``size`` without an error line: all of the ``shown`` frames
        but the last one or two (still in its buffers when it was stopped)."""
        err = self.err
        assert "Video: h264" in err and size in err, err
        assert not [ln for ln in err.splitlines() if "error" in ln.lower()], err
        decoded = int(re.findall(r"frame=\s*(\d+)", err)[-1])
        assert shown - 3 <= decoded <= shown, (decoded, shown)


@contextmanager
def _rtp_player(sdp: Path) -> Iterator[Player]:
    """Starts ffmpeg on ``sdp`` and gives it a second to listen before the stream starts;
    kills it on the way out if :meth:`Player.stop` was not reached."""
    import imageio_ffmpeg

    cmd = [imageio_ffmpeg.get_ffmpeg_exe(), "-hide_banner", "-protocol_whitelist",
           "file,udp,rtp", "-i", str(sdp), "-f", "null", "-"]  # fmt: skip
    proc = subprocess.Popen(cmd, stderr=subprocess.PIPE, text=True)
    try:
        time.sleep(1.0)
        yield Player(proc)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.communicate()


@pytest.fixture
def rtp_player():
    """``with rtp_player(sdp) as player:`` ffmpeg plays the stream ``sdp`` describes."""
    return _rtp_player
