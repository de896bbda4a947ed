"""Experiment plans and ``sluice matrix``: cells, sweeps, resuming, the results table, plan
errors; the generic table plots; the ACE plans and report (sluice.analysis.ace)."""

from __future__ import annotations

import math
import os
import textwrap
from pathlib import Path

import pandas as pd
import pytest
from sluice import config, experiments, metrics, plots, results
from sluice import plan as plans
from sluice.analysis import (
    ANALYSIS_CLOSE,
    ANALYSIS_OPEN,
    ANALYSIS_PLACEHOLDER,
    ace,
    existing_analysis,
)
from sluice.analysis import load as load_results
from sluice.errors import SluiceError

REPO = Path(__file__).resolve().parents[2]
PNG = b"\x89PNG\r\n\x1a\n"

# Model encoder (no clip), 2 s of a generated trace, 2 schemes x 2 seeds plus a sweep
# variant of one of them: the whole matrix runs in seconds.
TINY = """\
name = "tiny"
seeds = [1, 2]

[set]
duration_s = 2
downlink.queue_bytes = 100000

[[scheme]]
name = "webrtc"
[[scheme]]
name = "always-burst"

[[trace]]
path = "gen:constant:12"
label = "const12"
network = "wired"

[[sweep]]
path = "cc.pacing_factor"
values = [1.1, 2.0]
schemes = ["webrtc"]
label = "P"
"""


def _plan_file(tmp: Path, text: str, name: str = "plan.toml") -> Path:
    p = tmp / name
    p.write_text(textwrap.dedent(text))
    return p


@pytest.fixture(scope="module")
def tiny(tmp_path_factory):
    """The tiny plan, run once with --jobs 2: (plan file, results root, first result)."""
    from sluice.cli import main

    tmp = tmp_path_factory.mktemp("matrix")
    plan = _plan_file(tmp, TINY)
    root = tmp / "results"
    assert main(["matrix", str(plan), "--jobs", "2", "--results", str(root)]) == 0
    return plan, root


def test_cells_and_sweep(tmp_path):
    p = plans.load_plan(_plan_file(tmp_path, TINY))
    assert [s.name for s in p.schemes] == ["webrtc", "webrtc-P2", "always-burst"]
    cells = p.cells(tmp_path / "r")
    assert [(c.scheme, c.seed) for c in cells] == [
        ("webrtc", 1), ("webrtc", 2), ("webrtc-P2", 1), ("webrtc-P2", 2),
        ("always-burst", 1), ("always-burst", 2),
    ]  # fmt: skip
    assert {c.base_scheme for c in cells} == {"webrtc", "always-burst"}
    assert cells[0].run_dir == tmp_path / "r" / "tiny" / "const12" / "model" / "webrtc" / "s1"
    swept = {c.scheme: dict(c.swept) for c in cells}
    # webrtc's own pacing factor (1.1) is a point of the sweep: its cells stand for it.
    assert swept == {"webrtc": {"cc.pacing_factor": 1.1}, "webrtc-P2": {"cc.pacing_factor": 2.0},
                     "always-burst": {}}  # fmt: skip
    # The variant differs from its parent in exactly the swept path.
    a, b = cells[0].spec.config(), cells[2].spec.config()
    assert config.diff(a, b) == ["cc.pacing_factor"]
    assert b["scheme_name"] == "webrtc-P2"
    assert a["duration_s"] == 2.0 and a["downlink"]["queue_bytes"] == 100_000


def test_sweep_defaults_to_every_scheme_with_the_path(tmp_path):
    p = plans.load_plan(_plan_file(tmp_path, """\
        name = "s"
        schemes = ["webrtc", "always-burst", {name = "acen", base = "ace-n", encoder = "model"}]
        [[trace]]
        path = "gen:constant:12"
        [[sweep]]
        path = "scheme.pacer.threshold_packets"
        values = [5, 20]
        """))  # fmt: skip
    assert [s.name for s in p.schemes] == ["webrtc", "always-burst", "acen", "acen-T5",
                                           "acen-T20"]  # fmt: skip
    assert p.sweeps[0].path == "pacer.threshold_packets" and p.sweeps[0].schemes == ("acen",)
    cells = {c.scheme: c for c in p.cells(tmp_path)}
    assert config.diff(cells["acen"].spec.config(), cells["acen-T20"].spec.config()) == [
        "pacer.threshold_packets"]  # fmt: skip
    assert cells["acen-T5"].spec.config()["encoder"]["kind"] == "model"


