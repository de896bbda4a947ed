"""Config paths (sluice.config): full dotted paths into the resolved RunConfig, never "this key
wherever it appears"."""

from __future__ import annotations

import pytest
from sluice import config
from sluice.errors import SluiceError


def _with(*overrides, scheme: str = "webrtc"):
    cfg = config.default_config()
    cfg["scheme_name"] = scheme
    return config.apply_overrides(cfg, overrides)


def test_resolve_expands_the_scheme_and_defaults():
    cfg = _with(scheme="ace")
    assert cfg["scheme"] == config.scheme_config("ace")
    assert cfg["encoder"]["kind"] == "model" and "frame_sigma" in cfg["encoder"]
    assert config.get_path(cfg, "pacer.threshold_packets") == 10.0
    assert config.get_path(cfg, "scheme.pacer.threshold_packets") == 10.0
    assert config.get_path(cfg, "cc.trendline_window.window_ms") == 200


@pytest.mark.parametrize(
    "path, value",
    [
        ("duration_s", 12.5),
        ("feedback_interval_ms", 20),
        ("sample_interval_ms", 10),
        ("drain_s", 0.5),
        ("max_payload_bytes", 1000),
        ("downlink.queue_bytes", 50_000),
        ("uplink.delay_ms", 5),
        ("encoder.frame_sigma", 0.55),
        ("cc.pacing_factor", 2.5),
        ("encoder_controller.vbv_buffer_ms", 250),
        ("scheme.pacer.max_debt_ms", 100),
    ],
)
def test_an_override_changes_exactly_its_path(path, value):
    base = _with()
    changed = _with((path, value))
    assert config.diff(base, changed) == [config.short_path(path)]
    assert config.get_path(changed, path) == value


@pytest.mark.parametrize(
    "path, value",
    [
        ("pacer.probe_takes_over", True),
        ("cc.probe_rules", "m156"),
        ("cc.loss_based_v2.m156", {"hold_duration_factor": 3.0}),
    ],
)
def test_a_field_the_core_leaves_out_at_its_default_can_be_set(path, value):
    # The core writes these only when they differ from their default, so the resolved
    # `webrtc` config has no such key to walk to.
    with pytest.raises(SluiceError):
        config.get_path(_with(), path)
    changed = _with((path, value))
    got = config.get_path(changed, path)
    assert got == value if not isinstance(value, dict) else got["hold_duration_factor"] == 3.0
    changes = config.diff(_with(), changed)
    assert changes and all(c.startswith(path) for c in changes), changes


def test_a_left_out_field_set_to_its_default_changes_nothing_and_typos_are_refused():
    assert _with(("pacer.probe_takes_over", False)) == _with()
    # The error names the left-out fields among the valid ones.
    with pytest.raises(SluiceError, match="has no field 'probe_take'.*probe_takes_over"):
        _with(("pacer.probe_take", True))
    with pytest.raises(SluiceError, match="no field 'probe_rule'.*probe_rules"):
        _with(("cc.probe_rule", "m156"))
    with pytest.raises(SluiceError, match="expected a boolean"):
        _with(("pacer.probe_takes_over", 3))


def test_a_key_is_not_set_wherever_it_appears():
    # `alpha` is a field of ACE-N's pacer and of ACE-C's EWMA (`ewma_alpha`); only the path
    # given changes.
    ace = _with(scheme="ace")
    out = _with(("pacer.alpha", 0.5), scheme="ace")
    assert config.diff(ace, out) == ["pacer.alpha"]
    with pytest.raises(SluiceError, match="unknown config path 'alpha'.*valid: .*duration_s"):
        _with(("alpha", 0.5), scheme="ace")


@pytest.mark.parametrize(
    "path, needles",
    [
        ("pacer.alpha", ["'pacer.alpha'", "(leaky-bucket)",
                         "valid: burst_interval_ms, hold_back_packets, hold_back_window_ms, "
                         "kind"]),
        ("downlink.delay", ["'downlink' has no field 'delay'", "delay_ms, ecn, loss"]),
        ("nope", ["the run config has no field 'nope'", "feedback_interval_ms"]),
        ("downlink.delay_ms.x", ["downlink.delay_ms is a number"]),
        ("encoder.preset", ["'encoder' (model) has no field 'preset'"]),
        ("salsify.min_frame_fraction", ["salsify is null, not an object",
                                        "--set 'salsify={}'"]),
        ("cc.bottleneck_feedback", ["'cc' (gcc) has no field 'bottleneck_feedback'"]),
    ],
)
def test_unknown_paths_name_the_path_and_the_valid_keys(path, needles):
    with pytest.raises(SluiceError) as e:
        _with((path, 1))
    msg = str(e.value)
    assert "\n" not in msg
    for n in needles:
        assert n in msg, (n, msg)


