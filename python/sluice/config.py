"""Run configs and config paths.

A run is defined by the core's ``RunConfig`` (``crates/sluice-core/src/sim.rs``), a JSON
object: ``sluice._core.default_config_json()`` has every field. The front end changes it with
*overrides*, ``(PATH, VALUE)`` pairs whose paths are dotted and full:

- run fields: ``duration_s``, ``seed``, ``fps``, ``drain_s``, ``feedback_interval_ms``,
  ``sample_interval_ms``, ``max_payload_bytes``, ...;
- the links: ``downlink.queue_bytes``, ``downlink.delay_ms``, ``uplink.loss``, ...;
- the encoder: ``encoder.frame_sigma`` (model encoder), ``encoder.preset`` (x264), ...;
- the scheme's components, relative to the scheme: ``pacer.threshold_packets``,
  ``cc.pacing_factor``, ``cc.trendline_window.window_ms``,
  ``encoder_controller.vbv_buffer_ms`` (``scheme.pacer.threshold_packets`` is the same path).

A path must name a field of the *resolved* config: the scheme expanded from the registry
(:func:`resolve`), the encoder's config with its defaults. A key is never looked up "wherever
it appears": ``alpha`` is not a path, ``pacer.alpha`` is. Values are JSON
(:func:`parse_value`: numbers, ``true``/``false``/``null``, strings, arrays, objects; a bare
word is a string) and must have the type of the value they replace (number, boolean,
string, array or object; ``null`` and fields that are ``null`` take anything the core
accepts).

An object value sets its fields one by one (``downlink={"delay_ms": 30}`` changes only the
delay), except that an object with a ``kind`` replaces a tagged component wholesale: the
object as given, the kind's defaults for what it leaves out (``pacer={"kind": "ace-n"}``,
after which ``pacer.threshold_packets`` exists). Setting a ``kind`` field alone does the
same (``pacer.kind=ace-n``). After every override the config is re-resolved by the core, which
fills in defaults and rejects what it cannot parse.

The scheme registry is read from the core once (:func:`registry`).
"""

from __future__ import annotations

import copy
import functools
import json
import math
import os
import re
import sys
from collections.abc import Iterable, Sequence
from typing import Any

from .errors import DuplicateKey, SluiceError, core, non_finite_path, regular_file, strict_json

#: The components of a scheme; a path starting with one of them is relative to ``scheme``.
SCHEME_COMPONENTS = ("pacer", "cc", "encoder_controller", "bottleneck", "frame_drop", "salsify")
SCHEME = "scheme"

Override = tuple[str, Any]

_MISSING = object()

#: Fields the core writes only when they are not their default (so that configs without them
#: read and print as before): a path to one of them exists with this default.
OPTIONAL_FIELDS: dict[str, Any] = {
    "competing": [],
    "downlink.queue_discipline": "droptail",
    "uplink.queue_discipline": "droptail",
    "downlink.ecn": False,
    "uplink.ecn": False,
    # The path faults (link/faults.rs), all off.
    "faults": {"duplicate": 0.0, "reorder": 0.0, "reorder_delay_ms": 5.0,
               "feedback_blackout_s": None},  # fmt: skip
    # A second bottleneck after the downlink (RFC 8867 §6.3), none by default; setting one
    # of its fields starts from these.
    "second_bottleneck": {"rate_mbps": 1.0, "queue_bytes": None, "delay_ms": 0.0},
}


def _filled(cfg: dict[str, Any], keys: Sequence[str], value: Any) -> dict[str, Any] | None:
    """A copy of ``cfg`` with ``value`` at ``keys`` where the objects down to it exist and the
    last one lacks that key; ``None`` otherwise."""
    node: Any = cfg
    for k in keys[:-1]:
        if not isinstance(node, dict) or k not in node:
            return None
        node = node[k]
    if not isinstance(node, dict) or keys[-1] in node:
        return None
    out = copy.deepcopy(cfg)
    node = out
    for k in keys[:-1]:
        node = node[k]
    node[keys[-1]] = copy.deepcopy(value)
    return out