def test_sweep_variant_names_keep_their_values_apart(tmp_path):
    # `:g` kept six digits (100.00001 and 100.00002 were one name) and an exponent's `+`
    # became `-` (2e6 read as 2e-06).
    p = plans.load_plan(_plan_file(tmp_path, """\
        name = "s"
        schemes = ["webrtc"]
        [[trace]]
        path = "gen:constant:12"
        [[sweep]]
        path = "cc.pacing_factor"
        label = "P"
        values = [2.5, 10.00001, 10.00002, 1.5e-1]
        [[sweep]]
        path = "cc.loss_based_v2.bandwidth_rampup_upper_bound_factor"
        label = "R"
        values = [2e6, 3e6]
        """))  # fmt: skip
    assert [s.name for s in p.schemes] == [
        "webrtc", "webrtc-P2.5", "webrtc-P10.00001", "webrtc-P10.00002", "webrtc-P0.15",
        "webrtc-R2e06", "webrtc-R3e06"]  # fmt: skip


def test_matrix_runs_resumes_and_reruns(tiny, sluice, monkeypatch):
    plan, root = tiny
    table = root / "tiny" / "results.csv"
    df = pd.read_csv(table)
    assert len(df) == 6
    assert list(df.columns[:8]) == [*experiments.LABEL_COLUMNS, "cc.pacing_factor"]
    assert list(df.columns[-2:]) == experiments.TAIL_COLUMNS
    assert df["cc.pacing_factor"].tolist()[:4] == [1.1, 1.1, 2.0, 2.0]
    assert df["cc.pacing_factor"].iloc[4:].isna().all()
    assert set(df["plan"]) == {"tiny"} and set(df["network"]) == {"wired"}
    assert (df["latency_ms_p95"] >= df["latency_ms_p50"]).all()
    for m in metrics.FRAME_METRICS:
        assert m in df
    burst = df.groupby("scheme")["burst_share"].mean()
    assert burst["always-burst"] == 1.0 and burst["webrtc"] < 0.5
    assert df["c0_share"].isna().all()  # no ACE-C
    # The table names each run relative to itself; read_table gives paths to read.
    assert df["run_dir"][0] == os.path.join("const12", "model", "webrtc", "s1")
    dirs = experiments.read_table(table)["run_dir"]
    assert dirs[0] == str(root / "tiny" / "const12" / "model" / "webrtc" / "s1")
    for d in dirs:
        header = results.read_header(d)
        assert header["config"]["duration_s"] == 2.0
    seeds = {(s, d): results.read_header(d)["seed"] for s, d in zip(df["scheme"], dirs)}
    assert sorted(set(seeds.values())) == [1, 2]
    assert (root / "tiny" / plans.PLAN_FILE).is_file()

    calls: list[int] = []
    real = experiments.run_many

    def counting(specs, **kw):
        calls.append(len(specs))
        return real(specs, **kw)

    monkeypatch.setattr(experiments, "run_many", counting)
    r = sluice("matrix", str(plan), "--results", str(root), "--jobs", "1")
    assert r.code == 0, r.err
    assert calls == [0] and "6 cells, 0 run now" in r.out
    pd.testing.assert_frame_equal(pd.read_csv(table), df)

    # A lost result reruns only that cell; --only limits what runs, not the table.
    (Path(dirs[1]) / results.SUMMARY_FILE).unlink()
    r = sluice("matrix", str(plan), "--results", str(root), "--jobs", "1", "--only", "webrtc")
    assert r.code == 0, r.err
    assert calls == [0, 1]
    again = pd.read_csv(table)
    assert len(again) == 6 and again["latency_ms_p95"].tolist() == df["latency_ms_p95"].tolist()

    r = sluice("matrix", str(plan), "--results", str(root), "--dry-run", "--rerun", "all")
    assert r.code == 0 and calls == [0, 1]
    assert r.out.count("\nrun ") + r.out.startswith("run ") == 6

    r = sluice("matrix", str(plan), "--results", str(root), "--rerun", "all", "--jobs", "1",
               "--only", "always-burst")  # fmt: skip
    assert r.code == 0, r.err
    assert calls == [0, 1, 2]


