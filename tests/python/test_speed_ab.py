"""`bench/speed_ab.py`: two builds' simulator speed side by side (issue 26). Run here with
the same build on both sides, short: the JSON has both sides for every scheme asked for, and
a folder without a build is refused in one line."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import sluice

BENCH = Path(__file__).resolve().parents[2] / "bench" / "speed_ab.py"
BUILD = Path(sluice.__file__).resolve().parent.parent


def test_two_builds_are_measured_scheme_by_scheme(tmp_path):
    out = subprocess.run([sys.executable, str(BENCH), "--a", str(BUILD), "--b", str(BUILD),
                          "--rounds", "2", "--seconds", "2", "--schemes", "webrtc", "copa"],
                         capture_output=True, text=True, check=True)  # fmt: skip
    d = json.loads(out.stdout)
    assert set(d["schemes"]) == {"webrtc", "copa"}
    for r in d["schemes"].values():
        assert r["a"] > 0 and r["b"] > 0
        assert abs(r["b_over_a"] - r["b"] / r["a"]) < 0.01
    assert "round 2/2 done" in out.stderr


def test_a_folder_without_a_build_is_refused(tmp_path):
    out = subprocess.run([sys.executable, str(BENCH), "--a", str(tmp_path), "--b", str(BUILD)],
                         capture_output=True, text=True)  # fmt: skip
    assert out.returncode == 2 and "has no sluice package" in out.stderr
