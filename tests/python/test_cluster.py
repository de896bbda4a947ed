"""Sweeps on a Ray cluster (sluice.cluster): a head and a second node started here, the
second from another working directory and with a Python that lacks sluice, so that the
package must travel to it; a plan with relative input paths run through the cluster by
address gives the process pool's results.

The cluster is started once for the module (``ray start``, one CPU per node, token
authentication on as Ray 2.60 turns it on for a head whose user has a token) and stopped by
killing the process groups of the two ``ray start`` commands, never by ``ray stop``, which
would stop every Ray of this user on the machine.
"""

from __future__ import annotations

import json
import os
import secrets
import shutil
import signal
import site
import socket
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

import pytest
from sluice import cluster, plan, video
from sluice.errors import SluiceError, one_line

VENV_BIN = Path(sys.executable).parent
SITE = site.getsitepackages()[0]


@dataclass
class Cluster:
    address: str
    env: dict[str, str]  # what a driver needs: RAY_AUTH_MODE and the token
    base: Path
    bare_python: str  # the second node's Python, without sluice
    node_dirs: tuple[Path, Path]  # the nodes' working directories


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _group_alive(pgid: int) -> bool:
    """A live (not zombie) process is in group ``pgid``."""
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            text = stat.read_text()
        except OSError:
            continue
        fields = text.rsplit(")", 1)[-1].split()
        if len(fields) > 2 and fields[0] != "Z" and int(fields[2]) == pgid:
            return True
    return False


def _stop_groups(pgids: list[int]) -> None:
    for sig in (signal.SIGTERM, signal.SIGKILL):
        for g in pgids:
            try:
                os.killpg(g, sig)
            except ProcessLookupError:
                pass
        deadline = time.monotonic() + 15
        while time.monotonic() < deadline and any(_group_alive(g) for g in pgids):
            time.sleep(0.2)
        if not any(_group_alive(g) for g in pgids):
            return


def _ray_start(cmd: list[str], cwd: Path, env: dict[str, str], pgids: list[int]) -> None:
    proc = subprocess.Popen(
        cmd, cwd=cwd, env=env, start_new_session=True, stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT, text=True,
    )  # fmt: skip
    pgids.append(proc.pid)  # its own session: Ray's daemons stay in this group
    out, _ = proc.communicate(timeout=180)
    assert proc.returncode == 0, out[-3000:]


@pytest.fixture(scope="module")
def ray_cluster() -> Cluster:
    # A short base path: Ray's unix sockets live under its temp dir.
    base = Path(tempfile.mkdtemp(prefix="sluice-rc-", dir="/tmp"))
    env = {k: v for k, v in os.environ.items() if not k.startswith("RAY_")}
    env.update(RAY_AUTH_MODE="token", RAY_AUTH_TOKEN=secrets.token_hex(16),
               RAY_USAGE_STATS_ENABLED="0", XDG_CACHE_HOME=str(base / "cache"),
               SLUICE_RAY_NODE_DIR=str(base / "node-cache"))  # fmt: skip
    # The second node's Python: Ray and the rest, but not sluice (whose editable install is
    # a .pth file of the venv's site-packages, which this one adds as a plain path).
    bare = base / "bare"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(bare)], check=True)
    site = next((bare / "lib").glob("python3*/site-packages"))
    (site / "base.pth").write_text(SITE + "\n")
    bare_python = str(bare / "bin" / "python")
    nodes = (base / "head", base / "node2")
    for d in nodes:
        d.mkdir()
    port = _free_port()
    pgids: list[int] = []
    try:
        _ray_start([str(VENV_BIN / "ray"), "start", "--head", "--num-cpus", "1",
                    "--port", str(port), "--temp-dir", str(base / "ray"),
                    "--include-dashboard=false", "--disable-usage-stats"],
                   nodes[0], env, pgids)  # fmt: skip
        _ray_start([bare_python, "-m", "ray.scripts.scripts", "start", "--num-cpus", "1",
                    "--address", f"127.0.0.1:{port}", "--disable-usage-stats"],
                   nodes[1], env, pgids)  # fmt: skip
        driver_env = {k: env[k] for k in ("RAY_AUTH_MODE", "RAY_AUTH_TOKEN", "XDG_CACHE_HOME")}
        yield Cluster(f"127.0.0.1:{port}", driver_env, base, bare_python, nodes)
    finally:
        _stop_groups(pgids)
        shutil.rmtree(base, ignore_errors=True)