def test_changed_setting_reruns_its_cells(tiny, tmp_path, monkeypatch):
    plan, root = tiny
    text = plan.read_text().replace("duration_s = 2", "duration_s = 1.5")
    cells = plans.load_plan(_plan_file(tmp_path, text)).cells(root)
    assert len(experiments.todo_cells(cells)) == 6
    assert experiments.todo_cells(plans.load_plan(plan).cells(root)) == []


def test_a_changed_plan_run_with_only_leaves_the_other_cells_out_of_the_table(sluice, tmp_path):
    # Cells of the plan before a change are not mixed with those after it: a matrix run
    # with --only after the change tables only the cells of the plan as it now is.
    text = TINY.replace("seeds = [1, 2]", "seeds = [1]").split("[[sweep]]")[0]
    plan = _plan_file(tmp_path, text)
    root = tmp_path / "results"
    assert sluice("matrix", str(plan), "--results", str(root), "--jobs", "1").code == 0
    assert len(pd.read_csv(root / "tiny" / "results.csv")) == 2
    plan.write_text(text.replace("duration_s = 2", "duration_s = 1.5"))
    r = sluice("matrix", str(plan), "--results", str(root), "--jobs", "1", "--only", "webrtc")
    assert r.code == 0, r.err
    df = pd.read_csv(root / "tiny" / "results.csv")
    assert df["scheme"].tolist() == ["webrtc"], df
    assert "1 with results" in r.out
    assert "plan (duration, config, trace files, ...) in 1 cell(s) of always-burst" in r.err


@pytest.mark.parametrize(
    "change, needles",
    [
        (("[[scheme]]\nname = \"webrtc\"", "[[scheme]]\nname = \"nosuch\""),
         ["scheme 'nosuch'", "unknown scheme 'nosuch'"]),
        (("label = \"P\"", "label = \"P\"\nbogus = 1"), ["unknown key 'bogus'", "path, values"]),
        (("duration_s = 2", "duration_s = \"two\""), ["'duration_s' takes a number"]),
        (("duration_s = 2", "pacer.nope = 2"), ["unknown config path 'pacer.nope'",
                                                "(leaky-bucket)"]),
        (("path = \"cc.pacing_factor\"", "path = \"pacing_factor\""),
         ["unknown config path 'pacing_factor'"]),
        (("label = \"const12\"", "label = \"const12\"\n[[trace]]\npath = \"gen:constant:5\"\n"
          "label = \"const12\""), ["trace label listed twice: const12"]),
        (("seeds = [1, 2]", "seeds = [1, 1]"), ["seed listed twice"]),
        (("seeds = [1, 2]", "seeds = 1"), ["'seeds' must be an array"]),
        (("[[scheme]]\nname = \"always-burst\"", "[[scheme]]\nname = \"always-burst\"\n"
          "set = { \"cc.pacing_factor\" = 2 }"), ["is a registered scheme"]),
        (("label = \"P\"", "label = \"P\"\n[video]\nwidth = 8"), ["'width' must be"]),
        (("label = \"P\"", "label = \"P\"\n[video]\nkeep_streams = \"no\""),
         ["'keep_streams' must be true or false"]),
        (("name = \"tiny\"", "name = tiny"), ["invalid TOML"]),
        (("name = \"tiny\"", "name = \"ti/ny\""), ["plain file name"]),
    ],
)  # fmt: skip
def test_plan_mistakes_are_one_line(sluice, tmp_path, change, needles):
    old, new = change
    assert old in TINY
    plan = _plan_file(tmp_path, TINY.replace(old, new, 1))
    r = sluice("matrix", str(plan), "--results", str(tmp_path / "r"))
    r.assert_one_line_error(f"{plan}: ", *needles)
    assert not (tmp_path / "r").exists()  # nothing ran