def _with_optional(cfg: dict[str, Any], path: str) -> dict[str, Any]:
    """``cfg``, or a copy with the optional field at ``path`` (or the optional object that
    holds it, ``faults`` for ``faults.duplicate``) filled in with its default; or with a
    component's optional object (Copa's ``bottleneck_feedback``: absent from a config
    unless set) filled in with the defaults the core gives it."""
    keys = split_path(path)
    n = next((n for n in range(1, len(keys) + 1) if ".".join(keys[:n]) in OPTIONAL_FIELDS), 0)
    if not n:
        return _with_optional_object(cfg, keys)
    filled = _filled(cfg, keys[:n], OPTIONAL_FIELDS[".".join(keys[:n])])
    return cfg if filled is None else filled


def _with_skipped_field(
    cfg: dict[str, Any], keys: Sequence[str], value: Any
) -> tuple[dict[str, Any], list[str]]:
    """``cfg``, or a copy with the field ``keys`` names set to ``value`` where its object lacks
    it because the core leaves a field at its default out of the configs it writes
    (``cc.probe_rules``, ``pacer.probe_takes_over``, ``cc.loss_based_v2.m156``): the core is
    asked with ``value`` in place. A field it does not know leaves ``cfg`` as it is, for the
    usual error, with the fields the core names (those left out included) second."""
    probe = _filled(cfg, keys, value)
    if probe is None:
        return cfg, []
    try:
        resolve(probe)
    except SluiceError as e:
        msg = str(e)
        if "unknown field" in msg:
            expected = msg.split("expected one of", 1)[1] if "expected one of" in msg else ""
            return cfg, re.findall(r"`([^`]+)`", expected)
    return probe, []


def _with_optional_object(cfg: dict[str, Any], keys: Sequence[str]) -> dict[str, Any]:
    """``cfg``, or a copy in which the first key of ``keys`` missing from a component (an
    object with a ``kind``) is that component's optional object, with its defaults: the
    core resolves the component with it as ``{}`` (a field it does not have, or one that is
    not an object, leaves ``cfg`` as it is)."""
    node: Any = cfg
    for i, k in enumerate(keys):
        if not isinstance(node, dict):
            return cfg
        if k not in node:
            if i == 0 or not isinstance(node.get("kind"), str):
                return cfg
            probe = copy.deepcopy(cfg)
            target = probe
            for key in keys[:i]:
                target = target[key]
            target[k] = {}
            try:
                resolved = resolve(probe)
            except SluiceError:
                return cfg
            for key in keys[:i + 1]:
                resolved = resolved.get(key) if isinstance(resolved, dict) else None
            if not isinstance(resolved, dict):
                return cfg
            target[k] = resolved
            return probe
        node = node[k]
    return cfg


# --- the registry ---------------------------------------------------------------------------


@functools.lru_cache(maxsize=1)
def _registry() -> tuple[dict[str, Any], ...]:
    return tuple(json.loads(core().schemes_json()))


def registry() -> list[dict[str, Any]]:
    """The core's scheme registry (``sluice schemes --json``): name, description, color,
    encoder (``"x264"`` if the scheme is defined on it, else null) and config (its
    composition). Read from the core once; every call returns a fresh copy."""
    return copy.deepcopy(list(_registry()))


def scheme_names() -> list[str]:
    return [s["name"] for s in _registry()]


def scheme_info(name: str) -> dict[str, Any] | None:
    """A registry entry (a copy), or None if ``name`` is not registered."""
    for s in _registry():
        if s["name"] == name:
            return copy.deepcopy(s)
    return None


def scheme_config(name: str) -> dict[str, Any]:
    """A registered scheme's composition (SchemeConfig dict); :class:`SluiceError` if the
    scheme is unknown."""
    info = scheme_info(name)
    if info is None:
        raise SluiceError(f"unknown scheme '{name}' (known: {', '.join(scheme_names())})")
    return info["config"]


def scheme_colors() -> dict[str, str]:
    """Scheme name -> plot colour, from the registry ({} if the extension is unavailable:
    plots from saved results must not need the simulator)."""
    try:
        return {s["name"]: s["color"] for s in _registry()}
    except SluiceError:
        return {}


# --- configs --------------------------------------------------------------------------------


@functools.lru_cache(maxsize=1)
def _default_config() -> str:
    return str(core().default_config_json())


def default_config() -> dict[str, Any]:
    """The core's default ``RunConfig`` as a dict (a fresh copy)."""
    return json.loads(_default_config())


