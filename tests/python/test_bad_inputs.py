"""Bad inputs against the real ``sluice`` command (issue 16's acceptance table, grown by
issue 30's classes).

Each case runs ``python -m sluice ARGS`` in a fresh directory, under a 2 GB address-space
limit (so a case that would allocate without bound fails instead of exhausting the machine),
and must give: exit status 2, exactly one ``sluice: error: ...`` line on stderr naming the
problem (its distinctive substrings), no traceback, and nothing new in the directory. Every
input is rejected before a simulation starts, so the table is fast; the cases run a few at a
time in threads and each test checks its own.
"""

from __future__ import annotations

import concurrent.futures as cf
import functools
import json
import os
import resource
import socket
import stat
import subprocess
import sys
import tempfile
from dataclasses import dataclass, field
from pathlib import Path

import pytest

ADDRESS_SPACE_LIMIT = 2 << 30  # 2 GB
TIMEOUT_S = 60  # a FIFO that blocks, or a run that never ends, fails the case instead

FIFO = object()  # a file entry that is a named pipe
SPARSE = object()  # a file entry that is a 3 GB sparse file (no disk used)
DIR = object()  # a file entry that is a directory
SOCKET = object()  # a file entry that is a Unix socket
DEVICE = object()  # a file entry that is a character device (/dev/null's numbers; root only)

T = "gen:constant:12"


def _scheme(**fields: object) -> str:
    """A scheme file: the default composition with some fields set (``cc``, ``pacer``,
    ``encoder_controller`` objects)."""
    obj: dict[str, object] = {"pacer": {"kind": "leaky-bucket"}, "cc": {"kind": "gcc"}}
    obj.update(fields)
    return json.dumps(obj)


def _plan(set_lines: str, extra: str = "") -> str:
    return (
        'name = "bad"\nseeds = [1]\n[set]\nduration_s = 2\n' + set_lines + "\n"
        '[[scheme]]\nname = "webrtc"\n[[trace]]\npath = "gen:constant:12"\n' + extra
    )


@dataclass(frozen=True)
class Case:
    id: str
    argv: tuple[str, ...]
    needles: tuple[str, ...]
    files: dict[str, object] = field(default_factory=dict)


def case(id: str, argv: list[str], *needles: str, files: dict[str, object] | None = None):
    return Case(id, tuple(argv), needles, dict(files or {}))


RUN = ["run", "--trace", T, "--duration", "2", "--out", "out"]
MATRIX = ["matrix", "p.toml", "--results", "res", "--dry-run"]


def run_with(*extra: str) -> list[str]:
    return [*RUN, *extra]


SCHEME_CASES = [
    # (id, scheme file content, needles)
    ("pacing-factor-negative", _scheme(cc={"kind": "gcc", "pacing_factor": -1.5}),
     ("s.json", "cc.pacing_factor", "-1.5")),
    ("pacing-factor-zero", _scheme(cc={"kind": "gcc", "pacing_factor": 0}),
     ("s.json", "cc.pacing_factor", "got 0")),
    ("pacing-factor-tiny", _scheme(cc={"kind": "gcc", "pacing_factor": 1e-9}),
     ("s.json", "cc.pacing_factor", "1e-9")),
    ("min-rate-above-max", _scheme(cc={"kind": "gcc", "min_rate": 5000000, "max_rate": 1000000}),
     ("s.json", "cc.min_rate", "cc.max_rate")),
    ("max-rate-above-10g", _scheme(cc={"kind": "gcc", "max_rate": 10**12}),
     ("s.json", "cc.max_rate")),
    ("vbv-zero", _scheme(encoder_controller={"kind": "abr-vbv", "vbv_buffer_ms": 0}),
     ("s.json", "encoder_controller.vbv_buffer_ms")),
    ("vbv-negative", _scheme(encoder_controller={"kind": "abr-vbv", "vbv_buffer_ms": -500}),
     ("s.json", "encoder_controller.vbv_buffer_ms", "-500")),
    ("trendline-window-zero",
     _scheme(cc={"kind": "gcc", "trendline_window": {"kind": "time", "window_ms": 0}}),
     ("s.json", "cc.trendline_window.window_ms")),
    ("trendline-count-zero",
     _scheme(cc={"kind": "gcc", "trendline_window": {"kind": "packets", "count": 0}}),
     ("s.json", "cc.trendline_window.count")),
    ("ace-n-packet-size-zero", _scheme(pacer={"kind": "ace-n", "packet_size_bytes": 0}),
     ("s.json", "pacer.packet_size_bytes")),
    ("copa-mss-zero", _scheme(cc={"kind": "copa", "mss_bytes": 0}), ("s.json", "cc.mss_bytes")),
    ("dummy-size-zero", _scheme(pacer={"kind": "vidaptive", "dummy": {"size_bytes": 0}}),
     ("s.json", "pacer.dummy.size_bytes")),
    ("ace-n-alpha-negative", _scheme(pacer={"kind": "ace-n", "alpha": -0.5}),
     ("s.json", "pacer.alpha", "-0.5")),
    ("ace-n-threshold-zero", _scheme(pacer={"kind": "ace-n", "threshold_packets": 0}),
     ("s.json", "pacer.threshold_packets")),
    ("leaky-bucket-debt-negative", _scheme(pacer={"kind": "leaky-bucket", "max_debt_ms": -1}),
     ("s.json", "pacer.max_debt_ms")),
    ("feedback-interval-zero", _scheme(feedback_interval_ms=0),
     ("s.json", "feedback_interval_ms")),
    ("nan", '{"pacer": {"kind": "leaky-bucket"}, "cc": {"kind": "gcc", "pacing_factor": NaN}}',
     ("s.json", "cc.pacing_factor", "finite")),
    ("1e999", '{"pacer": {"kind": "leaky-bucket"}, "cc": {"kind": "gcc", "pacing_factor": 1e999}}',
     ("s.json", "cc.pacing_factor", "inf")),
    ("unit-range-ms", _scheme(pacer={"kind": "ace-n", "capacity_min_span_ms": -3}),
     ("s.json", "pacer.capacity_min_span_ms")),
    ("binary", "\x00\x01\x02garbage", ("s.json",)),
    # unknown keys at any depth and duplicate keys (#30)
    ("nested-typo", _scheme(cc={"kind": "gcc", "pacing_factr": 2}), ("s.json", "pacing_factr")),
    ("deep-typo", _scheme(cc={"kind": "gcc", "trendline_window": {"kind": "packets", "count": 20,
     "cnt": 3}}), ("s.json", "`cnt`")),
    ("drop-tail-extra-key", _scheme(bottleneck={"kind": "drop-tail", "queue_limit": 5}),
     ("s.json", "queue_limit")),
    ("pacer-none-extra-key", _scheme(pacer={"kind": "none", "rate_bps": 5}),
     ("s.json", "rate_bps")),
    ("duplicate-nested-key", '{"pacer": {"kind": "leaky-bucket"}, "cc": {"kind": "gcc", '
     '"pacing_factor": 1.5, "pacing_factor": 2.5}}', ("s.json", "'pacing_factor'", "twice")),
    ("duplicate-top-key", '{"pacer": {"kind": "leaky-bucket"}, "pacer": {"kind": "none"}}',
     ("s.json", "'pacer'", "twice")),
    ("array", "[1, 2, 3]", ("s.json", "JSON object")),
]  # fmt: skip