def test_missing_inputs(sluice, tmp_path):
    base = TINY + '\n[[trace]]\npath = "no/such.mahi"\nlabel = "gone"\n'
    plan = _plan_file(tmp_path, base)
    r = sluice("matrix", str(plan), "--results", str(tmp_path / "r"), "--dry-run")
    r.assert_one_line_error("trace 'gone'", "trace file not found",
                            str(tmp_path / "no" / "such.mahi"), "optional = true")  # fmt: skip
    plan.write_text(base + "optional = true\n")
    r = sluice("matrix", str(plan), "--results", str(tmp_path / "r"), "--dry-run")
    assert r.code == 0, r.err
    assert "warning:" in r.err and "trace 'gone' and its 6 cells skipped" in r.err
    assert "gone" not in r.out and "6 to run" in r.out
    r = sluice("matrix", str(plan), "--results", str(tmp_path / "r"), "--only", "nosuch")
    r.assert_one_line_error("--only: 'nosuch' is not a scheme", "webrtc-P2")


def test_x264_scheme_without_clips(tmp_path):
    with pytest.raises(SluiceError, match="scheme 'ace': it is defined on x264 and needs a clip"):
        plans.load_plan(_plan_file(tmp_path, TINY.replace('name = "always-burst"',
                                                          'name = "ace"')))  # fmt: skip


def test_ace_plans_load():
    for name, n_schemes in (("ace.toml", 11), ("ace-quick.toml", 10)):
        p = plans.load_plan(REPO / "experiments" / name)
        names = [s.name for s in p.schemes]
        assert len(names) == n_schemes and names[0] == "webrtc-x264"
        assert names.index("ace-T7.5") == names.index("ace") + 1
        unc = p.scheme("ace-uncorrected")
        clip = plans.PlanClip("x.mp4", "x")
        trace = plans.PlanTrace("gen:constant:1", "t")
        a = p.spec(p.scheme("ace"), trace, clip, 1).config()
        b = p.spec(unc, trace, clip, 1).config()
        assert config.diff(a, b) == ["encoder_controller.planned_size_scale"]
        assert b["encoder"]["kind"] == "x264" and b["encoder"]["encode_time"] == "modeled"
        t = p.spec(p.scheme("ace-T15"), trace, clip, 1).config()
        assert config.diff(a, t) == ["pacer.threshold_packets"]


def test_ace_attribution_plan_switches_one_path_per_variant():
    p = plans.load_plan(REPO / "experiments" / "ace-attribution.toml")
    clip = plans.PlanClip("x.mp4", "x")
    trace = plans.PlanTrace("gen:constant:1", "t")
    switched = {
        "oldpushback": "cc.congestion_window.drop_frame",
        "classicloss": "cc.loss_based_v2.enabled",
        "alrprobe": "cc.alr_probing",
    }
    bases = ("webrtc-x264", "ace", "always-burst")
    names = [s.name for s in p.schemes]
    assert len(names) == len(bases) * (1 + len(switched))
    for base in bases:
        ref = p.spec(p.scheme(base), trace, clip, 1).config()
        for label, path in switched.items():
            variant = next(n for n in names if n.startswith(f"{base}-{label}"))
            cfg = p.spec(p.scheme(variant), trace, clip, 1).config()
            assert config.diff(ref, cfg) == [path], variant


def test_a_copied_results_folder_reads_its_own_runs_from_anywhere(tiny, tmp_path, sluice,
                                                                  monkeypatch):  # fmt: skip
    # The table named each run as the path `sluice matrix` was given: from another folder a
    # report could not find them, and a copy read the original's runs.
    import shutil

    _, root = tiny
    shutil.copytree(root / "tiny", tmp_path / "copy")
    (tmp_path / "elsewhere").mkdir()
    monkeypatch.chdir(tmp_path / "elsewhere")
    dirs = experiments.read_table(Path("..") / "copy")["run_dir"]
    assert all(d.startswith(os.path.join("..", "copy", "const12")) for d in dirs), list(dirs)
    r = sluice("report", os.path.join("..", "copy"))
    assert r.code == 0, r.err
    assert (tmp_path / "copy" / "report.html").is_file()


