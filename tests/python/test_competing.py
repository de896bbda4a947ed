"""Competing traffic from the command line (issue 29): ``--competing`` and ``--queue`` reach
the core, the summary gains ``flows`` and ``jain_index``, the time series every flow's rate,
tables numeric per-flow columns, and ``sluice plot`` draws every flow."""

from __future__ import annotations

import json
from types import SimpleNamespace

import matplotlib.pyplot as plt
import pandas as pd
from sluice import plots, results
from sluice.metrics import summary_row
from sluice.plots import competing_rates

NET = ["--trace", "gen:constant:4", "--queue-bytes", "60000", "--delay-ms", "25"]


def test_run_with_competing_flows_reports_every_flow(sluice, tmp_path):
    out = tmp_path / "r"
    r = sluice("run", *NET, "--duration", "25", "--competing", "tcp:cubic@3",
               "--competing", "media:copa@2-20", "--json", "--out", str(out))  # fmt: skip
    assert r.code == 0, r.err
    s = json.loads(r.out)
    flows = s["flows"]
    assert [(f["flow"], f["kind"], f["scheme"]) for f in flows] == [
        (0, "media", "webrtc"), (1, "tcp", "cubic"), (2, "media", "copa")
    ]
    assert flows[2]["start_s"] == 2.0 and flows[2]["stop_s"] == 20.0
    assert abs(sum(f["share"] for f in flows) - 1.0) < 1e-9
    assert all(f["mean_rate_bps"] > 0 for f in flows)
    # All three flows are active from 3 s to 20 s: the index covers 13-20 s.
    assert 1 / 3 <= s["jain_index"] <= 1.0
    # The session's own keys are its own flow's.
    assert s["loss_rate"] == flows[0]["loss_rate"]
    # The header records the specs; the samples carry each flow's rate.
    run = results.load_run(out)
    assert run.header["config"]["competing"] == ["tcp:cubic@3", "media:copa@2-20"]
    got = competing_rates(run)
    assert [(f, name) for f, name, _ in got] == [(1, "tcp:cubic"), (2, "media:copa")]
    assert (run.samples["flow0_rate_bps"] == run.samples["delivered_rate_bps"]).all()
    row = summary_row(s)
    assert isinstance(row["flows_1_share"], float) and "flows" not in row
    assert not any(isinstance(v, str) for k, v in row.items() if k.startswith("flows_"))
    p = sluice("plot", str(out), "--out", str(tmp_path / "plots"))
    assert p.code == 0, p.err
    assert (tmp_path / "plots" / "timeseries.png").stat().st_size > 0


def test_fq_codel_keeps_the_media_flows_queue_short(sluice, tmp_path):
    # CUBIC fills the 60 kB drop-tail queue (120 ms at 4 Mbps) for both flows; FQ-CoDel gives
    # the media flow its own queue under CoDel: P95 about 23 ms over 40 s (its own backlog
    # when CUBIC joins and halves its share is the rest).
    def p95(queue: str) -> float:
        r = sluice("run", *NET, "--duration", "40", "--competing", "tcp:cubic@5", "--queue",
                   queue, "--json", "--out", str(tmp_path / queue))  # fmt: skip
        assert r.code == 0, r.err
        return json.loads(r.out)["flows"][0]["queue_delay_ms_p95"]

    assert p95("droptail") > 90
    assert p95("fq-codel") < 40


def test_a_loss_based_tcp_flow_on_an_unlimited_queue_is_noted(sluice, tmp_path):
    base = ["run", "--trace", "gen:constant:6", "--duration", "2", "--competing"]
    r = sluice(*base, "tcp:cubic@1", "--out", str(tmp_path / "a"))
    assert r.code == 0 and "note: the downlink queue is unlimited" in r.err, r.err
    for more in (["tcp:cubic", "--queue-bytes", "60000"], ["tcp:bbr"], ["media:self"]):
        r = sluice(*base, *more, "--out", str(tmp_path / more[0].replace(":", "-")))
        assert r.code == 0 and "queue is unlimited" not in r.err, (more, r.err)
    # The queue is the one the flow crosses: a flow on the second bottleneck only is noted
    # for the second's (unlimited by default), not the bounded downlink's.
    second = ["--queue-bytes", "60000", "--set", 'second_bottleneck={"rate_mbps":3}', "--set",
              'competing=[{"spec":"tcp:cubic","crosses":"second"}]']  # fmt: skip
    r = sluice(*base[:-1], *second, "--out", str(tmp_path / "second"))
    assert r.code == 0, r.err
    assert "second bottleneck's queue is unlimited" in r.err and "downlink queue" not in r.err
    r = sluice(*base[:-1], *second, "--set", "second_bottleneck.queue_bytes=30000", "--out",
               str(tmp_path / "second-bounded"))  # fmt: skip
    assert r.code == 0 and "queue is unlimited" not in r.err, r.err