CASES: list[Case] = [
    # --- memory and time from plain numbers (bounds before allocation) -------------------
    case("gen-constant-1e20", ["run", "--trace", "gen:constant:1e20", "--out", "o"],
         "gen:constant:1e20", "10000 Mbps"),
    case("gen-constant-1e6", ["run", "--trace", "gen:constant:1000000", "--out", "o"],
         "1000000 Mbps", "limit"),
    case("rate-row-1e20", ["run", "--trace", "r.txt", "--out", "o"], "r.txt:2", "limit",
         files={"r.txt": "0 1\n1 1e20\n"}),
    case("rate-span-over-a-day", ["trace", "info", "r.txt"], "r.txt", "a day",
         files={"r.txt": "0 1\n100000 1\n"}),
    case("rate-too-many-opportunities", ["trace", "info", "r.txt"], "r.txt", "opportunities",
         files={"r.txt": "0 9000\n40000 9000\n"}),
    case("mahimahi-9223372036854", ["trace", "info", "big.mahi"], "big.mahi:2", "9223372036854",
         files={"big.mahi": "1\n9223372036854\n"}),
    case("mahimahi-9.2e15", ["trace", "info", "huge.mahi"], "huge.mahi:2", "9200000000000000",
         files={"huge.mahi": "1\n9200000000000000\n"}),
    case("mahimahi-9.2e15-run", ["run", "--trace", "huge.mahi", "--out", "o"], "huge.mahi:2",
         files={"huge.mahi": "5\n9300000000000000\n"}),
    case("mahimahi-overflow", ["trace", "info", "x.mahi"], "x.mahi:2", "99999999999999999999",
         files={"x.mahi": "1\n99999999999999999999\n"}),
    case("markov-duration-1e6", ["trace", "gen", "markov:20,2,5,1", "--duration", "1e6"],
         "--duration", "1e6"),
    case("run-duration-1e5", run_with("--duration", "1e5"), "--duration", "1e5"),
    case("run-duration-1e9", run_with("--duration", "1e9"), "--duration", "1e9"),
    case("run-duration-nan", run_with("--duration", "nan"), "--duration", "nan"),
    case("set-duration-1e9", run_with("--set", "duration_s=1e9"), "duration_s", "got 1e9"),
    case("set-drain-1e9", run_with("--set", "drain_s=1e9"), "drain_s"),
    case("too-many-frames", run_with("--fps", "1000", "--duration", "80000"), "fps x duration_s",
         "limit"),
    case("too-many-samples", run_with("--duration", "80000", "--set", "sample_interval_ms=1"),
         "sample_interval_ms", "limit"),
    case("session-over-a-day", run_with("--duration", "86400"), "duration_s + drain_s", "a day"),
    case("trace-info-gen-too-big", ["trace", "info", "gen:constant:10000", "--duration", "86400"],
         "gen:constant:10000", "opportunities"),
    case("gen-steps-rate", ["trace", "info", "gen:steps:1e20@10"], "step 1 rate_mbps", "limit"),
    case("gen-markov-tiny-hold", ["trace", "info", "gen:markov:20,2,1e-9,1"], "mean_good_s"),
    case("gen-alternating-rate", ["trace", "info", "gen:alternating:1e9,1,10"], "high_mbps"),
    case("gen-poisson-rate", ["trace", "info", "gen:poisson:1e20"], "rate_mbps", "limit"),
    # --- files where a file is expected ----------------------------------------------------
    case("fifo-trace", ["run", "--trace", "p", "--out", "o"], "trace file p",
         "not a regular file", files={"p": FIFO}),
    case("fifo-uplink-trace", run_with("--uplink-trace", "p"), "trace file p",
         "not a regular file", files={"p": FIFO}),
    case("fifo-scheme-file", ["run", "--scheme-file", "p", "--trace", T, "--out", "o"],
         "scheme file p", "not a regular file", files={"p": FIFO}),
    case("fifo-video", run_with("--video", "p"), "video file p", "not a regular file",
         files={"p": FIFO}),
    case("fifo-plan", ["matrix", "p", "--results", "res"], "plan file p", "not a regular file",
         files={"p": FIFO}),
    case("trace-file-too-big", ["trace", "info", "sparse.mahi"], "sparse.mahi", "limit",
         files={"sparse.mahi": SPARSE}),
    case("dir-video", run_with("--video", "d"), "video file d", "directory", files={"d": DIR}),
    case("dir-trace", ["run", "--trace", "d", "--out", "o"], "trace file d", "directory",
         files={"d": DIR}),
    case("dir-scheme-file", ["run", "--scheme-file", "d", "--trace", T, "--out", "o"],
         "scheme file d", "directory", files={"d": DIR}),
    case("text-as-video", run_with("--video", "v.mp4"), "v.mp4", files={"v.mp4": "not a video\n"}),
    # --- flags -----------------------------------------------------------------------------
    case("delay-1e12", run_with("--delay-ms", "1e12"), "--delay-ms", "1e12"),
    case("bn-delay-negative", run_with("--bn-delay-ms", "-5"), "--bn-delay-ms"),
    case("set-delay-1e12", run_with("--set", "downlink.delay_ms=1e12"), "downlink.delay_ms"),
    case("out-empty", ["run", "--trace", T, "--duration", "2", "--out", ""], "--out", "empty"),
    case("trace-gen-out-empty", ["trace", "gen", "constant:12", "--duration", "1", "--out", ""],
         "--out"),
    case("width-with-model", run_with("--width", "320"), "--width", "model encoder"),
    case("seed-2-64", run_with("--seed", str(2**64)), "--seed", str(2**64)),
    case("seed-negative", run_with("--seed", "-1"), "--seed"),
    case("set-seed-2-64", run_with("--set", f"seed={2**64}"), "seed"),
    case("set-nan", run_with("--set", "cc.pacing_factor=NaN"), "cc.pacing_factor", "finite"),
    case("set-infinity", run_with("--set", "duration_s=Infinity"), "duration_s", "finite"),
    case("set-1e999", run_with("--set", "fps=1e999"), "fps", "finite"),
    case("set-payload-zero", run_with("--set", "max_payload_bytes=0"), "max payload"),
    case("set-queue-negative", run_with("--set", "downlink.queue_bytes=-1"), "queue"),
    case("queue-bytes-huge", run_with("--queue-bytes", "1000000000000"), "--queue-bytes"),
    case("queue-packets-zero", run_with("--queue-packets", "0"), "--queue-packets"),
    case("fps-huge", run_with("--fps", "1e9"), "--fps"),
    case("loss-nan", run_with("--loss", "nan"), "--loss"),
    case("preset-warp9", run_with("--preset", "warp9"), "--preset", "warp9"),
    case("jobs-zero", ["compare", "--schemes", "webrtc", "--trace", T, "--jobs", "0"], "--jobs"),
    # --- plot on files that are not results ------------------------------------------------
    case("plot-binary", ["plot", "r"], "r/run.jsonl", "not a sluice result file",
         files={"r/run.jsonl": bytes(range(256)) * 8}),
    case("plot-mistyped-frame", ["plot", "r"], "r/run.jsonl", "frame_id",
         files={"r/run.jsonl": '{"record":"header","schema_version":3}\n'
                               '{"record":"frame","frame_id":"x","latency_us":"abc"}\n'}),
    case("plot-mistyped-header", ["plot", "r"], "r/run.jsonl", "config",
         files={"r/run.jsonl": '{"record":"header","schema_version":3,"config":5}\n'}),
    case("plot-array-line", ["plot", "r"], "r/run.jsonl:1", files={"r/run.jsonl": "[1, 2]\n"}),
    case("plot-no-run", ["plot", "nothing-here"], "nothing-here"),
    # --- plans (what experiments/ace.py took as flags) ---------------------------------------
    case("plan-duration-nan", ["matrix", "p.toml", "--results", "res"], "duration_s", "finite",
         files={"p.toml": _plan("").replace("duration_s = 2", "duration_s = nan")}),
    case("plan-seed-negative", ["matrix", "p.toml", "--results", "res"], "seed",
         files={"p.toml": _plan("").replace("seeds = [1]", "seeds = [-1]")}),
    case("plan-queue-negative", ["matrix", "p.toml", "--results", "res"], "queue",
         files={"p.toml": _plan('"downlink.queue_bytes" = -100')}),
    case("plan-delay-negative", ["matrix", "p.toml", "--results", "res"], "downlink.delay_ms",
         files={"p.toml": _plan('"downlink.delay_ms" = -20')}),
    case("plan-duration-1e9", ["matrix", "p.toml", "--results", "res"], "duration_s",
         files={"p.toml": _plan("").replace("duration_s = 2", "duration_s = 1e9")}),
]  # fmt: skip

