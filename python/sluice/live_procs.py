"""Live mode as separate processes: ``sluice live send``, ``live recv``, ``live relay`` and
``live merge`` (crates/sluice-live, ``process`` and ``part``).

Each of send, recv and relay runs ONE endpoint (the same sans-IO endpoint and event loop as
``sluice live run``) on its own UDP socket (``--listen``, loopback by default) and hears
only its configured peers (datagrams from any other address are counted and dropped). Each
writes its part of the results into its ``--out`` directory: ``part.json`` (header: role,
config, seed, addresses, its clock origin as wall-clock Unix microseconds, its counters) and
``events.json`` (its events and samples), plus for x264 the sender's ``stream.264`` and the
receiver's ``received.264``. ``live merge`` shifts the parts onto the sender's clock and
writes the same result files as ``live run`` through the same merging code, so ``sluice
plot`` draws them and ``--quality`` scores them.

* The sender starts sending at once and runs the session (``--duration``) plus its drain.
* The relay's and the receiver's clocks start at the first datagram from their peer (the
  relay's trace starts there). They run the session plus drain from there and end earlier
  once no datagram came for ``--idle-timeout-s`` (default 5 s). Start them before the
  sender; ``--start-timeout-s`` makes them give up if nothing comes.
* Ctrl-C or SIGTERM stops a process and still writes its part (marked stopped; exit 130 or
  143).

Three terminals, on one host (the run options, here ``--duration``, must agree)::

    sluice live recv  --listen 127.0.0.1:5002 --peer 127.0.0.1:5001 --duration 10 \\
        --out parts/recv
    sluice live relay --listen 127.0.0.1:5001 --sender 127.0.0.1:5000 \\
        --receiver 127.0.0.1:5002 --trace gen:constant:12 --duration 10 --out parts/relay
    sluice live send  --listen 127.0.0.1:5000 --peer 127.0.0.1:5001 --duration 10 \\
        --out parts/send
    sluice live merge --sender parts/send --relay parts/relay --receiver parts/recv \\
        --out results/live-split

Across hosts the wall clocks must be synchronised (NTP, PTP): the merged latencies then
include the clocks' residual offset.
"""

from __future__ import annotations

import argparse
import ipaddress
import json
import os
import shutil
import socket
import sys
from pathlib import Path
from typing import Any

from . import results
from .errors import SluiceError, core, core_errors

#: The part format (``part.json``); the Rust side's ``events.json`` has its own number.
PART_SCHEMA = 1
PART_FILE = "part.json"
EVENTS_FILE = "events.json"
# Parts whose clocks started further apart than this (beyond the session) are not one session.
ORIGIN_SLACK_S = 2.0


def _ip_port(address: str) -> tuple[Any, int]:
    """The IP and port of a normalised ``IP:PORT`` (as :func:`sluice.cli.live.address`
    writes it)."""
    host, _, port = address.rpartition(":")
    return ipaddress.ip_address(host.strip("[]")), int(port)


def _is_local(ip: Any) -> bool:
    """Whether ``ip`` is one of this machine's own addresses (a loopback socket reaches
    those too): a socket can bind to it."""
    family = socket.AF_INET6 if ip.version == 6 else socket.AF_INET
    try:
        with socket.socket(family, socket.SOCK_DGRAM) as s:
            s.bind((str(ip), 0))
    except OSError:
        return False
    return True


