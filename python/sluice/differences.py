"""The settings in which compared schemes differ and the user did not choose: frame
dropping, the pacing factor, the feedback interval, the encoder's preset and references, the
bottleneck's behaviour, and every parameter of a component the schemes share (a congestion
controller, pacer or encoder controller of the same kind: GCC's trendline window, say), but
not the choice of component that makes a scheme what it is. A comparison that does not say so
can credit a scheme with what one of these settings did (``webrtc`` runs libwebrtc's frame
dropping, the research schemes do not: turning it on for ``ace`` cut its all-slot P95 on a
10x drop from 1.4 s to 0.2 s; ``ace-n`` is ACE-N on a GCC with a 200 ms trendline window,
``webrtc``'s GCC has 20 packets, and that window moves ACE-N's tail as much as its pacer).
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Sequence
from typing import Any

from .config import short_path

#: (what, config path): the settings a comparison names when they differ.
WATCHED: tuple[tuple[str, str], ...] = (
    ("frame dropper (libwebrtc)", "frame_drop.frame_dropper"),
    ("congestion-window drops (libwebrtc)", "frame_drop.cwnd_pushback"),
    ("Salsify stage", "salsify"),
    ("GCC pacing factor", "cc.pacing_factor"),
    ("Copa pacing gain", "cc.pacing_gain"),
    ("feedback interval ms", "feedback_interval_ms"),
    ("bottleneck behaviour", "bottleneck.kind"),
    ("encoder", "encoder.kind"),
    ("x264 preset", "encoder.preset"),
    ("reference frames", "encoder.refs"),
)


#: The run config's own fields among the paths above (the others are the scheme's).
TOP_LEVEL = ("encoder", "duration_s", "fps", "feedback_interval_ms")
#: Components whose parameters are named where the compared schemes have one of one kind.
SHARED_COMPONENTS = ("cc", "pacer", "encoder_controller")


def _get(cfg: dict[str, Any], path: str) -> Any:
    node: Any = cfg
    keys = path.split(".")
    if keys[0] != "scheme" and keys[0] not in TOP_LEVEL:
        keys = ["scheme", *keys]
    for k in keys:
        if not isinstance(node, dict) or k not in node:
            return None
        node = node[k]
    return node


def _show(v: Any) -> str:
    if v is None:
        return "-"
    if isinstance(v, bool):
        return "on" if v else "off"
    if isinstance(v, dict):
        if "kind" in v:  # a tagged choice: its kind and its fields (a trendline of 20 packets)
            rest = " ".join(f"{k} {_show(x)}" for k, x in v.items() if k != "kind")
            return f"{v['kind']} {rest}".strip()
        return json.dumps(v, separators=(",", ":"))
    if isinstance(v, float) and v.is_integer() and abs(v) < 1e18:
        return str(int(v))  # 2500000, not 2.5e+06 (and 1234567 apart from 1234568)
    return str(v)


def _kind(node: Any) -> str | None:
    """A component's kind (None for a missing or malformed one)."""
    return str(node.get("kind")) if isinstance(node, dict) else None


def _leaves(node: Any, prefix: str) -> dict[str, Any]:
    """The fields below ``node`` by dotted path; a tagged object (with ``kind``) or a list is
    one field."""
    if not isinstance(node, dict) or ("kind" in node and prefix.count(".") > 0):
        return {prefix: node}
    out: dict[str, Any] = {}
    for k, v in node.items():
        if k != "kind" or prefix.count(".") > 0:
            out.update(_leaves(v, f"{prefix}.{k}"))
    return out


def _shared_parameters(configs: Sequence[tuple[str, dict[str, Any]]]) -> list[str]:
    """The paths of the parameters of a component that two or more configs have of one
    kind, in which those differ (``cc.trendline_window`` of two GCCs, beside a Copa)."""
    paths: list[str] = []
    for comp in SHARED_COMPONENTS:
        nodes = [_get(cfg, comp) for _, cfg in configs]
        for kind in dict.fromkeys(_kind(n) for n in nodes):
            same = [n for n in nodes if kind is not None and _kind(n) == kind]
            if len(same) < 2:
                continue
            leaves = [_leaves(n, comp) for n in same]
            for path in dict.fromkeys(p for lv in leaves for p in lv):
                if path not in paths and len(
                    {json.dumps(lv.get(path), sort_keys=True) for lv in leaves}
                ) > 1:
                    paths.append(path)
    return paths


def _row(configs: Sequence[tuple[str, dict[str, Any]]], path: str) -> list[str] | None:
    """Each config's value of ``path``, or None when they do not differ. A parameter of a
    component (``cc.trendline_window``) is compared among the configs whose component is of
    one kind; the others, whose component is another, show ``-``: the component is the
    scheme's choice, its parameters the settings."""
    vals = [_show(_get(cfg, path)) for _, cfg in configs]
    comp = short_path(path).split(".")[0]
    if comp not in SHARED_COMPONENTS:
        return vals if len(set(vals)) > 1 else None
    kinds = [_kind(_get(cfg, comp)) for _, cfg in configs]
    differ = any(
        len({v for v, k in zip(vals, kinds) if k == kind}) > 1
        for kind in set(kinds) if kind is not None
    )  # fmt: skip
    if not differ:
        return None
    return [v if kinds.count(k) > 1 else "-" for v, k in zip(vals, kinds)]


def differences(
    configs: Sequence[tuple[str, dict[str, Any]]], chosen: Iterable[str] = ()
) -> list[tuple[str, list[str]]]:
    """For each watched setting on which ``configs`` (name, resolved run config) differ and
    that is not among the ``chosen`` config paths: its label and each config's value."""
    picked = {short_path(p) for p in chosen}
    watched = {short_path(path) for _, path in WATCHED}
    shared = [(path, path) for path in _shared_parameters(configs)
              if short_path(path) not in watched]  # fmt: skip
    out = []
    for label, path in (*WATCHED, *shared):
        keys = short_path(path).split(".")
        if any(".".join(keys[:n]) in picked for n in range(1, len(keys) + 1)):
            continue
        vals = _row(configs, path)
        if vals is not None:
            out.append((label, vals))
    return out


def markdown(configs: Sequence[tuple[str, dict[str, Any]]], chosen: Iterable[str] = ()) -> str:
    """The differences as a Markdown table (empty when there are none)."""
    from .report import markdown as table

    diffs = differences(configs, chosen)
    if not diffs:
        return ""
    head = ["setting", *(f"`{n}`" for n, _ in configs)]
    return table(head, [[label, *vals] for label, vals in diffs])


def note(configs: Sequence[tuple[str, dict[str, Any]]], chosen: Iterable[str] = ()) -> str:
    """One line for the terminal naming the settings that differ (empty when none)."""
    diffs = differences(configs, chosen)
    if not diffs:
        return ""
    labels = [label for label, _ in diffs]
    shown = "; ".join(labels[:6]) + (f"; {len(labels) - 6} more" if len(labels) > 6 else "")
    return (
        "note: the schemes also differ in settings you did not choose: "
        + shown
        + " (compare.md lists them; --frame-drop on|off sets frame dropping alike)"
    )