CASES += [
    case(f"scheme-{id}", ["run", "--scheme-file", "s.json", "--trace", T, "--out", "o"],
         *needles, files={"s.json": content})
    for id, content, needles in SCHEME_CASES
]  # fmt: skip
# --- live endpoint processes (each fails before it listens or writes anything) ------------
PEER = "127.0.0.1:5999"
CASES += [
    case("live-send-port-out-of-range", ["live", "send", "--listen", "127.0.0.1:70000", "--peer",
         PEER], "--listen", "70000"),
    case("live-send-loopback-to-elsewhere", ["live", "send", "--peer", "198.51.100.1:5001"],
         "--peer 198.51.100.1:5001 is not on this machine", "--listen 127.0.0.1:5000"),
    case("live-recv-peer-is-a-name", ["live", "recv", "--peer", "localhost:5001"], "--peer",
         "localhost:5001", "IP address"),
    case("live-recv-peer-missing", ["live", "recv", "--out", "o"], "--peer"),
    case("live-relay-receiver-missing", ["live", "relay", "--sender", PEER, "--trace", T],
         "--receiver"),
    case("live-send-unknown-scheme", ["live", "send", "--peer", PEER, "--scheme", "nope", "--out",
         "o"], "unknown scheme", "nope"),
    case("live-relay-one-address-for-both", ["live", "relay", "--sender", PEER, "--receiver", PEER,
         "--trace", T, "--out", "o"], "same address", PEER),
    case("live-recv-forward-rtp-to-itself", ["live", "recv", "--peer", "127.0.0.1:5001",
         "--listen", "0.0.0.0:5310", "--scheme", "webrtc-x264", "--forward-rtp", "5310",
         "--out", "o"], "--forward-rtp 5310", "this endpoint's own address"),
    case("live-recv-forward-rtp-to-the-relay", ["live", "recv", "--peer", "127.0.0.1:5001",
         "--scheme", "webrtc-x264", "--forward-rtp", "5001", "--out", "o"], "--forward-rtp 5001",
         "--peer's address"),
    case("live-recv-forward-rtp-without-x264", ["live", "recv", "--peer", PEER, "--forward-rtp",
         "5004", "--out", "o"], "--forward-rtp", "x264"),
    case("live-recv-idle-timeout-zero", ["live", "recv", "--peer", PEER, "--idle-timeout-s", "0"],
         "--idle-timeout-s"),
    case("live-merge-no-part", ["live", "merge", "--sender", "nope", "--receiver", "o"],
         "no such part directory", "nope"),
    case("live-merge-not-a-part", ["live", "merge", "--sender", "d", "--receiver", "d"],
         "d: not a live part", files={"d": DIR}),
    case("live-run-restart-sender-negative", ["live", "run", "--trace", T, "--restart-sender-at",
         "-1", "--out", "o"], "--restart-sender-at", "-1"),
    case("live-run-restart-sender-nan", ["live", "run", "--trace", T, "--restart-sender-at",
         "nan", "--out", "o"], "--restart-sender-at", "nan"),
]  # fmt: skip
# --- outputs: only new paths or regular files; result directories fresh or Sluice's (#30) --
GEN_OUT = ["trace", "gen", "constant:12", "--duration", "1", "--out"]
CASES += [
    case("trace-gen-out-fifo", [*GEN_OUT, "p"], "--out p", "not a regular file",
         files={"p": FIFO}),
    case("trace-gen-out-socket", [*GEN_OUT, "s"], "--out s", "not a regular file",
         files={"s": SOCKET}),
    case("trace-gen-out-device", [*GEN_OUT, "null"], "--out null", "not a regular file",
         files={"null": DEVICE}),
    case("trace-gen-out-dir", [*GEN_OUT, "d"], "--out d", "directory", files={"d": DIR}),
    case("run-out-dot-with-summary", ["run", "--trace", T, "--duration", "2", "--out", "."],
         "output directory .", "not a sluice result directory",
         files={"summary.json": '{"mine": 1}\n'}),
    case("run-out-other-files", ["run", "--trace", T, "--duration", "2", "--out", "d"],
         "output directory d", "new or empty", files={"d/notes.txt": "mine\n"}),
    case("run-out-is-a-file", ["run", "--trace", T, "--duration", "2", "--out", "f"],
         "output directory f", "is a file", files={"f": "mine\n"}),
    case("run-out-fifo", ["run", "--trace", T, "--duration", "2", "--out", "p"],
         "output directory p", "not a directory", files={"p": FIFO}),
    case("compare-out-other-files", ["compare", "--schemes", "webrtc", "--trace", T,
         "--duration", "2", "--out", "d"], "compare directory d", files={"d/summary.csv": "a\n"}),
    case("matrix-results-other-files", ["matrix", "p.toml", "--results", "res"],
         "plan results directory res/bad", "not a sluice result directory",
         files={"p.toml": _plan(""), "res/bad/results.txt": "mine\n"}),
    case("live-recv-out-other-files", ["live", "recv", "--peer", PEER, "--out", "d"],
         "--out d", "not a sluice result directory", files={"d/x.txt": "mine\n"}),
    case("report-out-fifo", ["report", "d", "--out", "p"], "--out p", "not a regular file",
         files={"d": DIR, "p": FIFO}),
]  # fmt: skip
# --- trace files read line by line; the rate limit in every format (#30) --------------------
CASES += [
    case("mahimahi-above-10-gbits", ["trace", "info", "fast.mahi"], "fast.mahi:833335",
         "above the rate limit of 10000 Mbps", files={"fast.mahi": "7\n" * 900_000}),
    case("mahimahi-short-loop-above-10-gbits", ["run", "--trace", "loop.mahi", "--out", "o"],
         "loop.mahi", "within 3 ms", "rate limit", files={"loop.mahi": "3\n" * 5000}),
    case("mahimahi-line-too-long", ["trace", "info", "long.mahi"], "long.mahi:2", "4096 bytes",
         files={"long.mahi": "1\n" + "2" * 5000 + "\n"}),
    case("mahimahi-first-line-too-long", ["trace", "info", "l.mahi"], "l.mahi:1", "4096 bytes",
         files={"l.mahi": "1" * 100_000}),
    case("mahimahi-not-utf8", ["trace", "info", "b.mahi"], "b.mahi:3", "invalid UTF-8",
         files={"b.mahi": b"1\n2\n\xff\xfe\n"}),
    case("rate-series-not-utf8-first-line", ["run", "--trace", "r.txt", "--out", "o"],
         "r.txt:1", "invalid UTF-8", files={"r.txt": b"\xff 1\n1 2\n"}),
]  # fmt: skip
# --- faults: a peer that never answers (#30; the full disk: test_disk_full.py) ---------------
CASES += [
    case("live-send-silent-peer", ["live", "send", "--listen", "127.0.0.1:47391", "--peer",
         "127.0.0.1:9", "--idle-timeout-s", "0.5", "--duration", "30", "--out", "o"],
         "live sender: no answer from the peer 127.0.0.1:9", "no part written"),
    case("live-run-spoof-above-1", ["live", "run", "--trace", T, "--spoof", "1.5", "--out", "o"],
         "--spoof", "1.5"),
    case("live-relay-spoof-nan", ["live", "relay", "--sender", PEER, "--receiver",
         "127.0.0.1:5998", "--trace", T, "--spoof", "nan", "--out", "o"], "--spoof", "nan"),
    case("live-send-idle-timeout-nan", ["live", "send", "--peer", PEER, "--idle-timeout-s",
         "nan", "--out", "o"], "--idle-timeout-s", "nan"),
    case("live-run-restart-after-the-end", ["live", "run", "--trace", T, "--duration", "3",
         "--restart-sender-at", "5", "--out", "o"], "--restart-sender-at 5 s", "within"),
    case("live-relay-competing", ["live", "relay", "--sender", PEER, "--receiver",
         "127.0.0.1:5998", "--trace", T, "--competing", "tcp:cubic", "--out", "o"],
         "competing flows run in `live run`"),
]  # fmt: skip
# --- the WebRTC transport (#28): an unknown transport, what it cannot carry ----------------
CASES += [
    case("live-run-transport-unknown", ["live", "run", "--trace", T, "--transport", "quic",
         "--out", "o"], "--transport", "quic"),
    case("live-run-webrtc-sender-restart", ["live", "run", "--trace", T, "--transport", "webrtc",
         "--restart-sender-at", "1", "--out", "o"], "--restart-sender-at", "--transport webrtc"),
    case("live-run-webrtc-bottleneck-reports", ["live", "run", "--trace", T, "--transport",
         "webrtc", "--scheme", "co-rtv", "--out", "o"], "co-rtv", "--transport rtp"),
    case("browser-scheme-bottleneck-reports", ["browser", "run", "--trace", T, "--scheme",
         "co-rtv", "--out", "o"], "co-rtv", "bottleneck's reports"),
    case("browser-receiver-sluice-with-scheme", ["browser", "run", "--trace", T, "--receiver",
         "sluice", "--scheme", "ace", "--out", "o"], "--receiver sluice", "--scheme"),
    case("browser-receiver-sluice-with-vp8", ["browser", "run", "--trace", T, "--receiver",
         "sluice", "--codec", "vp8", "--out", "o"], "--receiver sluice", "--codec vp8"),
    case("browser-scheme-with-vp9", ["browser", "run", "--trace", T, "--scheme", "webrtc",
         "--codec", "vp9", "--out", "o"], "--scheme takes no --codec vp9"),
    case("browser-receiver-unknown", ["browser", "run", "--trace", T, "--receiver", "nobody",
         "--out", "o"], "--receiver", "nobody"),
]  # fmt: skip
# --- keys: unknown at any depth, given twice, `config` as strict as `run` (#30) ------------
DUP_SCHEME = ('{"pacer": {"kind": "leaky-bucket"}, "cc": {"kind": "gcc", "max_rate": 1000000, '
              '"max_rate": 2000000}}')