def _check_peers(listen: str, peers: list[tuple[str, str]]) -> None:
    """Refuses (one line) a peer this endpoint could not send to from ``listen``: another
    address family, a wildcard, multicast or broadcast address, or the endpoint itself; and
    two peers at one address. (Otherwise the endpoint runs and every send fails.)"""
    lip, lport = _ip_port(listen)
    seen: dict[str, str] = {}
    for flag, address in peers:
        ip, port = _ip_port(address)
        if ip.version != lip.version:
            raise SluiceError(f"--{flag} {address} is IPv{ip.version} but --listen {listen} is "
                              f"IPv{lip.version}: give addresses of one family")  # fmt: skip
        if ip.is_unspecified:
            raise SluiceError(f"--{flag} {address}: {ip} is not an address to send to; give "
                              "the peer's own address")  # fmt: skip
        if ip.is_multicast or ip == ipaddress.IPv4Address("255.255.255.255"):
            raise SluiceError(f"--{flag} {address}: a multicast or broadcast address; give the "
                              "peer's own (unicast) address")  # fmt: skip
        if port == lport and (ip == lip or (lip.is_unspecified and ip.is_loopback)):
            raise SluiceError(f"--{flag} {address} is this endpoint's own --listen address")
        if lip.is_loopback and not ip.is_loopback and not _is_local(ip):
            raise SluiceError(f"--{flag} {address} is not on this machine, and a socket on "
                              f"the loopback address --listen {listen} cannot send off it: "
                              "give --listen an address of the interface that reaches the "
                              "peer (or 0.0.0.0)")  # fmt: skip
        if address in seen:
            raise SluiceError(f"--{flag} and --{seen[address]} are the same address ({address})")
        seen[address] = flag


# --- the endpoint commands ---------------------------------------------------------------------


def _spec(args: argparse.Namespace) -> Any:
    from .cli import options

    name, cfg = options.scheme_from_args(args)
    return options.spec_from_args(args, name, cfg, None)


def _out_dir(args: argparse.Namespace) -> Path:
    """The part's directory, created if need be (and removed again if the process fails
    before writing anything into it: :func:`leave_nothing`)."""
    out = Path(args.out)
    if not str(args.out).strip():
        raise SluiceError("--out must name a directory")
    results.check_result_dir(out, "--out")
    args.created_dirs = [d for d in (out, *out.parents) if not d.exists()]
    try:
        out.mkdir(parents=True, exist_ok=True)
    except OSError as e:
        raise SluiceError(f"cannot create output directory {out}: {e.strerror or e}") from None
    return out


def leave_nothing(cmd: Any) -> Any:
    """``cmd``, but a directory it created and left empty (it failed before writing its
    part: a port in use, no peer) is removed."""

    def run(args: argparse.Namespace) -> int:
        try:
            return int(cmd(args))
        except BaseException:
            for d in getattr(args, "created_dirs", []):  # the deepest first
                if d.is_dir() and not any(d.iterdir()):
                    d.rmdir()
            raise

    run.__name__ = cmd.__name__
    return run


def _spec_json(spec: Any) -> dict[str, Any]:
    """What ``live merge`` needs to rebuild the sender's run spec."""
    return {
        "scheme": spec.scheme,
        "scheme_config": spec.scheme_config,
        "overrides": [list(o) for o in spec.overrides],
        "video": os.path.abspath(spec.video) if spec.video else None,
        "encoder": spec.encoder,
        "width": spec.width,
        "encode_time": spec.encode_time,
        "preset": spec.preset,
        "trace": spec.trace,
        "uplink_trace": spec.uplink_trace,
    }