def test_a_components_optional_object_is_set_by_its_path():
    # Copa's bottleneck_feedback (Co-RTV's changes) is absent from a config unless set: its
    # path named no field ("any config field can be set by its path").
    cfg = _with(("cc.bottleneck_feedback.rate_on_drop", False), scheme="copa")
    got = cfg["scheme"]["cc"]["bottleneck_feedback"]
    assert got["rate_on_drop"] is False and got["hold_rtt_rise_ms"] > 0, got
    whole = _with(("cc.bottleneck_feedback", {}), scheme="copa")["scheme"]["cc"]
    assert whole["bottleneck_feedback"]["rate_on_drop"] is True
    assert "bottleneck_feedback" not in _with(("cc.delta", 0.5), scheme="copa")["scheme"]["cc"]


@pytest.mark.parametrize("override", [("downlink.trace", "x.mahi"), ("uplink.trace", "y"),
                                      ("downlink", {"trace": "z", "delay_ms": 5})])
def test_the_trace_a_link_reads_is_not_a_config_path(override):
    # The front end loads the trace from --trace and writes its name: an override of the
    # name was either overwritten or, applied after it, named a trace the run did not read.
    with pytest.raises(SluiceError, match=r"(down|up)link\.trace is not set by a config path: "
                                          r"it names the trace the run reads.*--(uplink-)?trace"):
        _with(override)


def test_a_trace_name_given_as_it_is_is_no_change():
    # A whole `downlink` object pasted back (its trace null, as before a run) sets the rest.
    cfg = _with(("downlink", {"trace": None, "delay_ms": 5}))
    assert cfg["downlink"]["delay_ms"] == 5 and cfg["downlink"]["trace"] is None


def test_a_link_pasted_from_a_run_header_keeps_its_trace_name(tmp_path):
    # A run's header names its traces; its `downlink` object pasted into --set was refused,
    # because the overrides were applied before the trace's name was known (x264 runs also
    # refused a null name, the overrides going again after the names were set).
    from types import SimpleNamespace

    from sluice.run import RunSpec, with_clip

    mahi = tmp_path / "my.mahi"
    mahi.write_text("1\n2\n")
    pasted = ("downlink", {"trace": "my.mahi", "delay_ms": 5, "queue_bytes": 60000})
    spec = RunSpec(trace=str(mahi), encoder="model", overrides=(pasted,))
    cfg = spec.config()
    assert cfg["downlink"]["trace"] == "my.mahi" and cfg["downlink"]["queue_bytes"] == 60000
    # the same for x264, whose clip's fields are set on the config the overrides made
    x264 = RunSpec(trace=str(mahi), encoder="x264", video="clip.mp4", overrides=(pasted,))
    raw = SimpleNamespace(fps=30.0, path=str(tmp_path / "clip.yuv"), width=320, height=180,
                          frames=300)  # fmt: skip
    assert with_clip(x264, x264.config(), raw, None)["downlink"]["delay_ms"] == 5
    # a name that is not the trace the run reads is refused, naming the one it reads
    other = RunSpec(trace=str(mahi), encoder="model",
                    overrides=(("downlink", {"trace": "wifi.mahi"}),))  # fmt: skip
    with pytest.raises(SluiceError, match=r"downlink\.trace is not set.*\(my\.mahi here\)"):
        other.config()


def test_the_scheme_name_is_not_a_config_path():
    # --set scheme_name=copa ran webrtc's components and recorded copa.
    with pytest.raises(SluiceError, match="scheme_name is not set by a config path.*--scheme"):
        _with(("scheme_name", "copa"))


def test_faults_keep_a_reorder_delay_given_before_the_reordering():
    # The core writes `faults` whenever a field is not its default (it used to drop the
    # object until a fault was on), so the order of the overrides does not matter.
    for order in ([0, 1], [1, 0]):
        sets = [("faults.reorder_delay_ms", 20.0), ("faults.reorder", 0.1)]
        cfg = _with(*(sets[i] for i in order))
        assert cfg["faults"]["reorder_delay_ms"] == 20.0 and cfg["faults"]["reorder"] == 0.1
    assert "faults" not in _with(("seed", 3))


def test_types_must_match_the_default():
    with pytest.raises(SluiceError, match="'duration_s' takes a number.*got a string"):
        _with(("duration_s", "long"))
    with pytest.raises(SluiceError, match="'fps' takes a number.*got a boolean"):
        _with(("fps", True))
    with pytest.raises(SluiceError, match="'cc.probing' takes a boolean"):
        _with(("cc.probing", 1))
    with pytest.raises(SluiceError, match="seed=1.5: takes a whole number, got 1.5"):
        _with(("seed", 1.5))  # a number, but the core wants an integer
    # null fields take what the core accepts
    assert _with(("downlink.queue_packets", 40))["downlink"]["queue_packets"] == 40
    # a whole number written as a float (1e5 on the command line, in TOML) is that number
    assert _with(("downlink.queue_bytes", 1e5))["downlink"]["queue_bytes"] == 100_000
    assert isinstance(_with(("seed", 7.0))["seed"], int)
    with pytest.raises(SluiceError, match='takes a number, got the string "100kB" .no units'):
        _with(("downlink.queue_bytes", "100kB"))
    # ... inside an object too, and a fraction there is named by its path
    pacer = _with(("pacer", {"kind": "ace-n", "packet_size_bytes": 1.26e3}))["scheme"]["pacer"]
    assert pacer["packet_size_bytes"] == 1260 and isinstance(pacer["packet_size_bytes"], int)
    with pytest.raises(SluiceError, match=r"got 1.5 \(at pacer.packet_size_bytes\)$"):
        _with(("pacer", {"kind": "ace-n", "packet_size_bytes": 1.5}))