TYPO_SCHEME = _scheme(pacer={"kind": "leaky-bucket", "max_debt_msec": 5})
SCHEME_FROM_FILE = '[[scheme]]\nname = "mine"\nfile = "s.json"\n'
CASES += [
    case("plan-dotted-and-quoted-key", MATRIX, "p.toml", "downlink.queue_bytes", "give it once",
         files={"p.toml": _plan('"downlink.queue_bytes" = 100000\ndownlink.queue_bytes = 200000')}),
    case("plan-scheme-prefix-and-short-path", MATRIX, "p.toml", "cc.pacing_factor", "once",
         files={"p.toml": _plan('"scheme.cc.pacing_factor" = 2.0\n"cc.pacing_factor" = 3.0')}),
    case("plan-trace-set-table-and-dotted", MATRIX, "p.toml", "downlink.delay_ms", "once",
         files={"p.toml": _plan("") + 'set = { "downlink.delay_ms" = 10, downlink = '
                '{ delay_ms = 20 } }\n'}),
    case("plan-scheme-file-duplicate-key", MATRIX, "p.toml", "s.json", "'max_rate'", "twice",
         files={"p.toml": _plan("") + SCHEME_FROM_FILE, "s.json": DUP_SCHEME}),
    case("plan-scheme-file-nested-typo", MATRIX, "p.toml", "max_debt_msec",
         files={"p.toml": _plan("") + SCHEME_FROM_FILE, "s.json": TYPO_SCHEME}),
    case("set-json-duplicate-key", run_with("--set", 'cc={"kind": "gcc", "kind": "copa"}'),
         "'kind'", "twice"),
    case("set-json-nested-typo", run_with("--set", 'cc={"kind": "gcc", "pacing_factr": 2}'),
         "pacing_factr"),
    case("config-preset-run-refuses", ["config", "--scheme", "webrtc-x264", "--set",
         "encoder.preset=warp9"], "encoder.preset", "warp9"),
    case("config-x264-preset-typo", ["config", "--encoder", "x264", "--set",
         "encoder.preset=ultraslow"], "ultraslow", "known"),
    case("config-out-of-range", ["config", "--set", "cc.pacing_factor=-1"], "cc.pacing_factor"),
    case("compare-scheme-file-duplicate", ["compare", "--schemes", "webrtc", "--scheme-file",
         "s.json", "--trace", T, "--out", "o"], "s.json", "twice", files={"s.json": DUP_SCHEME}),
    # the path faults (the run config's `faults`, simulated and live alike)
    case("faults-probability-set", run_with("--set", "faults.duplicate=1.5"), "faults.duplicate",
         "[0, 1)"),
    case("faults-probability-flag", run_with("--reorder", "1"), "--reorder", "[0, 1)"),
    case("faults-reorder-ms-negative", run_with("--reorder-ms", "-1"), "--reorder-ms"),
    case("faults-blackout-backwards", run_with("--set", "faults.feedback_blackout_s=[3, 1]"),
         "feedback_blackout_s", "start < end"),
    case("faults-typo", run_with("--set", "faults.duplicat=0.1"), "duplicat", "duplicate"),
    case("plan-faults-typo", MATRIX, "p.toml", "faults", "reoder",
         files={"p.toml": _plan('faults = { reoder = 0.1 }')}),
]  # fmt: skip
# --- names that become paths; plan size (#30) ----------------------------------------------
LONG = "x" * 101
MANY_SEEDS = "seeds = [" + ", ".join(map(str, range(1000))) + "]"
MANY_TRACES = "".join(f'[[trace]]\npath = "gen:constant:{i + 100}"\n' for i in range(101))
CASES += [
    case("plan-name-dotdot", MATRIX, "p.toml", "'name'", "'..'",
         files={"p.toml": _plan("").replace('name = "bad"', 'name = ".."')}),
    case("plan-name-hidden", MATRIX, "p.toml", "'name'", ".video-cache",
         files={"p.toml": _plan("").replace('name = "bad"', 'name = ".video-cache"')}),
    case("plan-name-too-long", MATRIX, "p.toml", "'name'", "100 characters",
         files={"p.toml": _plan("").replace('name = "bad"', f'name = "{LONG}"')}),
    case("plan-trace-label-dotdot", MATRIX, "p.toml", "trace label '..'",
         files={"p.toml": _plan("") + 'label = ".."\n'}),
    case("plan-trace-label-separator", MATRIX, "p.toml", "trace label", "separator",
         files={"p.toml": _plan("") + 'label = "../../etc"\n'}),
    case("plan-trace-stem-dotdot", MATRIX, "p.toml", "trace label '..'",
         files={"p.toml": _plan("").replace("gen:constant:12", "...mahi"),
                "...mahi": "1\n2\n"}),
    case("plan-trace-label-too-long", MATRIX, "p.toml", "trace label", "101 characters",
         files={"p.toml": _plan("") + f'label = "{LONG}"\n'}),
    case("plan-clip-label-dotdot", MATRIX, "p.toml", "clip label '..'",
         files={"p.toml": _plan("") + '[[clip]]\npath = "c.mp4"\nlabel = ".."\n'}),
    case("plan-scheme-name-dot", MATRIX, "p.toml", "scheme '.'", "plain file name",
         files={"p.toml": _plan("") + '[[scheme]]\nname = "."\nbase = "webrtc"\n'}),
    case("plan-sweep-variant-too-long", MATRIX, "p.toml", "variant name", "shorter",
         files={"p.toml": _plan("") + f'[[sweep]]\npath = "cc.pacing_factor"\n'
                f'values = [2.0]\nlabel = "{LONG}"\n'}),
    case("plan-too-many-cells", MATRIX, "p.toml", "102000 cells", "limit of 100000",
         files={"p.toml": _plan("").replace("seeds = [1]", MANY_SEEDS) + MANY_TRACES}),
    case("plan-sweep-too-many-cells", MATRIX, "p.toml", "sweep 1", "cells", "limit of 100000",
         files={"p.toml": _plan("").replace("seeds = [1]", MANY_SEEDS) + '[[sweep]]\n'
                'path = "cc.pacing_factor"\nvalues = ['
                + ", ".join(f"{1 + i / 1000:.3f}" for i in range(1, 201)) + "]\n"}),
    case("scheme-file-stem-dotdot", ["compare", "--schemes", "webrtc", "--scheme-file",
         "...json", "--trace", T, "--duration", "2", "--out", "o"], "...json", "'..'",
         "rename the file", files={"...json": _scheme()}),
]  # fmt: skip
CASES += [
    case("compare-scheme-nan", ["compare", "--scheme-file", "s.json", "--trace", T, "--out", "o"],
         "s.json", "finite",
         files={"s.json": '{"pacer": {"kind": "none"}, "cc": {"kind": "gcc", '
                          '"pacing_factor": NaN}}'}),
]  # fmt: skip

