"""Regression check for refactors: runs every registered scheme on fixed inputs and compares
the raw results of two builds record by record.

    python bench/regression.py run OUT_DIR          # with the current build
    python bench/regression.py compare OLD NEW      # after a change

``run`` writes one run directory per (scheme, encoder, trace) and ``checksums.json`` (md5 of
each ``run.jsonl`` and of its frame and sample records). ``compare`` says, per run, whether
the files are byte-identical, and if not, whether every frame and sample record still has the
same value for every key the old record had (keys added by the new build are listed, keys
that vanished are a difference), so a schema change can be told apart from a change of
behaviour. Needs no ../shared (uses the shipped traces and clip).
"""

from __future__ import annotations

import argparse
import hashlib
import json
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
TRACES = {
    "markov": ("data/traces/markov-24-6.mahi", {"queue_bytes": 100_000}),
    "step": ("data/traces/step-30-3.mahi", {}),
}
CLIP = "data/videos/bbb-intro_1280x720_24fps_10s.mp4"
DURATION_S = 20.0


def _runs(schemes: list[dict]) -> list[tuple[str, dict]]:
    out = []
    for s in schemes:
        for enc in ("model", "x264"):
            for tname, (path, net) in TRACES.items():
                if enc == "x264" and tname != "markov":
                    continue  # one trace is enough for the encoder path
                overrides = [("duration_s", DURATION_S), ("seed", 1)]
                overrides += [(f"downlink.{k}", v) for k, v in net.items()]
                spec = dict(scheme=s["name"], trace=str(REPO / path), encoder=enc,
                            overrides=tuple(overrides))  # fmt: skip
                if enc == "model" and s.get("encoder"):
                    # A scheme defined on x264 runs on the model as a custom composition.
                    spec["scheme_config"] = s["config"]
                if enc == "x264":
                    spec.update(video=str(REPO / CLIP), width=640, encode_time="modeled",
                                quality="none")  # fmt: skip
                out.append((f"{s['name']}-{enc}-{tname}", spec))
    return out


def _sections(path: Path) -> dict[str, list[dict]]:
    out: dict[str, list[dict]] = {"header": [], "frame": [], "sample": [], "quality": []}
    for line in path.read_text(encoding="utf-8").splitlines():
        obj = json.loads(line)
        out.setdefault(obj.get("record", "?"), []).append(obj)
    return out


def _md5(text: str) -> str:
    return hashlib.md5(text.encode()).hexdigest()


def cmd_run(out: Path) -> int:
    from sluice import run
    from sluice.config import registry

    out.mkdir(parents=True, exist_ok=True)
    sums = {}
    for name, spec in _runs(registry()):
        d = out / name
        run.run_one(run.RunSpec(out_dir=str(d), progress=False, **spec))
        text = (d / "run.jsonl").read_text(encoding="utf-8")
        lines = text.splitlines()
        sums[name] = {
            "run.jsonl": _md5(text),
            "frames": _md5("\n".join(ln for ln in lines if '"record":"frame"' in ln)),
            "samples": _md5("\n".join(ln for ln in lines if '"record":"sample"' in ln)),
        }
        print(f"{name:32s} {sums[name]['run.jsonl']}", flush=True)
    (out / "checksums.json").write_text(json.dumps(sums, indent=2), encoding="utf-8")
    return 0


def _compare_records(old: list[dict], new: list[dict], kind: str) -> tuple[str | None, set, set]:
    """(first difference, keys added, keys gone). A key that was null in every old record
    and is gone from the new ones (a column the run's components never filled) is not a
    difference."""
    if len(old) != len(new):
        return f"{kind}: {len(old)} records before, {len(new)} after", set(), set()
    added: set = set()
    dropped: set = set()
    non_null: set = set()
    for i, (a, b) in enumerate(zip(old, new)):
        added |= set(b) - set(a)
        dropped |= set(a) - set(b)
        non_null |= {k for k, v in a.items() if v is not None}
        for k, v in a.items():
            if k in b and b[k] != v:
                return f"{kind} {i}: {k} was {v!r}, now {b[k]!r}", added, dropped
    return None, added, dropped & non_null


def _flatten(obj: object, prefix: str = "") -> dict[str, object]:
    if isinstance(obj, dict):
        out: dict[str, object] = {}
        for k, v in obj.items():
            out.update(_flatten(v, f"{prefix}.{k}" if prefix else str(k)))
        return out
    return {prefix: obj}


# Header fields that differ between any two builds or output directories (the paths are
# relative to the run directory since issue 16, the cached clip's depends on where it is).
_VOLATILE = (
    "git_sha", "git_dirty", "config.encoder.bitstream_path", "config.encoder.video_path",
)  # fmt: skip


def _compare_headers(old: dict, new: dict) -> str:
    a, b = _flatten(old), _flatten(new)
    for k in _VOLATILE:
        a.pop(k, None)
        b.pop(k, None)
    changed = sorted(k for k in a.keys() & b.keys() if a[k] != b[k])
    gone = sorted(a.keys() - b.keys())
    added = sorted(b.keys() - a.keys())
    if not (changed or gone or added):
        return "header same (but sha)"
    parts = [f"changed {k}: {a[k]!r} -> {b[k]!r}" for k in changed]
    parts += [f"gone {k}" for k in gone] + [f"new {k}={b[k]!r}" for k in added]
    return "header: " + ", ".join(parts)


def cmd_compare(old_dir: Path, new_dir: Path) -> int:
    bad = 0
    for d in sorted(p for p in old_dir.iterdir() if (p / "run.jsonl").is_file()):
        name = d.name
        new = new_dir / name / "run.jsonl"
        if not new.is_file():
            print(f"{name:32s} MISSING in {new_dir}")
            bad += 1
            continue
        a, b = (d / "run.jsonl").read_text(), new.read_text()
        if a == b:
            print(f"{name:32s} byte-identical ({_md5(a)})")
            continue
        sa, sb = _sections(d / "run.jsonl"), _sections(new)
        notes = [_compare_headers(sa["header"][0], sb["header"][0])]
        for kind in ("frame", "sample", "quality"):
            diff, added, dropped = _compare_records(sa[kind], sb.get(kind, []), kind)
            if diff or dropped:
                notes.append(diff or f"{kind}: keys gone: {sorted(dropped)}")
                bad += 1
            elif added:
                notes.append(f"{kind}s equal on the old keys (+{len(added)} new keys)")
            else:
                notes.append(f"{kind}s identical")
        print(f"{name:32s} " + "; ".join(notes))
    return 1 if bad else 0


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    sub = ap.add_subparsers(dest="cmd", required=True)
    r = sub.add_parser("run")
    r.add_argument("out", type=Path)
    c = sub.add_parser("compare")
    c.add_argument("old", type=Path)
    c.add_argument("new", type=Path)
    args = ap.parse_args(argv)
    if args.cmd == "run":
        return cmd_run(args.out)
    return cmd_compare(args.old, args.new)


if __name__ == "__main__":
    sys.exit(main())
