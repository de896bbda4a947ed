"""Cuts the leaderboard's trace windows (data/traces/leaderboard/) from their public sources.

Development only: the windows are shipped, so the leaderboard runs without this script or its
sources. Every family gets three 60 s windows of one real trace, starting at 0, 1/3 and 2/3 of
the source series (no choosing of windows by their content). Rate series stay rate series
(`time_s rate_mbps`, Sluice converts them to delivery opportunities by the carry-over rule of
traces/README.md); Mahimahi sources are cut to Mahimahi windows.

    python scripts/leaderboard_traces.py --shared ../shared --starlink throughput.csv

`--starlink` is `throughput.csv` from `Data/Autobahn/throughput.zip` of
github.com/sys-uos/Starlink-on-the-Autobahn (commit 2eec78c93b65).
"""

from __future__ import annotations

import argparse
import csv
import datetime as dt
import sys
from pathlib import Path

WINDOW_S = 60.0
OUT = Path(__file__).resolve().parents[1] / "data" / "traces" / "leaderboard"


def starts(length_s: float) -> list[float]:
    """Window starts at 0, 1/3 and 2/3 of the series, each window fitting inside it."""
    last = max(0.0, length_s - WINDOW_S)
    return [min(last, length_s * k / 3) for k in range(3)]


def rate_windows(samples: list[tuple[float, float]], header: list[str], stem: str) -> None:
    """``samples``: (time s, Mbit/s); writes ``stem-w1..3.rate``."""
    t0 = samples[0][0]
    samples = [(t - t0, r) for t, r in samples]
    length = samples[-1][0]
    for i, s in enumerate(starts(length), 1):
        rows = [(t - s, r) for t, r in samples if s <= t < s + WINDOW_S]
        lines = [f"# {h}" for h in header]
        lines.append(f"# window {i}: source seconds [{s:.1f}, {s + WINDOW_S:.1f}), re-based to 0")
        lines += [f"{t:.3f} {r:.6f}" for t, r in rows]
        (OUT / f"{stem}-w{i}.rate").write_text("\n".join(lines) + "\n")


def two_columns(path: Path) -> list[tuple[float, float]]:
    out = []
    for line in path.read_text().split("\n"):
        f = line.split()
        if len(f) >= 2:
            out.append((float(f[0]), float(f[1])))
    return out


def ucc_5g(path: Path) -> list[tuple[float, float]]:
    """G-NetTrack CSV: one row per second, DL_bitrate in kbit/s."""
    with path.open(newline="") as fh:
        return [(float(i), float(r["DL_bitrate"]) / 1e3) for i, r in enumerate(csv.DictReader(fh))]


def starlink(path: Path) -> list[tuple[float, float]]:
    """iperf3 1 s download intervals (Mbit/s) by their start time."""
    with path.open(newline="") as fh:
        rows = list(csv.DictReader(fh))
    stamp = [dt.datetime.fromisoformat(r["timestamp_start_dl"][:26]) for r in rows]
    out: dict[float, float] = {}
    for s, r in zip(stamp, rows):
        out[(s - stamp[0]).total_seconds()] = float(r["download"])  # a repeated row: once
    return sorted(out.items())


def run_windows(samples: list[tuple[float, float]], header: list[str], stem: str) -> None:
    """For a series measured in separate runs (gaps over 2 s between them): the runs at least
    60 s long, and of them the ones at 0, 1/3 and 2/3 of the list, each cut to 60 s."""
    runs: list[list[tuple[float, float]]] = [[samples[0]]]
    for a, b in zip(samples, samples[1:]):
        if b[0] - a[0] > 2.0:
            runs.append([])
        runs[-1].append(b)
    long = [r for r in runs if r[-1][0] - r[0][0] >= WINDOW_S - 1.5]
    for i, k in enumerate((0, len(long) // 3, 2 * len(long) // 3), 1):
        run = long[k]
        s = run[0][0]
        lines = [f"# {h}" for h in header]
        lines.append(f"# window {i}: measurement run {k + 1} of the {len(long)} of 60 s, source "
                     f"seconds [{s:.1f}, {s + WINDOW_S:.1f}), re-based to 0")  # fmt: skip
        lines += [f"{t - s:.3f} {r:.6f}" for t, r in run if t - s < WINDOW_S]
        (OUT / f"{stem}-w{i}.rate").write_text("\n".join(lines) + "\n")


def mahimahi_windows(path: Path, header: list[str], stem: str) -> None:
    ms = [int(x) for x in path.read_text().split()]
    for i, s in enumerate(starts(ms[-1] / 1e3), 1):
        lo, hi = round(s * 1e3), round((s + WINDOW_S) * 1e3)
        cut = [t - lo for t in ms if lo <= t < hi]
        # Mahimahi loops a file at its last timestamp: end the window at its full length.
        if not cut or cut[-1] < hi - lo - 1:
            cut.append(hi - lo - 1)
        (OUT / f"{stem}-w{i}.mahi").write_text("\n".join(map(str, cut)) + "\n")
        print(f"{stem}-w{i}.mahi: {header[0]}; source ms [{lo}, {hi})", file=sys.stderr)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--shared", default="../shared", help="the shared data directory")
    ap.add_argument("--starlink", required=True, help="throughput.csv of Starlink-on-the-Autobahn")
    a = ap.parse_args()
    tr = Path(a.shared) / "traces"
    OUT.mkdir(parents=True, exist_ok=True)
    rate_windows(two_columns(tr / "zhuge/office-wifi_trace7.orig.log"),
                 ["Wi-Fi, office: Zhuge (SIGCOMM 2022) trace set, "
                  "hkust-spark/SparkTraces@35fd82ddfe3c Zhuge/office-wifi/trace7.log; GPL-3.0"],
                 "wifi-office7")  # fmt: skip
    rate_windows(two_columns(tr / "zhuge/4g_trace2.orig.log"),
                 ["4G/LTE: Zhuge (SIGCOMM 2022) trace set, hkust-spark/SparkTraces@35fd82ddfe3c "
                  "Zhuge/4g/trace2.log; GPL-3.0"], "lte-zhuge2")  # fmt: skip
    rate_windows(ucc_5g(tr / "ucc-5g/Download_Driving_B_2020.01.16_09.56.56.orig.csv"),
                 ["5G NSA, driving, file download (DL_bitrate): uccmisl/5Gdataset@306d92eba81c "
                  "Download/Driving/B_2020.01.16_09.56.56.csv (Raca et al., MMSys 2020); GPL-3.0"],
                 "5g-driving-b")  # fmt: skip
    mahimahi_windows(tr / "mahimahi/TMobile-UMTS-driving.down",
                     ["3G UMTS/HSPA, T-Mobile US, driving (Saturator 2013): ravinet/mahimahi"
                      "@ae477d437615 traces/TMobile-UMTS-driving.down; GPL-3.0-or-later"],
                     "3g-umts-driving")  # fmt: skip
    run_windows(starlink(Path(a.starlink)),
                 ["Starlink (LEO), mobile on the Autobahn Osnabrueck-Bunde 2024-04-19, iperf3 1 s "
                  "download throughput while an upload ran: sys-uos/Starlink-on-the-Autobahn"
                  "@2eec78c93b65 Data/Autobahn/throughput.zip:throughput.csv (Laniewski, Lanfer, "
                  "Aschenbruck, IEEE OJ-COMS 2025); CC BY-SA 4.0"],
                "leo-starlink-autobahn")  # fmt: skip
    return 0


if __name__ == "__main__":
    sys.exit(main())