def test_tagged_components_are_replaced_wholesale():
    out = _with(("pacer", {"kind": "ace-n"}), ("pacer.threshold_packets", 12.5))
    assert out["scheme"]["pacer"] == {**config.scheme_config("ace-n")["pacer"],
                                      "threshold_packets": 12.5}  # fmt: skip
    assert _with(("pacer.kind", "ace-n"))["scheme"]["pacer"]["kind"] == "ace-n"
    window = _with(("cc.trendline_window", {"kind": "time", "window_ms": 100}))
    assert window["scheme"]["cc"]["trendline_window"] == {"kind": "time", "window_ms": 100}
    with pytest.raises(SluiceError, match=r"pacer=\{\"kind\": \"nope\"\}: unknown variant"):
        _with(("pacer", {"kind": "nope"}))
    with pytest.raises(SluiceError, match="unknown field `foo`"):
        _with(("pacer", {"kind": "ace-n", "foo": 1}))


def test_an_object_without_kind_sets_its_fields():
    base = _with()
    out = _with(("downlink", {"delay_ms": 30, "queue_bytes": 100_000}))
    assert config.diff(base, out) == ["downlink.delay_ms", "downlink.queue_bytes"]
    with pytest.raises(SluiceError, match="'downlink' has no field 'delay'"):
        _with(("downlink", {"delay": 30}))


def test_values_and_assignments():
    assert config.parse_value("12.5") == 12.5
    assert config.parse_value("true") is True and config.parse_value("null") is None
    assert config.parse_value("modeled") == "modeled"
    assert config.parse_value('{"kind": "ace-n"}') == {"kind": "ace-n"}
    assert config.parse_value("[1, 1, 1]") == [1, 1, 1]
    with pytest.raises(SluiceError, match="malformed JSON"):
        config.parse_value("{kind: ace-n}")
    assert config.parse_assignment("pacer.threshold_packets=12.5") == (
        "pacer.threshold_packets", 12.5)  # fmt: skip
    for bad in ("no-equals", "=3", "a..b=1"):
        with pytest.raises(SluiceError):
            config.parse_assignment(bad)


def test_registry_is_read_once_and_copied():
    reg = config.registry()
    reg[0]["config"]["pacer"]["kind"] = "changed"
    assert config.registry()[0]["config"]["pacer"]["kind"] != "changed"
    assert config.scheme_info("nope") is None
    with pytest.raises(SluiceError, match="unknown scheme 'nope'"):
        config.scheme_config("nope")
    assert config.scheme_colors()["webrtc"] == reg[0]["color"]


def test_the_scheme_components_are_the_cores() -> None:
    import json

    from sluice import _core
    from sluice.config import SCHEME_COMPONENTS

    scheme = json.loads(_core.resolve_config_json('{"scheme_name": "webrtc"}'))["scheme"]
    assert set(SCHEME_COMPONENTS) == set(scheme) - {"feedback_interval_ms"}


def test_optional_fields_default_as_the_core_does():
    # A field the core leaves out at its default is filled in from OPTIONAL_FIELDS when a
    # path under it is set: the values there must be the core's defaults. Setting one field
    # shows the core's others; setting it back to its default leaves the field out.
    faults = config.OPTIONAL_FIELDS["faults"]
    core_filled = config.resolve({**config.default_config(), "faults": {"duplicate": 0.5}})
    assert core_filled["faults"] == {**faults, "duplicate": 0.5}
    cfg = config.apply_overrides(config.default_config(), [("faults.duplicate", 0.5)])
    assert cfg["faults"] == core_filled["faults"]
    cfg = config.apply_overrides(cfg, [("faults.duplicate", 0.0)])
    assert "faults" not in cfg
    # The second bottleneck (RFC 8867 §6.3): none by default, the core's defaults for the
    # fields not given.
    second = config.OPTIONAL_FIELDS["second_bottleneck"]
    core_filled = config.resolve({**config.default_config(), "second_bottleneck": {"rate_mbps": 2}})
    assert core_filled["second_bottleneck"] == {**second, "rate_mbps": 2.0}
    cfg = config.apply_overrides(config.default_config(), [("second_bottleneck.rate_mbps", 2)])
    assert cfg["second_bottleneck"] == core_filled["second_bottleneck"]
