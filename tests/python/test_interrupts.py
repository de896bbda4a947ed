"""Interrupts and results as a unit (issue 16): SIGINT/SIGTERM stop a run whatever the
terminal, pool workers die with their parent, and a write killed at any point leaves the old
complete result or none."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from sluice import experiments, results
from sluice.errors import SluiceError
from sluice.run import RunSpec

# The bounds: a run stops within a second of the signal (measured 0.05-0.2 s on 2
# loaded cores; printed with -s), and no worker outlives a killed matrix parent by 5 s.
STOP_BOUND_S = 1.0
WORKER_BOUND_S = 5.0
LONG_S = "20000"  # virtual seconds: minutes of wall time, far more than the tests wait


def _trace(tmp: Path) -> Path:
    # A 1 s Mahimahi loop (12 Mbit/s): loading it costs nothing, the run is all simulation.
    t = tmp / "t.mahi"
    t.write_text("".join(f"{i}\n" for i in range(1, 1001)))
    return t


def _cpu_s(pid: int) -> float:
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except OSError:
        return 0.0
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def _children(pid: int) -> list[int]:
    out = []
    for d in Path("/proc").iterdir():
        if d.name.isdigit():
            try:
                stat = (d / "stat").read_text().rsplit(")", 1)[1].split()
            except OSError:
                continue
            if int(stat[1]) == pid:
                out.append(int(d.name))
    return out


def _alive(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except OSError:
        return False
    return state not in ("Z", "X")


def _wait_for(cond, timeout_s: float, what: str) -> None:
    end = time.monotonic() + timeout_s
    while not cond():
        if time.monotonic() > end:
            raise AssertionError(f"timed out waiting for {what}")
        time.sleep(0.05)


def _start(args: list[str], cwd: Path) -> subprocess.Popen:
    # stderr is a pipe, not a terminal: no progress bar, the case the issue names.
    return subprocess.Popen(
        [sys.executable, "-m", "sluice", *args], cwd=cwd, stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )  # fmt: skip


def _busy_workers(proc: subprocess.Popen) -> list[int]:
    """The two pool workers of ``proc``, once both are simulating (past 1.5 s of CPU)."""
    _wait_for(lambda: sum(_cpu_s(c) > 1.5 for c in _children(proc.pid)) >= 2
              or proc.poll() is not None, 90, "two workers simulating")  # fmt: skip
    workers = [c for c in _children(proc.pid) if _cpu_s(c) > 1.5]
    assert len(workers) == 2 and proc.poll() is None
    return workers


def _simulating(proc: subprocess.Popen) -> bool:
    # Startup (imports, config) takes well under a second of CPU; past 1.5 s it simulates.
    return _cpu_s(proc.pid) > 1.5 or proc.poll() is not None


@pytest.mark.parametrize("sig, code", [(signal.SIGINT, 130), (signal.SIGTERM, 143)])
def test_signal_stops_a_long_run(tmp_path, sig, code):
    trace = _trace(tmp_path)
    proc = _start(["run", "--trace", str(trace), "--duration", LONG_S, "--out", "o"], tmp_path)
    try:
        _wait_for(lambda: _simulating(proc), 60, "the run to start simulating")
        assert proc.poll() is None, proc.communicate()
        t0 = time.monotonic()
        proc.send_signal(sig)
        _, err = proc.communicate(timeout=30)
        elapsed = time.monotonic() - t0
    finally:
        if proc.poll() is None:
            proc.kill()
    print(f"{signal.Signals(sig).name}: stopped {elapsed:.3f} s after the signal")
    assert proc.returncode == code, err
    assert err.strip().splitlines() == ["sluice: interrupted"], err
    assert elapsed < STOP_BOUND_S, elapsed
    out = tmp_path / "o"
    assert not out.exists() or not any(out.iterdir()), list(out.iterdir())


def test_sigint_stops_compare_and_its_workers(tmp_path):
    trace = _trace(tmp_path)
    proc = _start(["compare", "--schemes", "webrtc,webrtc-b", "--trace", str(trace), "--duration",
                   LONG_S, "--jobs", "2", "--out", "c"], tmp_path)  # fmt: skip
    try:
        _busy_workers(proc)
        workers = _children(proc.pid)
        t0 = time.monotonic()
        proc.send_signal(signal.SIGINT)
        _, err = proc.communicate(timeout=30)
        elapsed = time.monotonic() - t0
    finally:
        if proc.poll() is None:
            proc.kill()
    print(f"compare: stopped {elapsed:.3f} s after SIGINT")
    assert proc.returncode == 130, err
    assert err.strip().splitlines()[-1] == "sluice: interrupted", err
    assert "Traceback" not in err, err
    assert elapsed < STOP_BOUND_S, elapsed
    # (multiprocessing's resource tracker, a child too, ends when it sees its parent gone)
    _wait_for(lambda: not [w for w in workers if _alive(w)], WORKER_BOUND_S, "the workers to end")
    leftovers = [p for p in tmp_path.rglob("*") if ".tmp" in p.name]
    assert not leftovers, leftovers


def _two_run_matrix(tmp_path: Path, duration_s: float | str, seeds: int = 2) -> subprocess.Popen:
    """Starts `sluice matrix` of webrtc, seeds 1 to ``seeds``, on two workers."""
    plan = tmp_path / "p.toml"
    plan.write_text(
        f'name = "two"\nseeds = {list(range(1, seeds + 1))}\n[set]\nduration_s = {duration_s}\n'
        f'[[scheme]]\nname = "webrtc"\n[[trace]]\npath = "{_trace(tmp_path)}"\n'
    )
    return _start(["matrix", str(plan), "--jobs", "2", "--results", "res"], tmp_path)


@pytest.mark.parametrize("sig,code", [(signal.SIGTERM, 143), (signal.SIGINT, 130)])
def test_a_matrix_with_runs_queued_stops_in_one_line(tmp_path, sig, code):
    # Short runs, most of them queued: cancelling the queued ones' futures made the pool's
    # own thread print a traceback (InvalidStateError) before "sluice: interrupted".
    proc = _two_run_matrix(tmp_path, 60, seeds=40)
    try:
        _busy_workers(proc)
        time.sleep(1.0)  # short runs: workers finishing and taking queued ones
        proc.send_signal(sig)
        _, err = proc.communicate(timeout=30)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode == code, err
    assert "Traceback" not in err, err
    assert err.strip().splitlines()[-1] == "sluice: interrupted", err


def test_sigkill_of_a_matrix_parent_leaves_no_worker(tmp_path):
    proc = _two_run_matrix(tmp_path, LONG_S)
    try:
        workers = _busy_workers(proc)
        proc.kill()
        proc.wait()
        t0 = time.monotonic()
        _wait_for(lambda: not [w for w in workers if _alive(w)], WORKER_BOUND_S,
                  "the workers to die with their parent")  # fmt: skip
        print(f"matrix: workers gone {time.monotonic() - t0:.3f} s after SIGKILL of the parent")
    finally:
        for w in _children(proc.pid):
            os.kill(w, signal.SIGKILL)


def _dies_on_seed_2(spec: RunSpec) -> tuple[bool, str]:
    # A pool worker's task that kills its own process (as the OOM killer would) for seed 2.
    if dict(spec.overrides).get("seed") == 2:
        os.kill(os.getpid(), signal.SIGKILL)
    return True, f"ran {dict(spec.overrides)['seed']}"


def test_a_worker_that_dies_fails_only_its_own_run(tmp_path):
    from sluice import pool
    from tqdm import tqdm

    specs = [RunSpec(overrides=(("seed", s),), out_dir=str(tmp_path / str(s))) for s in (1, 2, 3)]
    with tqdm(disable=True) as bar:
        out = pool._run_pool(specs, 2, bar, True, fn=_dies_on_seed_2)
    assert out == [(True, "ran 1"), (False, pool.WORKER_DIED), (True, "ran 3")]
    with tqdm(disable=True) as bar, pytest.raises(SluiceError, match="worker process died"):
        pool._run_pool(specs, 2, bar, False, fn=_dies_on_seed_2)


def test_a_killed_pool_worker_is_retried_and_the_matrix_goes_on(tmp_path):
    proc = _two_run_matrix(tmp_path, 1500)
    try:
        workers = _busy_workers(proc)
        os.kill(workers[0], signal.SIGKILL)  # the run it had goes again
        out, err = proc.communicate(timeout=300)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode == 0, err
    assert "Traceback" not in err, err
    cells = sorted((tmp_path / "res").rglob("summary.json"))
    assert len(cells) == 2 and all(results.is_complete(c.parent) for c in cells), cells


# --- results as a unit ----------------------------------------------------------------------


def _result(seed: int, n: int) -> tuple[dict, list, list, dict]:
    header = results.make_header(seed=seed, scheme="x", config={"seed": seed}, trace=None,
                                 uplink_trace=None)  # fmt: skip
    frames = [{"frame_id": i, "latency_us": 1000 * seed + i} for i in range(n)]
    samples = [{"t_us": i * 20000, "queue_bytes": seed} for i in range(n)]
    return header, frames, samples, {"seed": seed}


def _write(d: Path, seed: int, n: int = 2000) -> None:
    h, f, s, summary = _result(seed, n)
    stream = results.temp_path(d / results.STREAM_FILE)
    d.mkdir(parents=True, exist_ok=True)
    stream.write_bytes(bytes([seed]) * 5000)
    results.write_run(d, h, f, s, summary, extra={results.STREAM_FILE: stream})


def _kill_at(d: Path, k: int) -> bool:
    """Writes seed 2 over ``d`` in a child that dies (os._exit) at its k-th file operation;
    True if it got that far."""
    pid = os.fork()
    if pid == 0:  # the child: count file operations, die at the k-th
        count = [0]

        def tick():
            count[0] += 1
            if count[0] == k:
                os._exit(9)

        real_replace, real_unlink, real_open = os.replace, Path.unlink, open

        def replace(a, b):
            tick()
            return real_replace(a, b)

        def unlink(self, missing_ok=False):
            tick()
            return real_unlink(self, missing_ok=missing_ok)

        def opener(*a, **kw):
            tick()
            return real_open(*a, **kw)

        os.replace = replace
        Path.unlink = unlink
        results.open = opener  # type: ignore[attr-defined]
        try:
            _write(d, 2)
        finally:
            os._exit(0)
    _, status = os.waitpid(pid, 0)
    return os.waitstatus_to_exitcode(status) == 9


def test_a_kill_at_any_point_of_writing_leaves_the_old_result_or_none(tmp_path):
    d = tmp_path / "run"
    outcomes = set()
    for k in range(1, 60):
        _write(d, 1)
        old = results.load_run(d)
        assert old.seed == 1
        killed = _kill_at(d, k)
        if results.is_complete(d):
            run = results.load_run(d)
            assert run.seed in (1, 2)
            assert (d / results.STREAM_FILE).read_bytes() == bytes([run.seed]) * 5000
            assert run.summary == {"seed": run.seed}
            assert list(run.frames["latency_us"]) == [1000 * run.seed + i for i in range(2000)]
            outcomes.add(f"seed {run.seed}")
        else:
            with pytest.raises(SluiceError, match="not a complete result|no run.jsonl"):
                results.load_run(d)
            outcomes.add("none")
        if not killed:
            break
    assert outcomes == {"seed 1", "seed 2", "none"}, outcomes
    # The next write removes what the killed writers left.
    _write(d, 3)
    assert not [p for p in d.iterdir() if ".tmp" in p.name]
    assert results.load_run(d).seed == 3


def test_a_swapped_or_truncated_file_is_not_a_result(tmp_path):
    a, b = tmp_path / "a", tmp_path / "b"
    _write(a, 1)
    _write(b, 2)
    (b / results.RUN_FILE).replace(a / results.RUN_FILE)  # new run.jsonl beside old summary
    assert "run.jsonl does not match" in (results.incomplete_reason(a) or "")
    with pytest.raises(SluiceError, match="not a complete result"):
        results.load_run(a)
    data = (b / results.STREAM_FILE).read_bytes()
    (b / results.STREAM_FILE).write_bytes(data[: len(data) // 2])  # a truncated stream
    assert not results.is_complete(b, checksums=False)


def test_resume_runs_a_damaged_cell_again(tmp_path, capsys):
    spec = RunSpec(out_dir=str(tmp_path / "cell"))
    cell = experiments.Cell(spec=spec, scheme="webrtc")
    _write(cell.run_dir, 1)
    (cell.run_dir / experiments.SPEC_FILE).write_text(json.dumps(experiments.spec_key(spec)))
    assert experiments.is_done(cell)
    run = cell.run_dir / results.RUN_FILE
    run.write_bytes(run.read_bytes()[:-100])  # damaged: cut in the middle of a line
    assert not experiments.is_done(cell)
    assert "not a complete result" in capsys.readouterr().err
    assert experiments.todo_cells([cell]) == [cell]


def test_resume_runs_a_cell_whose_quality_scoring_failed_again(tmp_path, capsys):
    from sluice.run import RunOutput

    spec = RunSpec(out_dir=str(tmp_path / "cell"))
    cell = experiments.Cell(spec=spec, scheme="webrtc")
    header = {"seed": 1, "scheme": "x", "config": {"seed": 1}, "trace": None,
              "uplink_trace": None}  # fmt: skip
    failed = RunOutput(cell.run_dir, header, [], [], {"seed": 1}, [], [],
                       quality_error="ffmpeg quality scoring failed: killed")  # fmt: skip
    with pytest.raises(SluiceError, match="without quality scores: ffmpeg"):
        failed.write()
    (cell.run_dir / experiments.SPEC_FILE).write_text(json.dumps(experiments.spec_key(spec)))
    assert results.is_complete(cell.run_dir)  # the run is kept, and says what failed
    summary = json.loads((cell.run_dir / results.SUMMARY_FILE).read_text())
    assert summary[results.QUALITY_ERROR_KEY] == "ffmpeg quality scoring failed: killed"
    assert not experiments.is_done(cell)
    assert "its quality scoring failed" in capsys.readouterr().err
    RunOutput(cell.run_dir, header, [], [], {"seed": 1}, [], []).write()
    assert experiments.is_done(cell)


def test_a_run_directory_written_before_manifests_is_read(tmp_path):
    d = tmp_path / "old"
    _write(d, 1)
    (d / results.MANIFEST_FILE).unlink()
    assert results.is_complete(d)
    assert results.load_run(d).seed == 1
    run = d / results.RUN_FILE
    run.write_bytes(run.read_bytes()[:-7])
    assert "middle of a line" in (results.incomplete_reason(d) or "")


def test_sigint_stops_a_long_trace_generation(tmp_path):
    # A day of gen:constant:12 is 86 million opportunities: seconds of work in the extension,
    # which runs in a helper thread so the signal is handled at once.
    proc = _start(["trace", "info", "gen:constant:12", "--duration", "86400"], tmp_path)
    try:
        _wait_for(lambda: _cpu_s(proc.pid) > 1.2 or proc.poll() is not None, 60,
                  "the generation to start")  # fmt: skip
        assert proc.poll() is None, proc.communicate()
        t0 = time.monotonic()
        proc.send_signal(signal.SIGINT)
        _, err = proc.communicate(timeout=30)
        elapsed = time.monotonic() - t0
    finally:
        if proc.poll() is None:
            proc.kill()
    print(f"trace generation: stopped {elapsed:.3f} s after SIGINT")
    assert proc.returncode == 130, err
    assert err.strip().splitlines() == ["sluice: interrupted"], err
    assert elapsed < STOP_BOUND_S, elapsed


def test_a_second_sigint_while_compare_unwinds_is_exit_130_and_one_line(tmp_path):
    """Issue 30: Ctrl-C twice (the second while the first still stops the pool) ends with
    exit 130 and the one line, not by the signal and not with a traceback."""
    trace = _trace(tmp_path)
    proc = _start(["compare", "--schemes", "webrtc,webrtc-b", "--trace", str(trace), "--duration",
                   LONG_S, "--jobs", "2", "--out", "c"], tmp_path)  # fmt: skip
    try:
        _busy_workers(proc)
        for _ in range(20):  # until it has gone: some land while the first unwinds
            if proc.poll() is not None:
                break
            proc.send_signal(signal.SIGINT)
            time.sleep(0.01)
        _, err = proc.communicate(timeout=30)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode == 130, (proc.returncode, err)
    assert err.strip().splitlines() == ["sluice: interrupted"], err


def test_a_core_panic_in_a_worker_comes_back_as_an_error_it_can_pickle():
    # pyo3's PanicException is a BaseException that cannot be pickled: the parent reported
    # a PicklingError instead of what the core said.
    import pickle

    from sluice import pool

    class Panic(BaseException):
        pass

    def panics(spec):
        raise Panic("positive rate and period")

    with pytest.raises(RuntimeError, match="internal error.*positive rate and period") as e:
        pool._pool_task(panics, None)
    pickle.dumps(e.value)
    with pytest.raises(KeyboardInterrupt):
        pool._pool_task(lambda spec: (_ for _ in ()).throw(KeyboardInterrupt()), None)


def test_a_core_panic_fails_its_cell_and_the_matrix_goes_on(monkeypatch, tmp_path):
    # A matrix runs with keep_going: a cell whose run panics in the core (a BaseException,
    # which `except Exception` let through) failed the whole matrix with a traceback.
    from sluice import pool
    from sluice.run import RunSpec

    class Panic(BaseException):
        pass

    def run_quiet(spec):
        if spec.out_dir.endswith("2"):
            raise Panic("called `Option::unwrap()` on a `None` value")
        return spec.out_dir

    monkeypatch.setattr(pool, "_run_quiet", run_quiet)
    specs = [RunSpec(trace="gen:constant:4", out_dir=str(tmp_path / str(s))) for s in (1, 2, 3)]
    out = pool.run_many(specs, jobs=1, keep_going=True, progress=False)
    assert [isinstance(o, pool.RunFailure) for o in out] == [False, True, False], out
    assert "internal error (a bug in Sluice's core): called `Option::unwrap()`" in out[1].message