def test_an_edited_trace_file_reruns_its_cells(tmp_path, sluice):
    # The spec names a trace file by its path: an edited file had the same spec, and its
    # cells kept the results of the old bytes.
    trace = tmp_path / "link.mahi"
    trace.write_text("".join(f"{t}\n" for t in range(1, 1000)))
    plan = _plan_file(tmp_path, f"""\
        name = "edit"
        [set]
        duration_s = 1
        [[scheme]]
        name = "webrtc"
        [[scheme]]
        name = "always-burst"
        [[trace]]
        path = "{trace}"
        label = "link"
        [[trace]]
        path = "gen:constant:4"
        label = "gen"
        """)
    root = tmp_path / "r"
    r = sluice("matrix", str(plan), "--results", str(root), "--jobs", "1")
    assert r.code == 0 and "4 cells, 4 run now" in r.out, (r.out, r.err)
    r = sluice("matrix", str(plan), "--results", str(root), "--jobs", "1")
    assert r.code == 0 and "4 cells, 0 run now" in r.out, (r.out, r.err)
    trace.write_text("".join(f"{t}\n" for t in range(1, 1000, 3)))
    # --only another scheme: the edited trace's cell is left out of the table, said once
    r = sluice("matrix", str(plan), "--results", str(root), "--jobs", "1", "--only",
               "always-burst")  # fmt: skip
    assert r.code == 0 and "1 run now, 3 with results" in r.out, (r.out, r.err)
    assert "trace files, ...) in 1 cell(s) of webrtc" in r.err
    assert r.err.count(f"{trace} changed since its cells ran") == 1, r.err
    r = sluice("matrix", str(plan), "--results", str(root), "--jobs", "1")
    assert r.code == 0 and "4 cells, 1 run now" in r.out, (r.out, r.err)


def test_a_matrix_on_two_traces_says_its_first_table_pools_them(tmp_path, sluice):
    # Traces without a network are each their own family (the report titled them "-"),
    # and the pooled table says that its intervals span the traces.
    plan = _plan_file(tmp_path, """\
        name = "two"
        schemes = ["webrtc"]
        trace = [{path = "gen:constant:4", label = "slow"},
                 {path = "gen:constant:12", label = "fast"}]
        set = {duration_s = 2}
        """)
    r = sluice("matrix", str(plan), "--results", str(tmp_path / "r"), "--jobs", "1")
    assert r.code == 0, r.err
    assert "The rows pool 2 traces" in r.out
    page = (tmp_path / "r" / "two" / "report.html").read_text()
    assert "<h2>slow</h2>" in page and "<h2>fast</h2>" in page and "<h2>-</h2>" not in page
    assert "These runs are on 2 traces" in page and "one table per trace family follows" in page
    # Both traces in one family: no per-family table, and none promised.
    plan.write_text(plan.read_text().replace('label = "slow"}', 'label = "slow", network = "x"}')
                    .replace('label = "fast"}', 'label = "fast", network = "x"}'))  # fmt: skip
    r = sluice("matrix", str(plan), "--results", str(tmp_path / "r"), "--jobs", "1")
    assert r.code == 0 and "The rows pool 2 traces" in r.out and "table per" not in r.out, r.out
    page = (tmp_path / "r" / "two" / "report.html").read_text()
    assert "These runs are on 2 traces" in page and "follows" not in page


# --- analysis -------------------------------------------------------------------------------