def _run_endpoint(role: str, spec: Any, cfg: dict[str, Any], out: Path, options: dict[str, Any],
                  header: dict[str, Any], down: Any = None, up: Any = None,
                  files: dict[str, Path] | None = None,
                  early: dict[str, str] | None = None) -> int:  # fmt: skip
    """Runs one endpoint and writes its part into ``out``; re-raises Ctrl-C/SIGTERM after
    writing. ``files`` are temporary files the endpoint writes, moved into the part;
    ``early`` (name: text) is written into ``out`` once the endpoint has bound its socket
    (for a player to read while it runs) and removed again if no part is written."""
    from .live import _progress
    from .run import captured_stderr, fold_stderr

    files = dict(files or {})
    early = dict(early or {})
    _core = core()
    with captured_stderr() as said, core_errors():
        try:
            ep = _core.LiveEndpoint(role, json.dumps(cfg), json.dumps(options),
                                    down.trace if down else None, up.trace if up else None)
        except ValueError as e:
            raise ValueError(fold_stderr(str(e), said())) from None
    # Bound and running: only now does the previous part in `out` go (a command that cannot
    # bind leaves it as it was).
    _clean_old(out)
    events_tmp = results.temp_path(out / EVENTS_FILE)
    part_tmp = results.temp_path(out / PART_FILE)
    written = False
    try:
        for name, text in early.items():
            (out / name).write_text(text, encoding="utf-8")
        interrupt: KeyboardInterrupt | None = None
        try:
            _progress(ep, f"{role} {spec.scheme}")
        except KeyboardInterrupt as e:  # stop, and still write the part
            ep.stop()
            interrupt = e
        try:
            counters = json.loads(ep.finish(str(events_tmp)))
        except RuntimeError as e:
            raise SluiceError(f"live {role} stopped: {e}") from None
        io = counters["io"]
        if io["datagrams_out"] == 0 and io["send_errors"] > 0:
            raise SluiceError(
                f"live {role}: every send failed ({io['send_errors']} tries from --listen "
                f"{options.get('listen')}): the peer's address is not reachable from it; "
                "no part written"
            )
        if role == "sender" and interrupt is None and io["datagrams_in"] == 0:
            # Nothing to merge: no part, one line (a silent peer is not a session).
            raise SluiceError(
                f"live sender: no answer from the peer {options.get('peer')} in "
                f"{counters.get('wall_s', 0):.1f} s ({io['datagrams_out']} datagrams sent, "
                "none came back; is `sluice live recv` or `live relay` running there and "
                "sending to this --listen address?); no part written"
            )
        part = {
            "record": "live-part",
            "part_schema": PART_SCHEMA,
            **{k: v for k, v in results.make_header(
                seed=cfg["seed"], scheme=spec.scheme, config=cfg,
                trace=down.header() if down else None, uplink_trace=up.header() if up else None,
            ).items() if k != "record"},  # fmt: skip
            "role": role,
            **header,
            "spec": _spec_json(spec),
            "wall_origin_us": counters["wall_origin_us"],
            "started": counters["started"],
            "interrupted": interrupt is not None,
            "live": counters,
        }
        part_tmp.write_text(json.dumps(part, indent=2) + "\n", encoding="utf-8")
        for name, tmp in files.items():
            if tmp.is_file():
                os.replace(tmp, out / name)
        os.replace(events_tmp, out / EVENTS_FILE)
        os.replace(part_tmp, out / PART_FILE)  # last: a part.json means a complete part
        written = True
    finally:
        for tmp in (events_tmp, part_tmp, *files.values()):
            tmp.unlink(missing_ok=True)
        if not written:
            for name in early:
                (out / name).unlink(missing_ok=True)
    print(f"live {role}: {_describe(role, counters)}; part: {out}", file=sys.stderr)
    if interrupt is not None:
        raise interrupt
    return 0


def _describe(role: str, c: dict[str, Any]) -> str:
    io = c["io"]
    said = f"{io['datagrams_in']} datagrams in, {io['datagrams_out']} out"
    if io.get("foreign"):
        said += f", {io['foreign']} from strangers (dropped)"
    if not c["started"]:
        said += ", never heard its peer"
    spoofed = {k: v for k, v in (c.get("spoofed") or {}).items() if v}
    if spoofed:
        said += ", spoofed (counted, ignored): " + ", ".join(f"{k} {v}" for k, v in spoofed.items())
    return said + f", ended: {c['ended']}"


def _clean_old(out: Path) -> None:
    """A previous part in ``out`` is removed before a new one starts (never mixed)."""
    from .live import SDP_FILE

    for name in (PART_FILE, EVENTS_FILE, results.STREAM_FILE, results.STREAM_INDEX_FILE,
                 results.RECEIVED_FILE, SDP_FILE):  # fmt: skip
        (out / name).unlink(missing_ok=True)