def _strip_location(msg: str) -> str:
    # serde_json reports positions in the JSON we generated, not in anything the user wrote.
    return re.sub(r" at line \d+ column \d+$", "", msg.strip())


def resolve(cfg: dict[str, Any], validate: bool = False) -> dict[str, Any]:
    """``cfg`` as the core reads it: every field present, the scheme's components expanded
    from the registry when ``scheme`` is null, every tagged component with its defaults.
    ``validate``: also check ranges (duration, fps, loss, queue limits, ...). Raises
    :class:`SluiceError` with the core's message."""
    bad = non_finite_path(cfg)
    if bad:
        raise SluiceError(f"{short_path(bad) if '[' not in bad else bad} must be a finite "
                          f"number within 64 bits, got {_show_nonfinite(cfg, bad)}")  # fmt: skip
    try:
        out = core().resolve_config_json(json.dumps(cfg, allow_nan=False), validate)
    except ValueError as e:
        raise SluiceError(_strip_location(str(e))) from None
    return json.loads(out)


def _show_nonfinite(cfg: Any, path: str) -> str:
    node = cfg
    for part in re.findall(r"[^.\[\]]+|\[\d+\]", path):
        node = node[int(part[1:-1])] if part.startswith("[") else node[part]
    return str(node)


# --- paths ----------------------------------------------------------------------------------


def split_path(path: str) -> list[str]:
    """The keys of ``path`` from the config's root (``pacer.x`` -> ``scheme, pacer, x``)."""
    if not isinstance(path, str) or not path.strip():
        raise SluiceError(f"empty config path {path!r}")
    keys = path.strip().split(".")
    if any(not k or k != k.strip() for k in keys):
        raise SluiceError(f"malformed config path {path!r}")
    if keys[0] in SCHEME_COMPONENTS:
        keys = [SCHEME, *keys]
    return keys


def short_path(path: str | Sequence[str]) -> str:
    """The canonical spelling of a path: scheme components without ``scheme.``
    (``scheme.pacer.x`` -> ``pacer.x``)."""
    keys = split_path(path) if isinstance(path, str) else list(path)
    if len(keys) > 1 and keys[0] == SCHEME and keys[1] in SCHEME_COMPONENTS:
        keys = keys[1:]
    return ".".join(keys)


def _cut(text: str, most: int = 100) -> str:
    return text if len(text) <= most else text[:most] + "..."


def _describe(node: dict[str, Any]) -> str:
    return ", ".join(sorted(node)) if node else "none"


def _locate(
    cfg: dict[str, Any], keys: Sequence[str], path: str, also_valid: Sequence[str] = ()
) -> dict[str, Any]:
    """The object holding ``keys[-1]``; :class:`SluiceError` naming the path and the valid
    keys where the walk stopped (a path or key longer than 100 characters cut short; at the
    last key, ``also_valid`` are valid too: fields the core leaves out at their defaults)."""
    path = _cut(path)
    node: Any = cfg
    for i, k in enumerate(keys):
        where = short_path(keys[:i]) if i else ""
        if not isinstance(node, dict):
            shown = "null" if node is None else f"{_type(node)} {_show(node)}"
            hint = f": set it whole, e.g. --set '{where}={{}}'" if node is None else ""
            raise SluiceError(f"unknown config path '{path}': {where} is {shown}, not an "
                              f"object{hint}")  # fmt: skip
        if k not in node:
            kind = node.get("kind")
            what = f"'{where}'" + (f" ({kind})" if isinstance(kind, str) else "")
            at = f"{what} has" if where else "the run config has"
            valid = {**node, **dict.fromkeys(also_valid)} if i == len(keys) - 1 else node
            raise SluiceError(
                f"unknown config path '{path}': {at} no field '{_cut(k)}' (valid: "
                f"{_describe(valid)})"
            )
        if i < len(keys) - 1:
            node = node[k]
    return node


def get_path(cfg: dict[str, Any], path: str, default: Any = _MISSING) -> Any:
    """The value at ``path`` in a resolved config (e.g. a result header's ``config``);
    ``default`` if given and the path does not exist, else :class:`SluiceError`."""
    keys = split_path(path)
    cfg = _with_optional(cfg, path)
    try:
        return _locate(cfg, keys, path)[keys[-1]]
    except SluiceError:
        if default is _MISSING:
            raise
        return default