def test_table_plots(tiny, tmp_path):
    _, root = tiny
    df = load_results(root / "tiny").table
    outs = [
        plots.plot_tradeoff(df, tmp_path / "tradeoff.png"),
        plots.plot_latency_cdf_pooled(df, tmp_path / "cdf.png", logx=True),
        plots.plot_bars(df, tmp_path / "bars.png"),
        plots.plot_param_sweep(
            df,
            tmp_path / "sweep.png",
            param="cc.pacing_factor",
            reference=df[df["scheme"] == "always-burst"],
        ),  # fmt: skip
        ace.plot_ablation(df, tmp_path / "ablation.png", baselines=["webrtc"]),
        plots.plot_tradeoff(df.iloc[0:0], tmp_path / "empty.png"),
    ]
    run = results.load_run(df["run_dir"][0])  # webrtc: its pacer publishes no ACE-N state
    assert "pacer_bucket_bytes" not in run.samples and "cc_modified_trend" in run.samples
    outs.append(ace.plot_acen_timeseries(run, tmp_path / "acen.png"))
    outs.append(ace.plot_decision_scatter(run, tmp_path / "decisions.png"))
    for p in outs:
        assert p.read_bytes()[:8] == PNG, p
    d = ace.decision_points(run)
    assert len(d) == len(run.frames) and d["queue_bytes"].iloc[1:].notna().all()
    assert ace.acen_threshold(run) == (None, 1260.0)


def test_one_colour_per_scheme_everywhere():
    reg = config.scheme_colors()
    assert plots.scheme_color("webrtc") == reg["webrtc"]
    assert plots.scheme_color("ace-T7.5") == plots.scheme_color("ace-T7.5")
    assert plots.scheme_color("ace-T7.5") not in (reg["ace"], reg["ace-n"])
    assert plots.scheme_color("mine") == plots.scheme_color("mine")
    # a shade for a variant of every registered scheme (hls_to_rgb can overshoot 1 by a
    # rounding error, which newer matplotlib rejects: mae-r0.75 did)
    for name in reg:
        for v in ("r0.75", "theta10", "T7.5", "x"):
            c = plots.scheme_color(f"{name}-{v}")
            assert len(c) == 7 and c.startswith("#"), (name, v, c)
    run = results.Run(Path("."), {"scheme": "mine"}, pd.DataFrame(), pd.DataFrame(), None)
    assert plots.scheme_colors([run]) == [plots.scheme_color("mine")]


def test_a_reports_sweep_variants_are_distinct_shades_of_their_scheme():
    import colorsys

    import matplotlib.colors as mc

    def hls(c):
        return colorsys.rgb_to_hls(*mc.to_rgb(c))

    names = ["webrtc", "webrtc-vbv100", "webrtc-vbv250", "vidaptive", "vidaptive-vbv100",
             "vidaptive-vbv250", "gcc-acen", "gcc-acen-vbv100", "gcc-acen-vbv250"]  # fmt: skip
    # gcc-acen is the plan's own composition (its base is webrtc, its variants' parent it)
    parents = {"gcc-acen-vbv100": "gcc-acen", "gcc-acen-vbv250": "gcc-acen"}
    outside = plots.scheme_color("gcc-acen-vbv100")
    with plots.family_palette(names, parents) as chosen:
        assert chosen == {n: plots.scheme_color(n) for n in names}
    assert plots.scheme_color("gcc-acen-vbv100") == outside  # only within the block
    reg = config.scheme_colors()
    assert chosen["webrtc"] == reg["webrtc"] and chosen["vidaptive"] == reg["vidaptive"]
    for root in ("webrtc", "vidaptive", "gcc-acen"):
        family = [chosen[n] for n in names if n.startswith(root)]
        hues = [hls(c)[0] for c in family]
        assert max(hues) - min(hues) < 0.01, (root, family)  # one hue a family
        lights = sorted(hls(c)[1] for c in family)
        assert min(b - a for a, b in zip(lights, lights[1:])) > 0.15, (root, family)
    # the composition's hue is far from the registered roots' here
    h = hls(chosen["gcc-acen"])[0]
    for root in ("webrtc", "vidaptive"):
        d = abs(h - hls(chosen[root])[0])
        assert min(d, 1 - d) > 0.15, (root, chosen)
    # The same names, in any order, get the same colours (variants ordered by value).
    with plots.family_palette(list(reversed(names)), parents) as again:
        assert again == chosen
    with plots.family_palette(["x-v1000", "x-v250", "x-v100"]) as sweep:
        lights = [hls(sweep[n])[1] for n in ("x-v100", "x-v250", "x-v1000")]
        assert lights == sorted(lights), sweep
    # A registered scheme is never a variant; an enclosing block's colours stand.
    with plots.family_palette(["webrtc", "gcc"], {"webrtc": "gcc"}) as c:
        assert c["webrtc"] == reg["webrtc"]
        with plots.family_palette(["webrtc-vbv100", "other"]):
            assert plots.scheme_color("webrtc") == reg["webrtc"]
            assert plots.scheme_color("gcc") == c["gcc"]


