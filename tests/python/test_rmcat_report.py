"""The RMCAT suite's report (``python -m sluice.analysis.rmcat``): every plan of
``experiments/rmcat/`` loads, and the report's checks read the runs they are given (two
cases run short, so the test is fast)."""

from __future__ import annotations

import math
from pathlib import Path

import pytest
from sluice import results
from sluice.analysis import rmcat
from sluice.plan import load_plan

REPO = Path(__file__).resolve().parents[2]
PLANS = sorted((REPO / "experiments" / "rmcat").glob("*.toml"))


def test_every_case_has_a_plan_and_every_plan_loads():
    assert {c.plan for c in rmcat.ALL} == {load_plan(p).name for p in PLANS}


def test_jain_index_of_the_report():
    assert rmcat._jain([1.0, 1.0]) == 1.0
    assert rmcat._jain([3.0, 1.0]) == pytest.approx(0.8)
    assert math.isnan(rmcat._jain([]))


def test_the_long_tcp_check_reads_the_media_share(sluice, tmp_path):
    # §5.6 shortened: webrtc against CUBIC from 60 s, on 2 Mbps with a 75 kB queue.
    out = tmp_path / "r"
    r = sluice("run", "--trace", "gen:constant:2", "--queue-bytes", "75000", "--delay-ms", "50",
               "--duration", "100", "--competing", "tcp:cubic@60-240", "--out", str(out))
    assert r.code == 0, r.err
    ok, text = rmcat._check_56(results.load_run(out))
    # The media's share over 70-100 s: GCC backs off against CUBIC (the full-length case
    # gives 8 %; here the media has 30 s of it).
    share = float(text.split("media share ")[1].split()[0])
    assert 0.0 < share < 0.5, text
    assert ok == (share >= 0.2)