def cmd_send(args: argparse.Namespace) -> int:
    from .run import planned_config, prepare_clip, resolve_encoder, validate_config, with_clip

    _check_peers(args.listen, [("peer", args.peer)])
    spec = _spec(args)
    encoder = resolve_encoder(spec)
    cfg = planned_config(spec, encoder)
    validate_config(cfg)
    out = _out_dir(args)
    files: dict[str, Path] = {}
    if encoder == "x264":
        stream = results.temp_path(out.resolve() / results.STREAM_FILE)
        cfg = with_clip(spec, cfg, prepare_clip(spec, cfg), stream)
        files = {results.STREAM_FILE: stream,
                 results.STREAM_INDEX_FILE: Path(f"{stream}.idx")}  # fmt: skip
    if args.start_timeout_s is not None and args.transport != "webrtc":
        raise SluiceError("--start-timeout-s bounds the sender's wait for the peer's SDP "
                          "answer: it is for --transport webrtc")  # fmt: skip
    options = {"listen": args.listen, "peer": args.peer, "idle_timeout_s": args.idle_timeout_s,
               "start_timeout_s": args.start_timeout_s, **_transport(args)}  # fmt: skip
    return _run_endpoint("sender", spec, cfg, out, options,
                         {"listen": args.listen, "peer": args.peer,
                          "transport": args.transport}, files=files)  # fmt: skip


def _transport(args: argparse.Namespace) -> dict[str, Any]:
    """The transport options of ``live send`` and ``live recv``: with WebRTC both SDP files
    (checked here, so a missing one is one line before anything starts)."""
    if args.transport != "webrtc":
        if args.sdp_out or args.sdp_in:
            raise SluiceError("--sdp-out and --sdp-in are for --transport webrtc")
        return {}
    if not (args.sdp_out and args.sdp_in):
        raise SluiceError("--transport webrtc between processes needs --sdp-out (the file this "
                          "endpoint writes its SDP to) and --sdp-in (the peer's)")  # fmt: skip
    if Path(args.sdp_out).resolve() == Path(args.sdp_in).resolve():
        raise SluiceError(f"--sdp-out and --sdp-in are the same file ({args.sdp_out})")
    for flag, f in (("--sdp-out", args.sdp_out), ("--sdp-in", args.sdp_in)):
        if not Path(f).resolve().parent.is_dir():
            raise SluiceError(f"{flag} {f}: no such directory")
    return {"transport": "webrtc", "sdp_out": str(args.sdp_out), "sdp_in": str(args.sdp_in)}


def _endpoint_config(spec: Any) -> dict[str, Any]:
    """The run config of a relay or a receiver (they have no encoder: the model's stands in;
    ``live merge`` does not compare encoders)."""
    from .run import planned_config, validate_config

    cfg = planned_config(spec, "model")
    validate_config(cfg)
    return cfg