def test_run_labels_tell_apart_the_same_cell_of_two_result_folders(tmp_path):
    def run(path, scheme="webrtc", seed=1):
        return results.Run(Path(path), {"scheme": scheme, "seed": seed}, pd.DataFrame(),
                           pd.DataFrame(), None)  # fmt: skip

    assert plots.run_labels([run("a/x"), run("a/y", "copa")]) == ["webrtc", "copa"]
    assert plots.run_labels([run("a/x"), run("a/y", seed=2)]) == ["webrtc s1", "webrtc s2"]
    assert plots.run_labels([run("res/p/t/webrtc/s1"), run("res2/p/t/webrtc/s1"),
                             run("res/p/t/webrtc/s2", seed=2)]) == [
        "webrtc s1 (res)", "webrtc s1 (res2)", "webrtc s2"]  # fmt: skip
    assert plots.run_labels([run("r1/x/s1"), run("r1/y/s1"), run("r2/x/s1")]) == [
        "webrtc s1 (r1/x)", "webrtc s1 (r1/y)", "webrtc s1 (r2/x)"]  # fmt: skip
    (tmp_path / "live").mkdir()
    (tmp_path / "live" / results.LIVE_FILE).write_text("{}")
    assert plots.run_labels([run(tmp_path / "live"), run(tmp_path / "sim")]) == [
        "webrtc s1 live", "webrtc s1 simulated"]  # fmt: skip


def test_frame_burst_rule():
    frames = pd.DataFrame({
        "size_bytes": [12_000, 12_000, 1_000, 5_000],
        "packets": [10, 10, 1, 4],
        "target_rate_bps": [10e6] * 4,
        "first_packet_sent_us": [0, 0, 0, None],
        # 10.8 kB in 0.5 ms = 173 Mbit/s (burst); in 9.5 ms = 9 Mbit/s (paced)
        "last_packet_sent_us": [500, 9_500, 0, None],
    })  # fmt: skip
    assert metrics.frame_burst(frames).tolist() == [True, False, True, pd.NA]
    assert math.isnan(metrics.complexity_share(frames))
    frames["complexity"] = ["c0", "c1", None, "c0"]
    assert metrics.complexity_share(frames) == pytest.approx(2 / 3)
    assert experiments.clip_label("/a/handheld_flower_1280x720_30fps_10s.mp4") == "handheld_flower"


def test_ace_report_keeps_the_analysis(tiny, tmp_path):
    _, root = tiny
    res = load_results(root / "tiny")
    md = tmp_path / "tiny.md"
    assert existing_analysis(md) == ANALYSIS_PLACEHOLDER
    out = ace.write_report(res, tmp_path)
    assert out == md
    text = md.read_text()
    assert "| `webrtc` | 2 |" in text and "wired" in text and "sluice matrix" in text
    assert f"{ANALYSIS_OPEN}{ANALYSIS_PLACEHOLDER}{ANALYSIS_CLOSE}" in text
    runs = pd.read_csv(tmp_path / "tiny-runs.csv")
    assert len(runs) == 6 and "latency_ms_p95" in runs
    for name in ("ace-tradeoff", "ace-latency-cdf", "ace-loss-stall", "ace-decisions",
                 "ace-n-timeseries"):  # fmt: skip
        assert (tmp_path / "img" / f"{name}.png").read_bytes()[:8] == PNG
    mine = "\nKept.\n\n\n\nAcross regenerations.\n"
    md.write_text(text.replace(ANALYSIS_PLACEHOLDER, mine))
    assert mine in ace.write_report(res, tmp_path).read_text()
    # latency over every capture slot leads; a second (1080p) matrix gets its own section
    text = ace.write_report(res, tmp_path, hd=res).read_text()
    assert "| scheme | runs | all-slot P95 ms | all-slot P99 ms | shown P95 ms |" in text
    assert "### At the paper's resolution" in text and "## ACE-C's switching share" in text
    assert len(pd.read_csv(tmp_path / "tiny-runs.csv")) == 12