# --- competing traffic and queue disciplines (issue 29) ------------------------------------
CASES += [
    case("competing-unknown-cc", run_with("--competing", "tcp:vegas"), "--competing",
         "tcp:vegas", "unknown TCP congestion control"),
    case("competing-unknown-kind", run_with("--competing", "udp:cbr"), "--competing",
         "udp:cbr", "expected media:SCHEME"),
    case("competing-unknown-scheme", run_with("--competing", "media:nosuch"), "--competing",
         "unknown scheme 'nosuch'"),
    case("competing-start-not-number", run_with("--competing", "tcp:cubic@soon"),
         "--competing", "start 'soon' is not a number"),
    case("competing-stop-before-start", run_with("--competing", "tcp:cubic@5-2"),
         "--competing", "stop (2 s) must be after start (5 s)"),
    case("competing-start-infinite", run_with("--competing", "tcp:cubic@inf"), "--competing",
         "finite"),
    case("competing-after-the-end", run_with("--competing", "tcp:cubic@50"),
         "tcp:cubic@50", "starts at 50 s", "(2 s)"),
    case("competing-bbr2", run_with("--competing", "tcp:bbr2"), "--competing", "tcp:bbr2",
         "newreno, cubic, bbr"),
    case("competing-short-tcp-stop", run_with("--competing", "short-tcp@3-9"), "--competing",
         "short-tcp@3-9", "start time only"),
    case("competing-cortv-main", run_with("--scheme", "co-rtv", "--competing", "tcp:cubic"),
         "co-rtv", "frame-dropping bottleneck"),
    case("competing-cortv-flow", run_with("--competing", "media:co-rtv"), "media:co-rtv",
         "its own bottleneck"),
    case("competing-self-of-fdcc", run_with("--scheme", "fdcc", "--competing", "media:self"),
         "media:self", "scheme 'fdcc' needs its own bottleneck"),
    case("competing-range-with-exponents", run_with("--competing", "tcp:cubic@1e-3-x"),
         "stop 'x' is not a number"),
    case("competing-compare-unknown-cc", ["compare", "--schemes", "webrtc", "--trace", T,
         "--competing", "tcp:reno"], "--competing", "tcp:reno"),
    case("set-competing-not-a-list", run_with("--set", "competing=5"), "competing", "array"),
    case("set-competing-bad-spec", run_with("--set", 'competing=["tcp:vegas"]'),
         "competing", "tcp:vegas"),
    case("live-competing-unknown-scheme", ["live", "run", "--trace", T, "--duration", "2",
         "--out", "out", "--competing", "reverse-media:webrtx"], "reverse-media:webrtx",
         "unknown scheme"),
    case("set-competing-access-negative", run_with("--set", 'competing=[{"spec": "tcp:cubic", '
         '"access_delay_ms": -5}]'), "access_delay_ms", "-5"),
    case("set-competing-object-typo", run_with("--set", 'competing=[{"spec": "tcp:cubic", '
         '"delay_ms": 5}]'), "competing"),
    # RFC 8867 §5.3 and §6.3's additions (issue 29).
    case("second-bottleneck-tiny-rate", run_with("--set", "second_bottleneck.rate_mbps=1e-9"),
         "second_bottleneck.rate_mbps"),
    case("second-bottleneck-typo", run_with("--set", "second_bottleneck.rate=2"), "rate_mbps"),
    case("competing-crosses-without-second", run_with("--set", 'competing=[{"spec": '
         '"tcp:cubic", "crosses": "second"}]'), "no second_bottleneck"),
    case("competing-crosses-unknown", run_with("--set", 'competing=[{"spec": "tcp:cubic", '
         '"crosses": "third"}]'), "competing", "third"),
    case("ecn-with-droptail", run_with("--ecn"), "downlink.ecn", "codel or fq-codel"),
    case("queue-unknown", run_with("--queue", "red"), "--queue", "red", "fq-codel"),
    case("queue-codel-cortv", run_with("--scheme", "co-rtv", "--queue", "codel"),
         "queue_discipline", "codel", "drop-tail bottleneck"),
    case("set-queue-discipline-unknown", run_with("--set", "downlink.queue_discipline=pie"),
         "queue_discipline", "pie"),
    case("plan-competing-bad", MATRIX, "p.toml", "tcp:vegas",
         files={"p.toml": _plan('competing = ["tcp:vegas"]')}),
    case("plan-queue-discipline-bad", MATRIX, "p.toml", "pie",
         files={"p.toml": _plan('"downlink.queue_discipline" = "pie"')}),
]  # fmt: skip

