"""The settings in which compared schemes differ and the user did not choose: frame
dropping, the pacing factor, the encoder's preset and references, the bottleneck's
behaviour, ... (not the components that make a scheme what it is: its pacer, congestion
controller and encoder controller). A comparison that does not say so can credit a scheme with what
one of these settings did (``webrtc`` runs libwebrtc's frame dropping, the research schemes
do not: turning it on for ``ace`` cut its all-slot P95 on a 10x drop from 1.4 s to 0.2 s).
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
    ("feedback interval ms", "scheme.feedback_interval_ms"),
    ("bottleneck behaviour", "bottleneck.kind"),
    ("encoder", "encoder.kind"),
    ("x264 preset", "encoder.preset"),
    ("reference frames", "encoder.refs"),
)


def _get(cfg: dict[str, Any], path: str) -> Any:
    node: Any = cfg
    keys = path.split(".")
    if keys[0] != "scheme" and keys[0] not in ("encoder", "duration_s", "fps"):
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
        return v.get("kind") or json.dumps(v, separators=(",", ":"))
    return str(v)


def differences(
    configs: Sequence[tuple[str, dict[str, Any]]], chosen: Iterable[str] = ()
) -> list[tuple[str, list[str]]]:
    """For each watched setting on which ``configs`` (name, resolved run config) differ and
    that is not among the ``chosen`` config paths: its label and each config's value."""
    picked = {short_path(p) for p in chosen}
    out = []
    for label, path in WATCHED:
        if short_path(path) in picked or path.split(".")[0] in picked:
            continue
        vals = [_show(_get(cfg, path)) for _, cfg in configs]
        if len(set(vals)) > 1:
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
    return (
        "note: the schemes also differ in settings you did not choose: "
        + "; ".join(label for label, _ in diffs)
        + " (compare.md lists them; --frame-drop on|off sets frame dropping alike)"
    )
