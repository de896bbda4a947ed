"""A full disk (issue 30): one line naming the file that did not fit, exit 2, and nothing
half-written left as a result (a fresh directory is removed, an older result stays whole).

On a real 256 kB tmpfs where the machine lets this process mount one (root), and, anywhere,
with ENOSPC raised in the middle of writing a result."""

from __future__ import annotations

import errno
import os
import subprocess
import sys
from pathlib import Path

import pytest
from sluice import results
from sluice.errors import SluiceError

T = "gen:constant:12"


@pytest.fixture
def small_disk(tmp_path):
    """A 256 kB tmpfs (skipped where mounting is not allowed)."""
    mnt = tmp_path / "disk"
    mnt.mkdir()
    p = subprocess.run(["mount", "-t", "tmpfs", "-o", "size=256k", "tmpfs", str(mnt)],
                       capture_output=True, text=True, check=False)  # fmt: skip
    if p.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs here: {p.stderr.strip()}")
    try:
        yield mnt
    finally:
        subprocess.run(["umount", str(mnt)], check=False)


def _sluice(*args: str, cwd: Path) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "sluice", *args], cwd=cwd, capture_output=True,
                          text=True, timeout=300, stdin=subprocess.DEVNULL)  # fmt: skip


def _one_line(p: subprocess.CompletedProcess, *needles: str) -> str:
    assert p.returncode == 2, (p.returncode, p.stderr)
    assert "Traceback" not in p.stderr, p.stderr
    lines = p.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("sluice: error: "), p.stderr
    for n in needles:
        assert n in lines[0], (n, lines[0])
    return lines[0]


def test_run_on_a_full_disk(small_disk, tmp_path):
    out = small_disk / "r"
    p = _sluice("run", "--trace", T, "--duration", "10", "--out", str(out), cwd=tmp_path)
    _one_line(p, f"{out}/run.jsonl", "No space left on device")
    assert list(small_disk.iterdir()) == []  # no directory, no temporary file
    # A result that fits, then one that does not: the first stays whole.
    p = _sluice("run", "--trace", T, "--duration", "1", "--out", str(out), cwd=tmp_path)
    assert p.returncode == 0, p.stderr
    before = {f.name: f.read_bytes() for f in out.iterdir()}
    p = _sluice("run", "--trace", T, "--duration", "10", "--out", str(out), "--seed", "2",
                cwd=tmp_path)  # fmt: skip
    _one_line(p, "run.jsonl", "No space left on device")
    assert {f.name: f.read_bytes() for f in out.iterdir()} == before
    assert results.incomplete_reason(out) is None


def test_trace_gen_and_matrix_on_a_full_disk(small_disk, tmp_path):
    out = small_disk / "t.mahi"
    p = _sluice("trace", "gen", "constant:100", "--duration", "60", "--out", str(out),
                cwd=tmp_path)  # fmt: skip
    _one_line(p, str(out), "No space left on device")
    assert list(small_disk.iterdir()) == []
    plan = tmp_path / "p.toml"
    plan.write_text('name = "full"\nseeds = [1, 2]\n[set]\nduration_s = 10\n'
                    '[[scheme]]\nname = "webrtc"\n[[trace]]\npath = "gen:constant:12"\n')
    p = _sluice("matrix", str(plan), "--results", str(small_disk), "--no-report", cwd=tmp_path)
    assert p.returncode == 2, p.stderr
    assert "Traceback" not in p.stderr and "OSError" not in p.stderr, p.stderr
    failed = [x for x in p.stderr.splitlines() if "failed:" in x]
    assert failed and all("No space left on device" in x and "run.jsonl" in x
                          for x in failed), p.stderr  # fmt: skip
    for d in (small_disk / "full").rglob("s*"):
        assert results.incomplete_reason(d) is not None  # never taken for a result


def _enospc_after(monkeypatch, n: int) -> None:
    """results._dumps raises ENOSPC at its n-th call (the n-th record written)."""
    real = results._dumps
    calls = {"n": 0}

    def dumps(obj):
        calls["n"] += 1
        if calls["n"] >= n:
            raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))
        return real(obj)

    monkeypatch.setattr(results, "_dumps", dumps)


def _write(d: Path, frames: int) -> Path:
    header = {"record": "header", "schema_version": results.SCHEMA_VERSION}
    return results.write_run(d, header, [{"frame_id": i} for i in range(frames)], [],
                             {"frames": frames})  # fmt: skip


def test_enospc_mid_write_leaves_nothing_half_written(tmp_path, monkeypatch):
    fresh = tmp_path / "a" / "b"
    _enospc_after(monkeypatch, 5)
    with pytest.raises(SluiceError, match=r"a/b/run.jsonl: No space left on device"):
        _write(fresh, 10)
    assert list(tmp_path.iterdir()) == []  # the directories it made are gone
    monkeypatch.undo()
    old = _write(tmp_path / "r", 3)
    before = {f.name: f.read_bytes() for f in old.iterdir()}
    _enospc_after(monkeypatch, 5)
    with pytest.raises(SluiceError, match="No space left on device"):
        _write(old, 10)
    assert {f.name: f.read_bytes() for f in old.iterdir()} == before
    assert results.incomplete_reason(old) is None