# --- a new user's second trial (the messages name what to fix) -----------------------------
CLIP = str(Path(__file__).resolve().parents[2] / "data/videos/bbb-intro_1280x720_24fps_10s.mp4")
CASES += [
    case("width-too-large", ["run", "--scheme", "cbr", "--video", CLIP, "--width", "100000",
                             "--trace", T, "--out", "o"], "--width", "[16, 16384]", "100000"),
    case("width-zero", run_with("--width", "0"), "--width", "[16, 16384]"),
    case("queue-bytes-fraction", run_with("--queue-bytes", "2.5"), "--queue-bytes",
         "whole number", "2.5"),
    case("quality-without-video", run_with("--quality", "full"), "--quality",
         "model encoder", "--video CLIP"),
    case("preset-without-video", run_with("--preset", "slow", "--encode-time", "modeled"),
         "--encode-time, --preset", "model encoder"),
    case("video-with-model-encoder", run_with("--video", CLIP, "--encoder", "model"),
         "--video", "--encoder model", "not be used"),
    case("competing-negative-start", run_with("--competing", "tcp:cubic@-1"), "start",
         ">= 0", "-1"),
    case("subcommand-extra-argument", ["schemes", "foo"], "unrecognized arguments: foo",
         "sluice schemes --help"),
    case("report-of-a-file", ["report", "f.txt"], "f.txt is a file", "result directory",
         files={"f.txt": "x\n"}),
    case("plan-trace-is-directory", MATRIX, "p.toml", "d is a directory",
         files={"p.toml": _plan("").replace("gen:constant:12", "d"), "d": DIR}),
    case("plan-trace-format-hint", MATRIX, "p.toml", "t.txt", "set the trace's format",
         files={"p.toml": _plan("").replace("gen:constant:12", "t.txt"), "t.txt": "abc\n"}),
    case("plan-set-typo", MATRIX, "p.toml", "[set], applied to scheme 'webrtc'", "duraton_s",
         files={"p.toml": _plan("duraton_s = 5")}),
    case("plan-set-wrong-type", MATRIX, "p.toml", "[set], applied to scheme 'webrtc'",
         "fps", "takes a number", files={"p.toml": _plan('fps = "fast"')}),
    case("plan-set-dotted-wrong-type", MATRIX, "p.toml", "[set], applied to scheme 'webrtc'",
         "downlink.queue_bytes", files={"p.toml": _plan('"downlink.queue_bytes" = "big"')}),
    case("plan-video-without-clips", MATRIX, "p.toml", "[video]", "'width' is for x264 on a clip",
         "no [[clip]]", files={"p.toml": _plan("") + "[video]\nwidth = 640\n"}),
    case("plan-seeds-a-boolean", MATRIX, "p.toml", "got a boolean true",
         files={"p.toml": _plan("").replace("seeds = [1]", "seeds = [true]")}),
    case("plan-no-schemes", MATRIX, "p.toml", "got an empty array",
         files={"p.toml": 'name = "e"\nschemes = []\n[[trace]]\npath = "gen:constant:5"\n'}),
    case("seeds-empty-entry", run_with("--seeds", "1,,2"), "an empty entry", "1,,2"),
    case("seeds-twice", run_with("--seeds", "1-3,2"), "2 given twice"),
    case("seeds-beyond-64-bits", run_with("--seeds", str(2**64)), "2^64 - 1"),
    case("plan-sweep-duplicate-values", MATRIX, "p.toml", "sweep 1", "lists 2.0 twice",
         files={"p.toml": _plan("") + '[[sweep]]\npath = "cc.pacing_factor"\n'
                'values = [2, 2.0]\n'}),
    case("reorder-ms-without-reorder", run_with("--reorder-ms", "20"), "--reorder-ms",
         "--reorder P"),
    case("blackout-after-the-end", run_with("--feedback-blackout", "10:20"),
         "faults.feedback_blackout_s", "starts at 10 s", "end of capture (2 s)"),
    case("trace-format-of-generated", run_with("--trace-format", "rate"), T, "is generated",
         "--trace-format rate is for trace files"),
    case("trace-info-format-of-generated", ["trace", "info", T, "--trace-format", "rate"],
         "--trace-format rate is for trace files"),
    case("trace-info-file-duration", ["trace", "info", "t.mahi", "--duration", "5"],
         "--duration", "t.mahi has its own length", files={"t.mahi": "1\n2\n"}),
    case("matrix-address-without-ray", [*MATRIX, "--address", "h:1"], "--address",
         "--backend ray", files={"p.toml": _plan("")}),
    case("matrix-only-empty", [*MATRIX, "--only", ""], "--only lists no scheme",
         files={"p.toml": _plan("")}),
    case("browser-scheme-event-log", ["browser", "run", "--scheme", "ace", "--event-log",
                                      "--trace", T, "--out", "o"], "--event-log",
         "not taken with --scheme"),
    case("browser-receiver-degradation", ["browser", "run", "--receiver", "sluice",
                                          "--degradation", "default", "--trace", T, "--out",
                                          "o"], "--degradation", "--receiver sluice"),
    case("run-into-a-live-part", ["run", "--trace", T, "--duration", "2", "--out", "p"],
         "p is one endpoint's part of a live session", files={"p/part.json": "{}\n"}),
    case("live-run-into-a-live-part", ["live", "run", "--trace", T, "--duration", "2",
                                       "--out", "p"], "p is one endpoint's part",
         files={"p/part.json": "{}\n"}),
    case("nested-command-extra-argument", ["trace", "info", T, "--bogus"],
         "unrecognized arguments: --bogus", "sluice trace info --help"),
    case("browser-receiver-and-scheme", ["browser", "run", "--receiver", "sluice", "--scheme",
                                         "ace", "--max-bitrate-kbps", "5000", "--trace", T,
                                         "--out", "o"], "--receiver sluice takes no --scheme"),
    case("plan-optional-trace-is-directory", MATRIX, "d is a directory",
         files={"p.toml": _plan("").replace("gen:constant:12", "d") + "optional = true\n",
                "d": DIR}),
    case("plot-of-a-live-part", ["plot", "p", "--out", "o"], "live session",
         "sluice live merge", files={"p/part.json": "{}\n"}),
    case("trace-gen-with-gen-prefix", ["trace", "gen", "gen:constant:12", "--duration", "2",
                                       "--out", "t.mahi"], 'without its "gen:" prefix',
         '"constant:12"'),
    case("plan-sweep-label-slash", MATRIX, "p.toml", "sweep 1", "label 'a/b'", "letters",
         files={"p.toml": _plan("") + '[[sweep]]\npath = "cc.pacing_factor"\n'
                'values = [2.0]\nlabel = "a/b"\n'}),
]  # fmt: skip
# --- settings the core ignored or choked on; inputs nested deeper than Python recurses -----
RUN2 = ["run", "--trace", T, "--duration", "2", "--out", "o"]
CASES += [
    case("set-newton-iterations-huge", [*RUN2, "--set",
         "cc.loss_based_v2.newton_iterations=4000000000"],
         "cc.loss_based_v2.newton_iterations must be in [1, 100]"),
    case("set-loss-based-window-invalid", [*RUN2, "--set",
         "cc.loss_based_v2.observation_window_size=1"],
         "cc.loss_based_v2: observation_window_size", "enabled=false"),
    case("set-salsify-never-fits", [*RUN2, "--scheme", "copa-salsify", "--set",
         "salsify.min_frame_fraction=1e12"], "salsify.min_frame_fraction"),
    case("set-ace-c-alpha", [*RUN2, "--scheme", "ace", "--encoder", "model", "--set",
         "encoder_controller.ewma_alpha=1e12"], "encoder_controller.ewma_alpha"),
    case("set-second-bottleneck-below-one-packet", [*RUN2, "--set",
         "second_bottleneck.rate_mbps=0.005"], "second_bottleneck.rate_mbps", "[0.012"),
    case("set-json-nested-deep", [*RUN2, "--set", "competing=" + "[" * 5000 + "]" * 5000],
         "--set", "nested too deeply"),
    # Deep enough to overflow the copies made while the value is set, not the parser.
    *(case(f"set-json-nested-{d}", [*RUN2, "--set", "competing=" + "[" * d + "]" * d],
           "the value of competing is nested more than 32 deep") for d in (100, 700)),
    case("plan-value-nested-300", MATRIX, "p.toml", "nested more than 32 deep",
         files={"p.toml": _plan("competing = " + "[" * 300 + "]" * 300)}),
    # A link pasted into [set] names one trace: the plan's other trace is refused before any
    # run (it failed on that trace's every cell, at run time).
    case("plan-pasted-link-other-trace", MATRIX, "p.toml", "trace 'c6'",
         "downlink.trace is not set by a config path", "(gen:constant:6 here)",
         files={"p.toml": _plan('downlink = { trace = "gen:constant:12", delay_ms = 5 }',
                                '[[trace]]\npath = "gen:constant:6"\nlabel = "c6"\n')}),
    case("plan-value-nested-deep", MATRIX, "p.toml", "nested too deeply",
         files={"p.toml": _plan("competing = " + "[" * 3000 + "]" * 3000)}),
    case("plan-dotted-key-deep", MATRIX, "p.toml", "nested too deeply",
         files={"p.toml": _plan(".".join(["a"] * 3000) + ".b = 1")}),
    case("set-trace-name", [*RUN2, "--set", "downlink.trace=x.mahi"], "downlink.trace",
         "--trace"),
    case("run-shorter-than-a-frame", ["run", "--trace", T, "--duration", "0.001", "--out", "o"],
         "shorter than one frame interval"),
]  # fmt: skip
# --- a new user's review (2026-12-07): results damaged or edited by hand, outputs over a
# result's own data, settings that would do nothing ---------------------------------------
TABLE = "scheme,trace,network,seed,run_dir,latency_all_ms_p95\n"
CASES += [
    case("report-out-over-the-runs-records", ["report", "r", "--out", "r/run.jsonl"],
         "--out r/run.jsonl is a file of the result in r", "destroy",
         files={"r/run.jsonl": "{}\n", "r/manifest.json": "{}"}),
    case("trace-gen-out-over-a-runs-summary", ["trace", "gen", "constant:5", "--duration", "2",
                                               "--out", "r/summary.json"],
         "r/summary.json is a file of the result",
         files={"r/run.jsonl": "{}\n", "r/summary.json": "{}"}),
    case("report-plan-copy-not-utf8", ["report", "m", "--out", "o.html"], "m/plan.json",
         "not UTF-8 JSON", files={"m/results.csv": TABLE, "m/plan.json": b"\xff{}"}),
    case("report-plan-copy-a-list", ["report", "m", "--out", "o.html"], "m/plan.json",
         "not a JSON object", files={"m/results.csv": TABLE, "m/plan.json": "[]"}),
    case("report-foreign-results-table", ["report", "m", "--out", "o.html"], "m/results.csv",
         "no column scheme", files={"m/results.csv": "a,b\n1,2\n"}),
    case("report-table-without-the-headline", ["report", "m", "--out", "o.html"],
         "no latency_all_ms_p95 column",
         files={"m/results.csv": "scheme,trace,network,seed,run_dir\n"}),
    case("run-set-encoder-x264-without-video", [*RUN2, "--set", "encoder.kind=x264"],
         "the x264 encoder needs a video", "--video CLIP"),
    case("plan-set-encoder-x264-without-clip", MATRIX, "p.toml", "scheme 'webrtc'",
         'encoder.kind = "x264" needs a clip', files={"p.toml": _plan('"encoder.kind" = "x264"')}),
    case("browser-chrome-to-chrome-sender-setting", ["browser", "run", "--trace", T, "--set",
                                                     "cc.pacing_factor=2", "--out", "o"],
         "--set cc.pacing_factor", "Chromium sends here", "--scheme S"),
    case("compare-seeds-and-set-seed", ["compare", "--schemes", "webrtc", "--trace", T,
                                        "--duration", "2", "--seeds", "1,2", "--set", "seed=5",
                                        "--out", "o"], "--seeds, not also --set seed"),
    case("set-pacer-null", [*RUN2, "--set", "pacer=null"], "pacer=null",
         "takes an object with a kind", "got null"),
    case("set-seed-negative", [*RUN2, "--set", "seed=-1"], "seed=-1",
         "a whole number of at least 0"),
    case("plot-runs-in-different-folders", ["plot", "a/r1", "b/r2"], "different folders",
         "--out", files={"a/r1/run.jsonl": "{}\n", "b/r2/run.jsonl": "{}\n"}),
]  # fmt: skip