def test_a_run_alone_has_no_flow_keys(sluice, tmp_path):
    r = sluice("run", *NET, "--duration", "3", "--json", "--out", str(tmp_path / "a"))
    assert r.code == 0, r.err
    s = json.loads(r.out)
    assert "flows" not in s and "jain_index" not in s
    header = results.load_run(tmp_path / "a").header
    assert "competing" not in header["config"]
    assert "queue_discipline" not in header["config"]["downlink"]


def test_a_compare_with_competing_flows_says_so_in_every_output(sluice, tmp_path):
    out = tmp_path / "cmp"
    r = sluice("compare", "--schemes", "webrtc,copa", "--encoder", "model", *NET, "--duration",
               "13", "--competing", "tcp:cubic@1", "--queue", "fq-codel", "--jobs", "1",
               "--out", str(out))  # fmt: skip
    assert r.code == 0, r.err
    # The terminal, compare.md and the HTML page: the sharing columns and what they mean.
    assert "Jain: Jain's index" in r.out
    md = (out / "compare.md").read_text()
    assert "queue 60000 B (fq-codel)" in md and "competing flows: tcp:cubic@1" in md
    assert "| Jain | own share |" in md and "Jain: Jain's index" in md
    page = (out / "report.html").read_text()
    assert "<th>Jain</th><th>own share</th>" in page
    assert "Jain: Jain&#x27;s index" in page
    # What each flow got, labelled, in compare.md and on the page (the summary.csv columns
    # are numbers only); the session's flow and the TCP flow's shares, as the summaries say.
    for name in ("webrtc", "copa"):
        flows = json.loads((out / name / "summary.json").read_text())["flows"]
        share = [f"{100 * f['share']:.1f}%" for f in flows]
        assert f"| {name} | 0 (session) | media | {name} | 0-end |" in md, md
        assert f"| {name} | 1 | tcp | cubic | 1-end |" in md
        row = next(x for x in md.splitlines() if x.startswith(f"| {name} | 1 |"))
        assert row.split(" | ")[6] == share[1], row
        assert (f"<td>{name}</td><td>0 (session)</td><td>media</td><td>{name}</td>"
                f"<td>0-end</td>") in page
    assert "<p>Network: " in page and "competing flows: tcp:cubic@1" in page
    # The plots' titles name the queue and the competing traffic.
    run = results.load_run(next(out.glob("webrtc*")))
    title = plots._title([run], "Time series")
    assert "(fq-codel)" in title and "competing tcp:cubic@1" in title


def test_competing_adds_to_a_competing_list_given_with_set(sluice, tmp_path):
    r = sluice("run", *NET, "--duration", "3", "--set", 'competing=["tcp:cubic@1"]',
               "--competing", "media:self", "--json", "--out", str(tmp_path / "a"))  # fmt: skip
    assert r.code == 0, r.err
    assert [f["kind"] for f in json.loads(r.out)["flows"]] == ["media", "tcp", "media"]


def test_a_reverse_flow_is_labelled_as_the_uplinks():
    run = SimpleNamespace(
        summary={"flows": [{"flow": 0, "kind": "media", "scheme": "webrtc"},
                           {"flow": 1, "kind": "reverse-media", "scheme": "webrtc"}]},
        samples=pd.DataFrame({"flow0_rate_bps": [1.0], "flow1_rate_bps": [2.0]}),
    )  # fmt: skip
    assert [name for _, name, _ in competing_rates(run)] == ["reverse-media:webrtc (uplink)"]
    run.summary["flows"][1].update(kind="reverse-audio", scheme="cbr")
    assert [name for _, name, _ in competing_rates(run)] == ["reverse-audio:cbr (uplink)"]


def test_time_series_rows_share_a_scale_unless_one_run_would_flatten_the_others():
    def row(*tops: float) -> list:
        fig, axes = plt.subplots(1, len(tops))
        for ax, top in zip(axes, tops):
            ax.plot([0, 1], [0, top])
        return list(axes)

    alike = row(10, 40, 0)
    assert not plots._share_row(alike, bottom_zero=True)
    assert {ax.get_ylim() for ax in alike} == {alike[1].get_ylim()}
    assert alike[1].get_ylim()[1] >= 40
    apart = row(10, 400)
    assert plots._share_row(apart, bottom_zero=True)
    assert apart[0].get_ylim()[1] < 20 and apart[1].get_ylim()[1] >= 400
    plt.close("all")