def test_ace_module_cli(tiny, tmp_path, capsys):
    plan, root = tiny
    rc = ace.main([str(plan), "--results-root", str(root), "--report-dir", str(tmp_path)])
    assert rc == 0 and (tmp_path / "tiny.md").is_file()
    assert ace.main([str(tmp_path / "missing")]) == 2
    assert "no results directory" in capsys.readouterr().err


def test_the_readme_example_plan(tmp_path):
    text = (REPO / "README.md").read_text()
    block = text.split("```toml\n", 1)[1].split("```", 1)[0]
    p = plans.load_plan(_plan_file(tmp_path, block))
    assert [s.name for s in p.schemes] == ["webrtc", "webrtc-P2", "always-burst", "webrtc-vbv1"]
    cells = p.cells(tmp_path)
    assert len(cells) == 8
    vbv = next(c for c in cells if c.scheme == "webrtc-vbv1").spec.config()
    assert config.diff(cells[0].spec.config(), vbv) == [
        "encoder_controller.vbv_buffer_ms"]  # fmt: skip


def test_the_tradeoff_plots_the_all_slot_p95_the_tables_lead_with(tmp_path, monkeypatch):
    # ACE's ablation figure drew the displayed frames' P95 beside a table of all-slot P95s
    # (1541 against 1824 ms for webrtc-x264).
    figs = []
    monkeypatch.setattr(plots, "save", lambda fig, out: figs.append(fig) or Path(out))
    df = pd.DataFrame({"scheme": ["a", "a", "b"], "latency_all_ms_p95": [100.0, 300.0, 50.0],
                       "latency_ms_p95": [10.0, 30.0, 5.0], "vmaf_mean": [90.0, 80.0, 70.0],
                       "network": ["x", "x", "x"]})  # fmt: skip
    for draw in (lambda: plots.plot_tradeoff(df, tmp_path / "t.png", by=None),
                 lambda: ace.plot_ablation(df, tmp_path / "a.png", schemes=["a", "b"])):
        draw()
        ax = figs[-1].axes[0]
        assert ax.get_xlabel() == "all-slot P95 ms", ax.get_xlabel()
        means = [tuple(c.get_offsets()[0]) for c in ax.collections if len(c.get_offsets()) == 1
                 and c.get_label() == "a"]  # fmt: skip
        assert means == [(200.0, 85.0)], means


def test_a_link_pasted_from_a_header_runs_in_a_plan(tmp_path):
    # A plan's [set] with a downlink object from a run header (its trace's name in it) was
    # refused against the placeholder trace the checks ran with ("gen:constant:1 here").
    from sluice.cli import main

    plan = _plan_file(tmp_path, """
        name = "pasted"
        [set]
        duration_s = 1
        seed = 3
        downlink = { trace = "gen:constant:12", delay_ms = 5 }
        [[scheme]]
        name = "webrtc"
        [[scheme]]
        name = "webrtc-s7"
        base = "webrtc"
        set = { seed = 7 }
        [[trace]]
        path = "gen:constant:12"
        label = "c12"
        """)
    root = tmp_path / "results"
    assert main(["matrix", str(plan), "--jobs", "1", "--no-report", "--results", str(root)]) == 0
    run = results.load_run(root / "pasted" / "c12" / "model" / "webrtc" / "s3")
    assert run.config["downlink"]["delay_ms"] == 5 and run.config["seed"] == 3
    # A scheme's own seed names its directory and its row (it ran seed 7 in s3, seed 3).
    run = results.load_run(root / "pasted" / "c12" / "model" / "webrtc-s7" / "s7")
    assert run.config["seed"] == 7
    df = pd.read_csv(root / "pasted" / "results.csv")
    assert sorted(df["seed"]) == [3, 7]