def _limit_memory() -> None:
    resource.setrlimit(resource.RLIMIT_AS, (ADDRESS_SPACE_LIMIT, ADDRESS_SPACE_LIMIT))


def _listing(root: Path) -> set[str]:
    return {str(p.relative_to(root)) for p in root.rglob("*")}


@dataclass
class Outcome:
    code: int | None
    err: str
    before: set[str]
    after: set[str]


def _run_case(c: Case) -> Outcome:
    with tempfile.TemporaryDirectory(prefix="sluice-bad-") as tmp:
        root = Path(tmp)
        for name, content in c.files.items():
            p = root / name
            p.parent.mkdir(parents=True, exist_ok=True)
            if content is FIFO:
                os.mkfifo(p)
            elif content is SPARSE:
                with open(p, "wb") as f:
                    f.truncate(3 << 30)
            elif content is DIR:
                p.mkdir()
            elif content is SOCKET:
                with socket.socket(socket.AF_UNIX) as sock:
                    sock.bind(str(p))
            elif content is DEVICE:
                try:
                    os.mknod(p, 0o600 | stat.S_IFCHR, os.makedev(1, 3))
                except PermissionError:
                    return Outcome(None, "skip: not root (mknod)", set(), set())
            elif isinstance(content, bytes):
                p.write_bytes(content)
            else:
                p.write_text(str(content), encoding="utf-8")
        before = _listing(root)
        env = {**os.environ, "SLUICE_DEBUG": "0", "PYTHONWARNINGS": "ignore"}
        try:
            proc = subprocess.run(
                [sys.executable, "-m", "sluice", *c.argv], cwd=root, env=env,
                stdin=subprocess.DEVNULL, capture_output=True, text=True, timeout=TIMEOUT_S,
                preexec_fn=_limit_memory,
            )  # fmt: skip
            code, err = proc.returncode, proc.stderr
        except subprocess.TimeoutExpired as e:
            code = None
            err = f"timed out after {TIMEOUT_S} s; stderr so far: {e.stderr!r}"
        return Outcome(code, err, before, _listing(root))


@functools.lru_cache(maxsize=1)
def _outcomes() -> dict[str, Outcome]:
    """Every case's outcome, run a few at a time (each is its own process)."""
    with cf.ThreadPoolExecutor(max_workers=max(2, min(4, (os.cpu_count() or 2) * 2))) as pool:
        return dict(zip([c.id for c in CASES], pool.map(_run_case, CASES)))


def test_the_table_is_big_enough():
    # Issue 16's table had 97 cases; issue 30 adds at least 30 of its classes (outputs,
    # names that become paths and plan size, keys, trace sizes and rates, faults, live
    # spoofing), each with cases the issue did not name.
    assert len(CASES) >= 97 + 30 + 23  # issue 29: competing flows and queue disciplines
    assert len({c.id for c in CASES}) == len(CASES)


@pytest.mark.parametrize("c", CASES, ids=[c.id for c in CASES])
def test_bad_input(c: Case):
    o = _outcomes()[c.id]
    if o.err.startswith("skip: "):
        pytest.skip(o.err.removeprefix("skip: "))
    assert o.code == 2, (c.argv, o.code, o.err)
    assert "Traceback" not in o.err, o.err
    lines = o.err.strip().splitlines()
    assert len(lines) == 1, (c.argv, o.err)
    assert lines[0].startswith("sluice: error: "), o.err
    for n in c.needles:
        assert n in lines[0], (n, lines[0])
    assert o.after == o.before, f"left behind: {sorted(o.after - o.before)}"