def has_path(cfg: dict[str, Any], path: str) -> bool:
    """Whether ``path`` names a field of ``cfg``."""
    absent = object()
    return get_path(cfg, path, absent) is not absent


def _type(v: Any) -> str:
    if v is None:
        return "null"
    if isinstance(v, bool):
        return "a boolean"
    if isinstance(v, (int, float)):
        return "a number"
    if isinstance(v, str):
        return "a string"
    if isinstance(v, (list, tuple)):
        return "an array"
    if isinstance(v, dict):
        return "an object"
    return type(v).__name__


def _show(v: Any) -> str:
    try:
        text = json.dumps(v)
    except (TypeError, ValueError):
        text = repr(v)
    return text if len(text) <= 60 else text[:57] + "..."


def _check_type(old: Any, value: Any, path: str) -> None:
    if old is None or value is None:
        return
    if _type(old) != _type(value):
        raise SluiceError(
            f"config path '{path}' takes {_type(old)} (now {_show(old)}), "
            f"got {_type(value)} {_show(value)}"
        )


#: Paths the front end sets from what it is given, and what to give instead: the trace a link
#: reads is loaded from a file or generated, and only its name is in the config; the scheme's
#: name labels the components under ``scheme`` (a changed name ran one scheme under another's).
FRONT_END_PATHS = {
    "downlink.trace": "names the trace the run reads: give the trace with --trace (a plan "
                      "trace's path = ...)",
    "uplink.trace": "names the trace the run reads: give the trace with --uplink-trace (a plan "
                    "trace's uplink = ...)",
    "scheme_name": "names the scheme the run's components are: give the scheme with --scheme "
                   "or --scheme-file (a plan's [[scheme]])",
}


def set_path(cfg: dict[str, Any], path: str, value: Any) -> dict[str, Any]:
    """A copy of the resolved config ``cfg`` with ``path`` set to ``value`` (see the module
    doc for objects and ``kind``), resolved again."""
    keys = split_path(path)
    instead = FRONT_END_PATHS.get(".".join(keys))
    if instead:
        now = get_path(cfg, path, _MISSING)
        if now == value:  # as it is (a whole object pasted back)
            return cfg
        here = f" ({now} here)" if isinstance(now, str) else ""
        raise SluiceError(f"{'.'.join(keys)} is not set by a config path: it {instead}{here}")
    cfg, left_out = _with_skipped_field(_with_optional(cfg, path), keys, value)
    parent = _locate(cfg, keys, path, left_out)
    last, old = keys[-1], parent[keys[-1]]
    if isinstance(value, dict) and isinstance(old, dict) and "kind" not in value:
        for k, v in value.items():  # field by field
            cfg = set_path(cfg, f"{path}.{k}", v)
        return cfg
    if last == "kind" and len(keys) > 1 and value != old:
        return set_path(cfg, ".".join(keys[:-1]), {"kind": value})
    _check_type(old, value, path)
    cfg = copy.deepcopy(cfg)
    _locate(cfg, keys, path)[last] = copy.deepcopy(value)
    return _resolve_after(cfg, path, value)


_INT_TYPES = r"(?:i64|u64|i32|u32|u16|u8|usize)"


def _plain(msg: str) -> str:
    """serde's type errors in the words of the rest of the CLI."""
    msg = re.sub(rf"invalid type: floating point `([^`]*)`, expected {_INT_TYPES}",
                 r"takes a whole number, got \1", msg)  # fmt: skip
    msg = re.sub(rf'invalid type: string "([0-9.][^"]*)", expected (?:{_INT_TYPES}|f64|f32)',
                 r'takes a number, got the string "\1" (no units: 100000, not 100kB)',
                 msg)  # fmt: skip
    msg = re.sub(rf'invalid type: string "([^"]*)", expected (?:{_INT_TYPES}|f64|f32)',
                 r'takes a number, got the string "\1"', msg)  # fmt: skip
    msg = re.sub(r"invalid value: integer `(-[0-9]+)`, expected u(?:64|32|16|8|size)",
                 r"takes a whole number of at least 0, got \1", msg)  # fmt: skip
    msg = re.sub(r"invalid type: (null|[a-z ]+(?: `[^`]*`)?|string \"[^\"]*\"), expected "
                 r"internally tagged enum \w+",
                 r"takes an object with a kind (`sluice config --paths` lists them), got \1",
                 msg)  # fmt: skip
    return msg


