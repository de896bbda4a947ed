"""The browser harness's local HTTP server: serves the two pages, carries their offer and
answer, rewrites the ICE candidates so both peers send to Sluice's relay, and collects what
the pages record.

The pages (``static/``) talk to ``/api/...`` with a per-run token. Signalling, without any
outside service:

1. the sender posts its offer once its ICE gathering is complete (``POST /api/offer``);
2. the receiver gets it with the candidates removed (``GET /api/offer``), answers and posts
   its answer once gathered (``POST /api/answer``);
3. with both peers' loopback UDP ports known (:attr:`Signal.peers`), the harness starts the
   relay and gives its port (:meth:`Signal.relay_at`); the sender then gets the answer with
   the receiver's candidate rewritten to the relay's address (``GET /api/answer``), the
   receiver the sender's candidate likewise (``GET /api/candidate``). No other candidate
   survives, so every datagram of the session (STUN, DTLS, SRTP, RTCP) goes through the
   relay.

``GET`` of something not there yet answers 204; the pages poll. ``POST /api/log/ROLE``
appends a chunk of records, ``POST /api/done/ROLE`` says a page has flushed its last one,
``GET /api/stop`` answers once the harness has called :meth:`Signal.stop`.
"""

from __future__ import annotations

import json
import re
import threading
from dataclasses import dataclass, field
from http import HTTPStatus
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, urlparse

STATIC = Path(__file__).resolve().parent / "static"
ROLES = ("sender", "receiver")
#: Largest request body a page may post (a chunk of a second of records is a few tens of kB).
MAX_BODY = 16 << 20
_CANDIDATE = re.compile(
    r"^a=candidate:(?P<foundation>\S+) (?P<component>\d+) (?P<transport>\S+) (?P<priority>\d+) "
    r"(?P<address>\S+) (?P<port>\d+) typ (?P<type>\S+)(?P<rest>.*)$"
)


class SignalError(Exception):
    """A page sent something the harness cannot use (no loopback UDP candidate, ...)."""


def loopback_port(sdp: str) -> int:
    """The port of the session's IPv4 loopback UDP host candidate."""
    for line in sdp.splitlines():
        m = _CANDIDATE.match(line.strip())
        if (m and m["transport"].lower() == "udp" and m["address"] == "127.0.0.1"
                and m["type"] == "host" and m["component"] == "1"):  # fmt: skip
            return int(m["port"])
    raise SignalError(
        "no 127.0.0.1 UDP host candidate in the page's SDP (is Chromium started with "
        "--allow-loopback-in-peer-connection?)"
    )


def candidate_line(relay_port: int) -> str:
    """A host candidate at the relay's loopback address (without the ``a=`` prefix)."""
    return f"candidate:1 1 udp 2122260223 127.0.0.1 {relay_port} typ host generation 0"


def rewrite(sdp: str, relay_port: int | None) -> str:
    """``sdp`` with every candidate removed and, with ``relay_port``, one host candidate at the
    relay (and end-of-candidates) in the first media section."""
    out: list[str] = []
    added = relay_port is None
    for line in sdp.splitlines():
        if line.startswith("a=candidate:") or line.startswith("a=end-of-candidates"):
            continue
        out.append(line)
        if not added and line.startswith("a=mid:"):
            out.append("a=" + candidate_line(relay_port))
            out.append("a=end-of-candidates")
            added = True
    return "\r\n".join(out) + "\r\n"


def first_mid(sdp: str) -> str:
    for line in sdp.splitlines():
        if line.startswith("a=mid:"):
            return line[len("a=mid:"):].strip()
    return "0"


