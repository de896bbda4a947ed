"""Trace files are read line by line (issue 30): memory for the opportunities kept, not the
file. A 227 MB Mahimahi file (33 million opportunities, 264 MB of them kept) loads under a
700 MB address-space limit; reading it whole (bytes, text and the opportunities) did not."""

from __future__ import annotations

import hashlib
import resource
import subprocess
import sys

from sluice.traces import load_trace

LIMIT = 700 << 20


def _limit() -> None:
    resource.setrlimit(resource.RLIMIT_AS, (LIMIT, LIMIT))


def test_a_227_mb_trace_loads_in_memory_for_its_opportunities(tmp_path):
    path = tmp_path / "big.mahi"
    with open(path, "w") as f:
        for c in range(1000):  # 1000 s at 33 opportunities a millisecond (397 Mbit/s)
            f.write("".join(f"{ms}\n" * 33 for ms in range(c * 1000 + 1, c * 1000 + 1001)))
    assert path.stat().st_size > 220e6
    p = subprocess.run([sys.executable, "-m", "sluice", "trace", "info", str(path), "--json"],
                       capture_output=True, text=True, timeout=300,
                       preexec_fn=_limit)  # fmt: skip
    assert p.returncode == 0, p.stderr
    assert '"period_s": 1000.0' in p.stdout, p.stdout
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            h.update(block)
    assert h.hexdigest() in p.stdout  # the SHA-256 of the bytes, read in blocks too


def test_a_file_reads_as_its_text_did(tmp_path):
    """Comments, blank lines and CRLF as before; the SHA-256 of the file's bytes."""
    path = tmp_path / "t.mahi"
    path.write_bytes(b"# a note\r\n1\r\n\r\n1 # two at 1 ms\r\n5\r\n")
    lt = load_trace(str(path))
    assert (lt.format, lt.trace.period_s, len(lt.trace)) == ("mahimahi", 0.005, 3)
    assert lt.sha256 == hashlib.sha256(path.read_bytes()).hexdigest()
    rate = tmp_path / "r.txt"
    rate.write_text("# time_s rate_mbps\n0 12\n1, 6\n")
    assert load_trace(str(rate)).format == "rate"