def _as_int(v: Any, x: float) -> tuple[Any, bool]:
    """``v`` with every float equal to the whole number ``x`` (at any depth) an int."""
    if isinstance(v, float) and v == x:
        return int(v), True
    if isinstance(v, dict):
        pairs = [(k, *_as_int(w, x)) for k, w in v.items()]
        return {k: w for k, w, _ in pairs}, any(c for _, _, c in pairs)
    if isinstance(v, list):
        items = [_as_int(w, x) for w in v]
        return [w for w, _ in items], any(c for _, c in items)
    return v, False


def resolve_whole(
    cfg: dict[str, Any], validate: bool = False, given: tuple[str, Any] = ("", None)
) -> tuple[dict[str, Any], dict[str, Any]]:
    """:func:`resolve`, with whole numbers written as floats (``1e5``, ``1260.0``: TOML and
    JSON write them so) taken as integers where the core wants an integer: ``cfg`` so
    changed, and what it resolves to. A type error left is said in the CLI's words
    (:class:`SluiceError`, without the ``invalid run config:`` prefix), with the paths in
    ``given`` (the path and value the user gave) that hold the offending number."""
    for _ in range(64):  # one whole number per round
        try:
            return cfg, resolve(cfg, validate=validate)
        except SluiceError as e:
            msg = str(e).removeprefix("invalid run config: ")
            m = re.search(rf"floating point `([^`]*)`, expected {_INT_TYPES}", msg)
            x = float(m.group(1)) if m else math.nan
            changed = False
            if x.is_integer():
                cfg, changed = _as_int(cfg, x)
            if not changed:
                text = re.search(r'invalid type: string "([^"]*)"', msg)
                bad: Any = x if m else text[1] if text else None
                where = _paths_of(given[1], bad, given[0]) if bad is not None else []
                said = not isinstance(given[1], (dict, list))  # the path given is the one
                at = f" (at {', '.join(where[:3])})" if where and not said else ""
                raise SluiceError(_plain(msg) + at) from None
    return cfg, resolve(cfg, validate=validate)


def _paths_of(v: Any, x: float | str, prefix: str = "") -> list[str]:
    """The config paths (short form) whose value is ``x`` (a float, or a string)."""
    if isinstance(v, (float, str)) and type(v) is type(x) and v == x:
        return [short_path(prefix)]
    if isinstance(v, dict):  # a component's `kind` names it; a number it is not
        return [p for k, w in v.items() if k != "kind"
                for p in _paths_of(w, x, f"{prefix}.{k}" if prefix else k)]  # fmt: skip
    return []


def _resolve_after(cfg: dict[str, Any], path: str, value: Any) -> dict[str, Any]:
    try:
        return resolve_whole(cfg, given=(path, value))[1]
    except SluiceError as e:
        raise SluiceError(f"{path}={_show(value)}: {e}") from None


#: How deep an override's value may nest (arrays and objects): the deepest field of a run
#: config is a few levels down; a value hundreds deep overflowed Python's recursion limit in
#: the copies made while it was set.
MAX_VALUE_DEPTH = 32


def value_depth(value: Any) -> int:
    """How deep ``value`` nests (a scalar 0, ``[1]`` 1, ``{"a": [1]}`` 2), counted without
    recursion."""
    deepest, todo = 0, [(value, 0)]
    while todo:
        v, d = todo.pop()
        deepest = max(deepest, d)
        if isinstance(v, dict):
            todo.extend((x, d + 1) for x in v.values())
        elif isinstance(v, (list, tuple)):
            todo.extend((x, d + 1) for x in v)
    return deepest


def apply_overrides(cfg: dict[str, Any], overrides: Iterable[Override]) -> dict[str, Any]:
    """``cfg`` resolved, then every ``(path, value)`` applied in order (a later one wins)."""
    out = resolve(cfg)
    for path, value in overrides:
        if value_depth(value) > MAX_VALUE_DEPTH:
            raise SluiceError(f"the value of {path} is nested more than {MAX_VALUE_DEPTH} deep "
                              f"(arrays and objects): no config field is")  # fmt: skip
        out = set_path(out, path, value)
    return out


