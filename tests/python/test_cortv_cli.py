"""Co-RTV from the command line: the two delay flags set the topology and the summary keeps
the bottleneck's drops apart from network loss."""

from __future__ import annotations

from sluice import results


def test_delay_flags_and_bn_drop_rate(sluice, tmp_path):
    out = tmp_path / "cortv"
    r = sluice("run", "--scheme", "co-rtv", "--trace", "gen:steps:20@3,2@3", "--duration", "5",
               "--fps", "60", "--access-delay-ms", "20", "--bn-delay-ms", "5",
               "--out", str(out))  # fmt: skip
    assert r.code == 0, r.err
    header = results.read_header(out)
    cfg = header["config"]
    assert cfg["downlink"]["access_delay_ms"] == 20
    assert cfg["downlink"]["delay_ms"] == 5 and cfg["uplink"]["delay_ms"] == 5
    assert cfg["fps"] == 60
    summary = results.load_run(out).summary
    assert summary["bn_drop_rate"] > 0
    assert summary["loss_rate"] == 0
    assert summary["keyframes"] == 1


def test_bn_delay_and_delay_are_exclusive(sluice):
    r = sluice("run", "--trace", "gen:constant:12", "--delay-ms", "5", "--bn-delay-ms", "5")
    r.assert_one_line_error("--bn-delay-ms", "--delay-ms")