def cmd_recv(args: argparse.Namespace) -> int:
    from . import config
    from .live import SDP_FILE, sdp

    _check_peers(args.listen, [("peer", args.peer)])
    spec = _spec(args)
    info = config.scheme_info(spec.scheme) if spec.scheme_config is None else None
    encoder = args.encoder or (info or {}).get("encoder") or "model"
    if args.forward_rtp is not None:
        if not 1 <= args.forward_rtp <= 65535:
            raise SluiceError(f"--forward-rtp must be a port number, got {args.forward_rtp}")
        if encoder != "x264":
            raise SluiceError("--forward-rtp needs x264 (--encoder x264): the model encoder has "
                              "no bitstream to play")  # fmt: skip
    cfg = _endpoint_config(spec)
    out = _out_dir(args)
    options: dict[str, Any] = {"listen": args.listen, "peer": args.peer,
                               "idle_timeout_s": args.idle_timeout_s,
                               "start_timeout_s": args.start_timeout_s,
                               **_transport(args)}  # fmt: skip
    files: dict[str, Path] = {}
    if encoder == "x264":
        received = results.temp_path(out.resolve() / results.RECEIVED_FILE)
        files[results.RECEIVED_FILE] = received
        options["received_stream"] = str(received)
    early: dict[str, str] = {}
    if args.forward_rtp is not None:
        host = args.listen.rpartition(":")[0]
        host = {"0.0.0.0": "127.0.0.1", "[::]": "[::1]"}.get(host, host)
        options["forward_rtp"] = f"{host}:{args.forward_rtp}"
        # The player's address is --listen's host (loopback for a wildcard): its port
        # must not be the endpoint's own, nor the peer's.
        own = args.forward_rtp == _ip_port(args.listen)[1]
        taken = "this endpoint's own" if own else "--peer's" if (
            options["forward_rtp"] == args.peer) else None  # fmt: skip
        if taken:
            raise SluiceError(f"--forward-rtp {args.forward_rtp} sends the video to "
                              f"{options['forward_rtp']}, {taken} address: give the port a "
                              "player listens on")  # fmt: skip
        early[SDP_FILE] = sdp(args.forward_rtp, host.strip("[]"))
    header = {"listen": args.listen, "peer": args.peer, "encoder": encoder,
              "idle_timeout_s": args.idle_timeout_s, "transport": args.transport}  # fmt: skip
    return _run_endpoint("receiver", spec, cfg, out, options, header, files=files, early=early)


def cmd_relay(args: argparse.Namespace) -> int:
    from .live import faults_from_args
    from .run import load_traces

    _check_peers(args.listen, [("sender", args.sender), ("receiver", args.receiver)])
    spec = _spec(args)
    cfg = _endpoint_config(spec)
    if cfg.get("competing"):  # before the session, not at `live merge` after it
        raise SluiceError("competing flows run in `live run` (one process), whose result holds "
                          "them; a relay of separate processes cannot merge them with the "
                          "sender's part")  # fmt: skip
    faults = faults_from_args(args).options()
    down, up = load_traces(spec, cfg)
    out = _out_dir(args)
    options = {"listen": args.listen, "sender": args.sender, "receiver": args.receiver,
               "idle_timeout_s": args.idle_timeout_s, "start_timeout_s": args.start_timeout_s,
               "faults": faults, "transport": args.transport}  # fmt: skip
    header = {"listen": args.listen, "sender": args.sender, "receiver": args.receiver,
              "faults": faults, "idle_timeout_s": args.idle_timeout_s}  # fmt: skip
    return _run_endpoint("relay", spec, cfg, out, options, header, down=down, up=up)


# --- merge --------------------------------------------------------------------------------------