# --- values and assignments -----------------------------------------------------------------


def parse_value(text: str) -> Any:
    """A value as written after ``=``: JSON if it parses (``12.5``, ``true``, ``null``,
    ``"x"``, ``[1, 1, 1]``, ``{"kind": "ace-n"}``), else the text itself as a string
    (``modeled``)."""
    try:
        return strict_json(text)
    except DuplicateKey as e:
        raise SluiceError(f"{text.strip()!r}: {e}") from None
    except RecursionError:
        raise SluiceError(f"JSON value nested too deeply: {text.strip()[:40]}...") from None
    except json.JSONDecodeError:
        stripped = text.strip()
        if stripped[:1] in ("{", "["):
            raise SluiceError(f"malformed JSON value {text!r}") from None
        return stripped


def parse_assignment(text: str) -> Override:
    """``PATH=VALUE`` -> ``(PATH, value)`` (the path is checked against a config later)."""
    path, eq, value = text.partition("=")
    if not eq or not path.strip():
        raise SluiceError(f"expected PATH=VALUE, got {text!r}")
    split_path(path)
    parsed = parse_value(value)
    if non_finite_path(parsed):
        raise SluiceError(f"{path.strip()}: {value.strip()} is not a finite number within 64 bits")
    return path.strip(), parsed


def flatten(cfg: Any, prefix: str = "") -> dict[str, Any]:
    """Leaves of a config by path (arrays are leaves), scheme components in short form."""
    if isinstance(cfg, dict) and (cfg or not prefix):
        out: dict[str, Any] = {}
        for k, v in cfg.items():
            out.update(flatten(v, f"{prefix}.{k}" if prefix else str(k)))
        return out
    return {short_path(prefix): cfg}


#: Fields that name a run rather than set it (a sweep variant has its own ``scheme_name``).
LABELS = ("scheme_name",)


def diff(a: dict[str, Any], b: dict[str, Any], ignore: Sequence[str] = LABELS) -> list[str]:
    """Paths (short form) whose values differ between two configs, sorted; the ``ignore``
    paths (by default the run's name, :data:`LABELS`) are left out."""
    fa, fb = flatten(a), flatten(b)
    keys = (fa.keys() | fb.keys()) - set(ignore)
    return sorted(k for k in keys if fa.get(k, _MISSING) != fb.get(k, _MISSING))


def read_scheme_file(path: str | os.PathLike[str]) -> tuple[dict[str, Any], dict[str, Any]]:
    """A scheme composition from a JSON file (or an entry copied from ``sluice schemes
    --json``), checked as a whole scheme: (the composition as written, resolved with every
    default). Every error names the file (and the field's config path)."""
    try:
        text = regular_file(path, "scheme file", 1 << 24).read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as e:
        raise SluiceError(f"cannot read scheme file {path}: {e}") from None
    try:
        obj = strict_json(text)
    except DuplicateKey as e:
        raise SluiceError(f"{path}: {e} (a scheme file gives each key once)") from None
    except json.JSONDecodeError as e:
        raise SluiceError(f"{path}:{e.lineno}: malformed JSON ({e.msg})") from None
    except RecursionError:
        raise SluiceError(f"{path}: JSON nested too deeply") from None
    if not isinstance(obj, dict):
        raise SluiceError(f"{path}: expected a JSON object (a scheme composition)")
    if isinstance(obj.get("config"), dict) and "pacer" not in obj:
        if obj.get("encoder") == "x264":  # what a composition file cannot pin
            print(f"note: {path}: the copied scheme is defined on x264; a composition runs "
                  f"on x264 with a clip, on the model encoder without",
                  file=sys.stderr)  # fmt: skip
        obj = obj["config"]  # an entry copied from `sluice schemes --json`
    bad = non_finite_path(obj)
    if bad:
        raise SluiceError(f"{path}: {bad} must be a finite number within 64 bits, got "
                          f"{_show_nonfinite(obj, bad)}")  # fmt: skip
    cfg = default_config()
    cfg["scheme"] = obj
    try:
        resolved = resolve_whole(cfg, validate=True, given=("scheme", obj))[0]["scheme"]
    except SluiceError as e:
        raise SluiceError(f"{path}: {e}") from None
    return obj, resolved