def test_only_a_missing_plan_input_is_pointed_at_optional():
    """`optional = true` skips a missing file; for a directory or an unreadable trace the
    hint would send the user the wrong way (and the plan's key is `format`, not the CLI's
    --trace-format)."""
    out = _outcomes()
    for cid in ("plan-trace-is-directory", "plan-trace-format-hint"):
        assert "optional" not in out[cid].err and "--trace-format" not in out[cid].err, cid

# --- on real video: what libx264 and ffmpeg say is folded into the one line ----------------


@pytest.fixture(scope="module")
def tiny_clip(tmp_path_factory) -> Path:
    """A 3 s 16x16 clip (libvmaf crashes on frames this small)."""
    from sluice.video import ffmpeg_exe

    out = tmp_path_factory.mktemp("clip") / "tiny_16x16.mp4"
    subprocess.run([ffmpeg_exe(), "-v", "error", "-y", "-f", "lavfi", "-i",
                    "testsrc=size=16x16:rate=24", "-t", "3", "-pix_fmt", "yuv420p", str(out)],
                   check=True)  # fmt: skip
    return out


def _sluice(args: list[str], cwd: Path) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "sluice", *args], cwd=cwd, capture_output=True,
                          text=True, timeout=300, preexec_fn=_limit_memory)  # fmt: skip


def _one_line(p: subprocess.CompletedProcess, *needles: str) -> str:
    assert p.returncode == 2, p.stderr
    lines = p.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("sluice: error: "), p.stderr
    for n in needles:
        assert n in lines[0], (n, lines[0])
    return lines[0]


def test_x264_preset_set_by_path_is_one_line(tiny_clip, tmp_path):
    p = _sluice(["run", "--video", str(tiny_clip), "--trace", T, "--duration", "1", "--out", "o",
                 "--quality", "none", "--set", "encoder.preset=warp9"], tmp_path)  # fmt: skip
    _one_line(p, "warp9")
    assert not (tmp_path / "o").exists()


#: Every command that runs x264 on a clip, with what it needs besides the clip.
X264_COMMANDS = {
    "run": ["run", "--trace", T, "--duration", "1", "--quality", "none"],
    "live-send": ["live", "send", "--peer", PEER],
    "browser-scheme": ["browser", "run", "--trace", T, "--scheme", "webrtc-x264",
                       "--duration", "1"],
}  # fmt: skip


@pytest.mark.parametrize("command", X264_COMMANDS)
@pytest.mark.parametrize("path", ["encoder.width", "encoder.height", "encoder.video_frames"])
def test_the_clips_own_encoder_fields_are_refused_as_overrides(tiny_clip, tmp_path, path,
                                                               command):  # fmt: skip
    # Set by the front end from the clip: an override made x264 read the prepared frames at
    # the wrong size (a 1280x720 clip read as 320x180 frames: VMAF 34); a browser run
    # dropped it without a word.
    p = _sluice([*X264_COMMANDS[command], "--video", str(tiny_clip), "--out", "o", "--set",
                 f"{path}=8"], tmp_path)  # fmt: skip
    _one_line(p, f"{path} is set from the clip")
    assert not (tmp_path / "o").exists()


def test_replacing_the_whole_encoder_object_cannot_change_the_clips_fields(tiny_clip, tmp_path):
    p = _sluice(["run", "--video", str(tiny_clip), "--trace", T, "--duration", "1", "--out", "o",
                 "--quality", "none", "--set", 'encoder={"kind": "x264", "width": 8}'],
                tmp_path)  # fmt: skip
    _one_line(p, "encoder.width is set from the clip")
    # A whole object that leaves the clip's fields out gets them from the clip (it was refused,
    # as if it had set the width: the overrides went a second time after the clip's fields).
    from sluice import results

    p = _sluice(["run", "--video", str(tiny_clip), "--trace", T, "--duration", "1", "--out", "w",
                 "--quality", "none", "--set", 'encoder={"kind": "x264", "preset": "veryfast"}'],
                tmp_path)  # fmt: skip
    assert p.returncode == 0, p.stderr
    enc = results.load_run(tmp_path / "w").config["encoder"]
    assert enc["preset"] == "veryfast" and enc["width"] == 16, enc
    # An encoder object without `kind` sets its fields one by one: a width set before it
    # stands, and is refused (it was dropped without a word when the object reset it).
    p = _sluice(["run", "--video", str(tiny_clip), "--trace", T, "--duration", "1", "--out", "k",
                 "--quality", "none", "--set", "encoder.width=8", "--set",
                 'encoder={"preset": "veryfast"}'], tmp_path)  # fmt: skip
    _one_line(p, "encoder.width is set from the clip")
    # The clip is x264's: a model encoder set by an override is refused, saying what to give.
    p = _sluice(["run", "--video", str(tiny_clip), "--trace", T, "--duration", "1", "--out", "m",
                 "--quality", "none", "--set", "encoder.kind=model"], tmp_path)  # fmt: skip
    _one_line(p, "replaced the x264 encoder's config with a model one", "--encoder")


def test_quality_failure_keeps_the_finished_run(tiny_clip, tmp_path):
    from sluice import results

    p = _sluice(["run", "--video", str(tiny_clip), "--trace", T, "--duration", "2", "--out", "o",
                 "--encode-time", "modeled", "--quality", "fast"], tmp_path)  # fmt: skip
    line = _one_line(p, "run written to o", "quality", "16x16", "ffmpeg")
    assert not line.rstrip().endswith(":"), line  # says what failed
    run = results.load_run(tmp_path / "o")  # the finished run, complete, without scores
    assert len(run.frames) > 0 and run.quality is None
    assert run.config["encoder"]["bitstream_path"] == "stream.264"


def test_identical_x264_runs_in_two_directories_are_identical_files(tiny_clip, tmp_path):
    for out in ("a", "b"):
        p = _sluice(["run", "--video", str(tiny_clip), "--trace", T, "--duration", "1", "--out",
                     out, "--encode-time", "modeled", "--quality", "none"], tmp_path)  # fmt: skip
        assert p.returncode == 0, p.stderr
    a, b = (tmp_path / d / "run.jsonl" for d in ("a", "b"))
    assert a.read_bytes() == b.read_bytes()
    assert (tmp_path / "a/stream.264").read_bytes() == (tmp_path / "b/stream.264").read_bytes()


def test_a_clip_with_a_240_character_name_runs(tiny_clip, tmp_path):
    """Issue 30: the clip's name is part of its cache file's name, bounded, so a long clip
    name (240 characters, the file system takes 255) still runs."""
    import shutil

    clip = tmp_path / ("c" * 236 + ".mp4")
    shutil.copy(tiny_clip, clip)
    p = _sluice(["run", "--video", clip.name, "--trace", T, "--duration", "1", "--out", "o",
                 "--encode-time", "modeled", "--quality", "none"], tmp_path)  # fmt: skip
    assert p.returncode == 0, p.stderr
    cached = list((tmp_path / "results" / ".video-cache").iterdir())
    assert cached and all(len(f.name) < 120 for f in cached), cached


def test_a_width_that_scales_a_tall_clip_past_the_limit_is_named(tmp_path):
    # A 16x2048 clip at --width 2000 is 2000x256000: ffmpeg failed with "Nothing was written".
    clip = tmp_path / "tall.y4m"
    clip.write_bytes(b"YUV4MPEG2 W16 H2048 F30:1 Ip A1:1 C420jpeg\nFRAME\n"
                     + bytes(16 * 2048 * 3 // 2))  # fmt: skip
    p = _sluice(["run", "--trace", "gen:constant:5", "--duration", "1", "--video", str(clip),
                 "--width", "2000", "--out", "o"], tmp_path)  # fmt: skip
    _one_line(p, "scaled to 2000x256000", "above 16384", "--width")