def read_part(d: str, role: str) -> dict[str, Any]:
    """The header of the part in directory ``d``, checked to be a complete ``role`` part."""
    p = Path(d)
    if not p.is_dir():
        raise SluiceError(f"no such part directory: {d}")
    f = p / PART_FILE
    if not f.is_file():
        raise SluiceError(f"{d}: not a live part (no {PART_FILE}; did the process finish?)")
    try:
        part = json.loads(f.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as e:
        raise SluiceError(f"{f}: unreadable part ({e})") from None
    if not isinstance(part, dict) or part.get("record") != "live-part":
        raise SluiceError(f"{f}: not a live part")
    if part.get("part_schema") != PART_SCHEMA:
        raise SluiceError(f"{f}: part format {part.get('part_schema')} (this sluice reads "
                          f"{PART_SCHEMA})")  # fmt: skip
    if part.get("role") != role:
        raise SluiceError(f"{d} holds the {part.get('role')}'s part, not the {role}'s")
    if not (p / EVENTS_FILE).is_file():
        raise SluiceError(f"{d}: the part has no {EVENTS_FILE}")
    addresses = ("listen", "sender", "receiver") if role == "relay" else ("listen", "peer")
    needed = {"scheme": str, "seed": int, "config": dict, "spec": dict, "live": dict,
              "wall_origin_us": int, "started": bool, "interrupted": bool,
              **{a: str for a in addresses}}  # fmt: skip
    for key, kind in needed.items():
        if not isinstance(part.get(key), kind) or isinstance(part.get(key), bool) != (kind is bool):
            kind_name = {str: "a string", int: "an integer", dict: "an object",
                         bool: "true or false"}[kind]  # fmt: skip
            raise SluiceError(f"{f}: not a complete live part ({key!r} missing or not "
                              f"{kind_name})")  # fmt: skip
    return part


def _same_address(a: str, b: str) -> bool:
    """Whether ``a`` and ``b`` (IP:PORT) can be one socket: the same port, and the same IP
    unless one of them is a wildcard (0.0.0.0, ::)."""
    try:
        (ia, pa), (ib, pb) = _ip_port(a), _ip_port(b)
    except ValueError:
        return a == b
    return pa == pb and (ia == ib or ia.is_unspecified or ib.is_unspecified)


def _check_wiring(parts: dict[str, tuple[str, dict[str, Any]]]) -> None:
    """Refuses (one line) parts whose addresses do not join up: the sender sent to the relay
    (or, without one, to the receiver), and each heard the one that sent to it."""
    s, r = parts["sender"][1], parts["receiver"][1]
    relay = parts.get("relay")
    if relay is None:
        if not _same_address(s["peer"], r["listen"]):
            raise SluiceError(f"the sender sent to {s['peer']}, not to the receiver "
                              f"({r['listen']}): give the relay's part with --relay")  # fmt: skip
        if not _same_address(r["peer"], s["listen"]):
            raise SluiceError(f"the receiver heard {r['peer']}, not the sender "
                              f"({s['listen']})")  # fmt: skip
        return
    x = relay[1]
    for what, a, b in (("the sender sent to", s["peer"], x["listen"]),
                       ("the relay heard the sender at", x["sender"], s["listen"]),
                       ("the relay forwarded to", x["receiver"], r["listen"]),
                       ("the receiver heard", r["peer"], x["listen"])):  # fmt: skip
        if not _same_address(a, b):
            raise SluiceError(f"the parts do not join up: {what} {a}, not {b}")


def check_together(parts: dict[str, tuple[str, dict[str, Any]]]) -> None:
    """Refuses (one line) parts that are not of one session: another scheme, seed or config
    (the link's settings are the relay's, the encoder the sender's; the receiver does not use
    the frame rate), or a clock that started outside the sender's session."""
    from . import config

    _check_wiring(parts)
    sd, s = parts["sender"]
    session_s = float(s["config"]["duration_s"]) + float(s["config"]["drain_s"])
    for role, (d, p) in parts.items():
        if role == "sender":
            continue
        what = f"the {role}'s part ({d}) is not of the sender's session ({sd})"
        if p["scheme"] != s["scheme"]:
            raise SluiceError(f"{what}: scheme {p['scheme']}, not {s['scheme']}")
        if p["seed"] != s["seed"]:
            raise SluiceError(f"{what}: seed {p['seed']}, not {s['seed']}")
        # The network and its path faults are the relay's; the encoder is the sender's.
        skip = {"downlink", "uplink", "encoder", "faults"}
        if role == "receiver":
            skip.add("fps")
        a = {k: v for k, v in s["config"].items() if k not in skip}
        b = {k: v for k, v in p["config"].items() if k not in skip}
        diff = config.diff(a, b)
        if diff:
            k = diff[0]
            fa, fb = config.flatten(a), config.flatten(b)
            hint = " (give the relay --fps of the sender's clip)" if k == "fps" else ""
            raise SluiceError(f"{what}: its config has {k} = {json.dumps(fb.get(k))}, the "
                              f"sender's {json.dumps(fa.get(k))}{hint}")  # fmt: skip
        if not p["started"]:
            raise SluiceError(f"the {role}'s part ({d}) is empty: it never heard its peer")
        # A sending process picks its stream (SSRCs) from its start time: a part that read
        # another stream heard another sender (or this one's earlier or later life).
        # (With WebRTC the receiver reads the stream DTLS-SRTP authenticated as the sender's
        # offer's, under str0m's numbers: that is the stronger check.)
        heard, sent = p["live"].get("last_stream"), s["live"].get("stream")
        webrtc = s.get("transport") == "webrtc"
        if heard is not None and sent is not None and heard != sent and not webrtc:
            raise SluiceError(f"{what}: it read stream {heard}, the sender sent stream "
                              f"{sent}")  # fmt: skip
        offset_s = (p["wall_origin_us"] - s["wall_origin_us"]) / 1e6
        if not -ORIGIN_SLACK_S <= offset_s <= session_s + ORIGIN_SLACK_S:
            when = f"{abs(offset_s):.1f} s {'after' if offset_s > 0 else 'before'}"
            raise SluiceError(f"{what}: its clock started {when} the sender's (not the same "
                              "session, or the hosts' clocks are not synchronised)")  # fmt: skip


class MergedSession:
    """A :func:`sluice.run.simulate` session that merges parts instead of running: the
    result files are written by the same code as a run's (and ``live run``'s)."""

    def __init__(self, parts: dict[str, tuple[str, dict[str, Any]]], merged_cfg: dict[str, Any],
                 _core: Any, cfg_json: str, run_dir: Path) -> None:  # fmt: skip
        self.parts = parts
        self.cfg = merged_cfg
        self._core = _core
        self.run_dir = run_dir
        self.files: dict[str, Path] = {}
        self.interrupted = any(p["interrupted"] for _, p in parts.values())
        relay = parts.get("relay")
        #: The result header's ``live``: three processes, and the relay's wire faults.
        self.header_live = {"processes": "separate",
                            **((relay[1].get("faults") or {}) if relay else {})}  # fmt: skip
        sender_dir = Path(parts["sender"][0])
        enc = json.loads(cfg_json)["encoder"]
        if enc.get("kind") == "x264":
            # The encoder's stream, where the run's own stream would be (quality reads it).
            stream = Path(enc["bitstream_path"])
            for name, dst in ((results.STREAM_FILE, stream),
                              (results.STREAM_INDEX_FILE, Path(f"{stream}.idx"))):  # fmt: skip
                src = sender_dir / name
                if not src.is_file():
                    raise SluiceError(f"{sender_dir}: the x264 sender's part has no {name}")
                shutil.copyfile(src, dst)
            received = Path(parts["receiver"][0]) / results.RECEIVED_FILE
            if received.is_file():
                tmp = results.temp_path(run_dir.resolve() / results.RECEIVED_FILE)
                shutil.copyfile(received, tmp)
                self.files[results.RECEIVED_FILE] = tmp

    def resolved_config_json(self) -> str:
        from . import config

        return json.dumps(config.resolve(self.cfg))

    def run(self, spec: Any, duration_s: float) -> tuple[str, str, str, str]:
        relay = self.parts.get("relay")
        with core_errors("cannot merge: "):
            frames, skips, samples, summary, stats_json = self._core.live_merge(
                json.dumps(self.cfg), str(Path(self.parts["sender"][0]) / EVENTS_FILE),
                str(Path(relay[0]) / EVENTS_FILE) if relay else None,
                str(Path(self.parts["receiver"][0]) / EVENTS_FILE),
                (self.parts["sender"][1]["wall_origin_us"],
                 relay[1]["wall_origin_us"] if relay else None,
                 self.parts["receiver"][1]["wall_origin_us"]),
            )  # fmt: skip
        if self.interrupted:
            summary = json.dumps({**json.loads(summary), "interrupted": True})
        stats = json.loads(stats_json)
        from .live import with_spoofed, with_srtp

        summary = with_srtp(with_spoofed(summary, stats), stats)
        stats["mode"] = "live"
        stats["processes"] = {
            role: {"dir": str(d), "listen": p.get("listen"), "wall_origin_us": p["wall_origin_us"],
                   "offset_us": p["wall_origin_us"] - self.parts["sender"][1]["wall_origin_us"],
                   "ended": p["live"]["ended"], "interrupted": p["interrupted"]}
            for role, (d, p) in self.parts.items()
        }  # fmt: skip
        stats["faults"] = relay[1].get("faults") if relay else None
        stats["interrupted"] = self.interrupted
        self.run_dir.mkdir(parents=True, exist_ok=True)
        tmp = results.temp_path(self.run_dir / results.LIVE_FILE)
        self.files[results.LIVE_FILE] = tmp
        tmp.write_text(json.dumps(stats, indent=2) + "\n", encoding="utf-8")
        return frames, skips, samples, summary


def merge(sender: str, receiver: str, relay: str | None = None, out: str | None = None,
          quality: str = "fast") -> Path:  # fmt: skip
    """Merges the parts in these directories into one result (``live run``'s files) in
    ``out``; returns the run directory."""
    from .run import RunSpec, simulate
    from .traces import trace_stem

    parts = {"sender": (sender, read_part(sender, "sender"))}
    if relay is not None:
        parts["relay"] = (relay, read_part(relay, "relay"))
    parts["receiver"] = (receiver, read_part(receiver, "receiver"))
    check_together(parts)
    s = parts["sender"][1]
    cfg = json.loads(json.dumps(s["config"]))
    trace = uplink = None
    if relay is not None:
        r = parts["relay"][1]
        cfg["downlink"], cfg["uplink"] = r["config"]["downlink"], r["config"]["uplink"]
        # The path faults are the relay's (they happened there).
        cfg.pop("faults", None)
        if "faults" in r["config"]:
            cfg["faults"] = r["config"]["faults"]
        trace, uplink = r["trace"], r["uplink_trace"]
    sp = s["spec"]
    if out is None:
        stem = trace_stem(parts["relay"][1]["spec"]["trace"]) if relay else "direct"
        out = os.path.join("results", f"live-{sp['scheme']}-{stem}-s{s['seed']}")
    for role, (d, _) in parts.items():
        if Path(out).resolve() == Path(d).resolve():
            raise SluiceError(f"--out {out} is the {role}'s part: give the merged result a "
                              "directory of its own")  # fmt: skip
    spec = RunSpec(
        scheme=sp["scheme"], scheme_config=sp["scheme_config"],
        overrides=tuple(tuple(o) for o in sp["overrides"]), video=sp["video"],
        encoder=sp["encoder"], width=sp["width"], encode_time=sp["encode_time"],
        preset=sp["preset"], quality=quality, out_dir=str(out),
    )  # fmt: skip

    def session(_core: Any, cfg_json: str, down: Any, up: Any, run_dir: Path) -> MergedSession:
        return MergedSession(parts, cfg, _core, cfg_json, run_dir)

    output = simulate(spec, session)
    output.header["trace"], output.header["uplink_trace"] = trace, uplink
    return output.write()


def cmd_merge(args: argparse.Namespace) -> int:
    from . import report

    run_dir = merge(args.sender, args.receiver, relay=args.relay, out=args.out,
                    quality=args.quality)  # fmt: skip
    summary = json.loads((run_dir / results.SUMMARY_FILE).read_text(encoding="utf-8"))
    if args.json:
        print(json.dumps(summary, indent=2))
        return 0
    scheme = read_part(args.sender, "sender")["scheme"]
    print(report.run_table(scheme, summary))
    print(f"\nresults: {run_dir}")
    from .live import spoof_note, srtp_note

    for note in (spoof_note(summary), srtp_note(summary)):
        if note:
            print(note, file=sys.stderr)
    return 0