@dataclass
class Signal:
    """The state the pages share, behind one lock."""

    token: str
    lock: threading.Lock = field(default_factory=threading.Lock)
    #: (sender port, receiver port) once both SDPs are in; :attr:`peers_known` is set then.
    peers: tuple[int, int] | None = None
    peers_known: threading.Event = field(default_factory=threading.Event)
    offer: str | None = None
    answer: str | None = None
    relay_port: int | None = None
    stopped: bool = False
    logs: dict[str, dict[str, list[Any]]] = field(
        default_factory=lambda: {r: {"frames": [], "stats": [], "events": []} for r in ROLES}
    )
    done: dict[str, threading.Event] = field(
        default_factory=lambda: {r: threading.Event() for r in ROLES}
    )
    errors: list[str] = field(default_factory=list)

    def relay_at(self, port: int) -> None:
        """The relay is listening on ``port``: the pages may now learn it."""
        with self.lock:
            self.relay_port = port

    def stop(self) -> None:
        with self.lock:
            self.stopped = True

    def post(self, path: str, body: Any) -> dict[str, Any]:
        if path == "offer":
            with self.lock:
                self.offer = str(body["sdp"])
            return {}
        if path == "answer":
            answer = str(body["sdp"])
            with self.lock:
                offer = self.offer
            if offer is None:
                raise SignalError("an answer before the offer")
            peers = (loopback_port(offer), loopback_port(answer))
            with self.lock:
                self.answer, self.peers = answer, peers
            self.peers_known.set()
            return {}
        kind, _, role = path.partition("/")
        if kind in ("log", "done") and role in ROLES:
            if kind == "done":
                self.done[role].set()
                return {}
            with self.lock:
                for key in ("frames", "stats", "events"):
                    items = body.get(key) or []
                    if not isinstance(items, list):
                        raise SignalError(f"{key} is not a list")
                    self.logs[role][key].extend(items)
                for e in body.get("events") or []:
                    if isinstance(e, dict) and e.get("what") == "error":
                        self.errors.append(f"{role} page: {e.get('detail')}")
            return {}
        raise KeyError(path)

    def get(self, path: str) -> Any | None:
        with self.lock:
            if path == "offer":
                return None if self.offer is None else {"sdp": rewrite(self.offer, None)}
            if path == "answer":
                if self.answer is None or self.relay_port is None:
                    return None
                return {"sdp": rewrite(self.answer, self.relay_port)}
            if path == "candidate":
                if self.offer is None or self.relay_port is None:
                    return None
                return {"candidate": candidate_line(self.relay_port),
                        "sdpMid": first_mid(self.offer), "sdpMLineIndex": 0}  # fmt: skip
            if path == "stop":
                return {} if self.stopped else None
        raise KeyError(path)


def _handler(signal: Signal) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        def log_message(self, *args: Any) -> None:  # quiet: the harness reports what matters
            pass

        def _send(self, status: int, body: bytes = b"", ctype: str = "application/json") -> None:
            self.send_response(status)
            self.send_header("content-type", ctype)
            self.send_header("content-length", str(len(body)))
            self.send_header("cache-control", "no-store")
            self.end_headers()
            self.wfile.write(body)

        def _route(self) -> tuple[str, bool] | None:
            url = urlparse(self.path)
            if not url.path.startswith("/api/"):
                return url.path, False
            if parse_qs(url.query).get("token", [""])[0] != signal.token:
                self._send(HTTPStatus.FORBIDDEN)
                return None
            return url.path[len("/api/"):], True

        def do_GET(self) -> None:  # noqa: N802 (http.server's name)
            route = self._route()
            if route is None:
                return
            path, api = route
            if not api:
                name = path.lstrip("/") or "sender.html"
                f = STATIC / name
                if "/" in name or not f.is_file():
                    self._send(HTTPStatus.NOT_FOUND)
                    return
                ctype = "text/html" if name.endswith(".html") else "text/javascript"
                self._send(HTTPStatus.OK, f.read_bytes(), ctype + "; charset=utf-8")
                return
            try:
                value = signal.get(path)
            except KeyError:
                self._send(HTTPStatus.NOT_FOUND)
                return
            if value is None:
                self._send(HTTPStatus.NO_CONTENT)
            else:
                self._send(HTTPStatus.OK, json.dumps(value).encode())

        def do_POST(self) -> None:  # noqa: N802
            route = self._route()
            if route is None:
                return
            path, api = route
            length = int(self.headers.get("content-length") or 0)
            if not api or length > MAX_BODY:
                self._send(HTTPStatus.NOT_FOUND if not api else HTTPStatus.REQUEST_ENTITY_TOO_LARGE)
                return
            try:
                body = json.loads(self.rfile.read(length) or b"{}")
                out = signal.post(path, body)
            except KeyError:
                self._send(HTTPStatus.NOT_FOUND)
                return
            except (ValueError, TypeError, SignalError) as e:
                with signal.lock:
                    signal.errors.append(f"{path}: {e}")
                self._send(HTTPStatus.BAD_REQUEST, json.dumps({"error": str(e)}).encode())
                return
            self._send(HTTPStatus.OK, json.dumps(out).encode())

    return Handler


def serve(signal: Signal) -> ThreadingHTTPServer:
    """The server on a free loopback port, serving in a daemon thread."""
    server = ThreadingHTTPServer(("127.0.0.1", 0), _handler(signal))
    server.daemon_threads = True
    threading.Thread(target=server.serve_forever, name="sluice-browser-http", daemon=True).start()
    return server