@pytest.fixture
def driver(ray_cluster: Cluster, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A driver working directory with inputs under relative paths, and the cluster's
    authentication in the environment; Ray is shut down after the test."""
    monkeypatch.chdir(tmp_path)
    for k, v in ray_cluster.env.items():
        monkeypatch.setenv(k, v)
    monkeypatch.delenv("RAY_ADDRESS", raising=False)
    import ray  # after RAY_AUTH_MODE: Ray reads it once
    inputs = tmp_path / "inputs"
    inputs.mkdir()
    shutil.copy(Path(__file__).parents[2] / "data" / "traces" / "step-30-3.mahi",
                inputs / "step.mahi")  # fmt: skip
    subprocess.run(
        [video.ffmpeg_exe(), "-v", "error", "-f", "lavfi",
         "-i", "testsrc2=size=160x120:rate=25:duration=1", "-pix_fmt", "yuv420p",
         "-c:v", "libx264", "-qp", "0", "-y", str(inputs / "moving.mp4")],
        check=True,
    )  # fmt: skip
    yield tmp_path
    ray.shutdown()


MODEL_PLAN = """
name = "model"
seeds = [1, 2]
[set]
duration_s = 3
"downlink.queue_bytes" = 100000
[[scheme]]
name = "webrtc"
[[scheme]]
name = "always-burst"
[[trace]]
path = "step.mahi"
[[trace]]
path = "gen:constant:8"
label = "c8"
"""

X264_PLAN = """
name = "x264"
[set]
duration_s = 2
[video]
encode_time = "modeled"
quality = "fast"
[[scheme]]
name = "webrtc-x264"
[[trace]]
path = "step.mahi"
[[clip]]
path = "moving.mp4"
[[clip]]
path = "broken.mp4"
label = "broken"
"""


def _run_files(root: Path) -> dict[str, bytes]:
    return {str(p.relative_to(root)): p.read_bytes() for p in sorted(root.rglob("*"))
            if p.is_file() and p.name not in ("results.csv", "plan.json")}  # fmt: skip


def test_plan_on_the_cluster_gives_the_process_pools_results(
    ray_cluster: Cluster, driver: Path
) -> None:
    (driver / "inputs" / "plan.toml").write_text(MODEL_PLAN)
    p = plan.load_plan("inputs/plan.toml")
    pool = plan.run_plan(p, "pool", jobs=2, progress=False)
    assert not pool.outcome.failed
    p = plan.load_plan("inputs/plan.toml")
    ray_res = plan.run_plan(p, "ray", backend="ray", address=ray_cluster.address,
                            progress=False)  # fmt: skip
    assert not ray_res.outcome.failed and len(ray_res.outcome.ran) == 8
    # Cells ran on both nodes, the second one through the package the driver shipped.
    assert len({node for _, node in cluster.last_cells}) == 2
    # Byte-identical run files (model encoder: nothing differs, not even the header):
    # run.jsonl, summary.json, manifest.json and experiment-spec.json of each cell.
    a, b = _run_files(driver / "pool"), _run_files(driver / "ray")
    assert len(a) == 8 * 4 and a == b
    # The tables differ only in run_dir.
    ta, tb = pool.table.drop(columns="run_dir"), ray_res.table.drop(columns="run_dir")
    assert ta.equals(tb)
    # Nothing landed in the nodes' working directories.
    assert [list(d.iterdir()) for d in ray_cluster.node_dirs] == [[], []]


def test_x264_cells_failures_and_resume_on_the_cluster(
    ray_cluster: Cluster, driver: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from sluice.cli import main

    (driver / "inputs" / "plan.toml").write_text(X264_PLAN)
    (driver / "inputs" / "broken.mp4").write_text("not a video\n")
    pool = plan.run_plan(plan.load_plan("inputs/plan.toml"), "pool", jobs=1, progress=False)
    assert [c.clip for c, _ in pool.outcome.failed] == ["broken"]

    capsys.readouterr()
    rc = main(["matrix", "inputs/plan.toml", "--results", "ray", "--backend", "ray",
               "--address", ray_cluster.address])  # fmt: skip
    err = capsys.readouterr().err.strip().splitlines()
    assert rc == 2
    # The failed cell is one line naming it and the cause, then the summary line.
    failed = [ln for ln in err if ln.startswith("sluice: cell ")]
    assert len(failed) == 1 and "/broken/webrtc-x264/s1 failed: " in failed[0]
    assert "not a video file ffmpeg can read" in failed[0]
    assert err[-1] == "sluice: error: 1 of 2 runs failed (see above)"
    assert pool.outcome.failed[0][1] in failed[0]  # the same cause as on the process pool
    assert "Traceback" not in "\n".join(err)

    # The good cell: the same files as the process pool's; the header differs only in
    # where the node decoded the clip.
    cell = Path("x264/step/moving/webrtc-x264/s1")
    for name in ("stream.264", "delivered.264", "summary.json"):
        assert (driver / "ray" / cell / name).read_bytes() == (driver / "pool" / cell / name)\
            .read_bytes(), name  # fmt: skip
    la = (driver / "pool" / cell / "run.jsonl").read_text().splitlines()
    lb = (driver / "ray" / cell / "run.jsonl").read_text().splitlines()
    assert la[1:] == lb[1:]
    ha, hb = json.loads(la[0]), json.loads(lb[0])
    ea, eb = ha["config"]["encoder"], hb["config"]["encoder"]
    # Both relative to the run directory that decoded it: the pool's to its video cache,
    # the node's to its own (the same decoded file).
    va, vb = ea.pop("video_path"), eb.pop("video_path")
    assert va != vb and Path(va).name == Path(vb).name and "video-cache" in vb
    # The stream is the run directory's own.
    assert ea.pop("bitstream_path") == eb.pop("bitstream_path") == "stream.264"
    assert ha == hb

    # Resume: the failed cell, and only it, runs again.
    shutil.copy(driver / "inputs" / "moving.mp4", driver / "inputs" / "broken.mp4")
    capsys.readouterr()
    rc = main(["matrix", "inputs/plan.toml", "--results", "ray", "--backend", "ray",
               "--address", ray_cluster.address])  # fmt: skip
    out = capsys.readouterr().out
    assert rc == 0 and "2 cells, 1 run now, 2 with results" in out
    assert [list(d.iterdir()) for d in ray_cluster.node_dirs] == [[], []]


def _sluice(cwd: Path, env: dict[str, str], *args: str) -> subprocess.CompletedProcess:
    full = {k: v for k, v in os.environ.items() if not k.startswith("RAY_")}
    full.update(env)
    return subprocess.run([str(VENV_BIN / "sluice"), *args], cwd=cwd, env=full,
                          capture_output=True, text=True, timeout=600)  # fmt: skip


def test_compare_with_a_relative_trace_on_the_cluster(
    ray_cluster: Cluster, tmp_path: Path
) -> None:
    shutil.copy(Path(__file__).parents[2] / "data" / "traces" / "step-30-3.mahi",
                tmp_path / "t.mahi")  # fmt: skip
    proc = _sluice(tmp_path, {**ray_cluster.env, "RAY_ADDRESS": ray_cluster.address},
                   "compare", "--schemes", "webrtc,always-burst", "--trace", "t.mahi",
                   "--duration", "2", "--backend", "ray", "--out", "cmp")  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    assert (tmp_path / "cmp" / "compare.md").is_file()
    for s in ("webrtc", "always-burst"):
        header = json.loads((tmp_path / "cmp" / s / "run.jsonl").open().readline())
        assert header["trace"]["name"] == "t.mahi"


def test_a_node_without_sluice_is_one_line(ray_cluster: Cluster, tmp_path: Path) -> None:
    # Shipping off: the second node's Python has no sluice.
    proc = _sluice(tmp_path, {**ray_cluster.env, "SLUICE_RAY_SHIP": "0"},
                   "compare", "--schemes", "webrtc", "--trace", "gen:constant:5",
                   "--duration", "1", "--backend", "ray", "--address", ray_cluster.address,
                   "--out", "cmp")  # fmt: skip
    assert proc.returncode == 2, proc.stderr
    lines = proc.stderr.strip().splitlines()
    assert lines == [
        f"sluice: error: sluice is not installed on Ray node {socket.gethostname()} (python "
        f"{ray_cluster.bare_python}): let sluice ship itself (unset SLUICE_RAY_SHIP) or "
        "install this version on every node"
    ]
    assert not (tmp_path / "cmp").exists()


def test_without_ray_the_hint_is_one_line_that_works_here(tmp_path: Path) -> None:
    code = ("import sys; sys.modules['ray'] = None; from sluice.cli import main; "
            "sys.exit(main(sys.argv[1:]))")  # fmt: skip
    proc = subprocess.run(
        [sys.executable, "-c", code, "compare", "--schemes", "webrtc", "--trace",
         "gen:constant:5", "--duration", "1", "--backend", "ray", "--out", "x"],
        cwd=tmp_path, capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    assert proc.returncode == 2
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("sluice: error: --backend ray needs Ray")
    assert "pip install 'ray>=2.9'" in lines[0] and "sluice[cluster]'" not in lines[0]


def test_address_without_the_ray_backend_is_an_error(sluice) -> None:
    sluice("compare", "--schemes", "webrtc", "--trace", "gen:constant:5", "--duration", "1",
           "--address", "127.0.0.1:1").assert_one_line_error("--backend ray")  # fmt: skip


def test_node_check() -> None:
    me = cluster.identity()
    assert me["digest"] == cluster.identity()["digest"]
    cluster.check_node(me, {**me, "host": "h"}, shipped=True)  # same package
    other = {**me, "digest": "0" * 64, "git_sha": "f" * 40, "git_dirty": False, "host": "h"}
    with pytest.raises(SluiceError) as e:
        cluster.check_node(me, other, shipped=False)
    msg = str(e.value)
    assert "\n" not in msg and msg.startswith("sluice on Ray node h ")
    assert "git ffffffffff" in msg and f"not this driver's {me['version']}" in msg
    # Clean checkouts of one commit count as the same code (their extensions were built
    # apart); a modified one does not.
    clean = {"version": "1", "digest": "a", "git_sha": "c" * 40, "git_dirty": False}
    assert cluster.same_code(clean, {**clean, "digest": "b"})
    assert not cluster.same_code(clean, {**clean, "digest": "b", "git_dirty": True})
    assert not cluster.same_code({**clean, "git_sha": "unknown"},
                                 {**clean, "digest": "b", "git_sha": "unknown"})  # fmt: skip


def test_a_bug_is_one_line_with_where_it_happened() -> None:
    try:
        {}["missing"]
    except KeyError as e:
        line = one_line(e)
    assert line.startswith("KeyError: 'missing' (at test_cluster.py:")
    assert line.endswith("in test_a_bug_is_one_line_with_where_it_happened)")


def test_a_cluster_wanting_a_token_is_one_line(ray_cluster: Cluster, tmp_path: Path) -> None:
    # The driver lacks RAY_AUTH_MODE=token: Ray retries for some 20 s, logging each attempt;
    # sluice keeps those lines aside and says what is missing.
    proc = _sluice(tmp_path, {"XDG_CACHE_HOME": ray_cluster.env["XDG_CACHE_HOME"]},
                   "compare", "--schemes", "webrtc", "--trace", "gen:constant:5",
                   "--duration", "1", "--backend", "ray", "--address", ray_cluster.address,
                   "--out", "cmp")  # fmt: skip
    assert proc.returncode == 2
    assert proc.stderr.strip().splitlines() == [
        f"sluice: error: cannot connect to the Ray cluster at {ray_cluster.address}: it wants "
        "token authentication (RAY_AUTH_MODE=token on its nodes): set RAY_AUTH_MODE=token "
        "here too, with the cluster's token in RAY_AUTH_TOKEN, RAY_AUTH_TOKEN_PATH or "
        "~/.ray/auth_token"
    ]


def test_nothing_at_the_address_is_one_line(sluice) -> None:
    port = _free_port()
    sluice("compare", "--schemes", "webrtc", "--trace", "gen:constant:5", "--duration", "1",
           "--backend", "ray", "--address", f"127.0.0.1:{port}").assert_one_line_error(
        f"cannot connect to the Ray cluster at 127.0.0.1:{port}", "is its head started"
    )  # fmt: skip
