"""Many runs at once: :func:`run_many` on a local process pool or on Ray
(:mod:`sluice.cluster`).

A run is :func:`sluice.run.run_one` either way; this module only decides where it runs,
shows one progress bar over all of them, and charges a worker's death to the run that died.
"""

from __future__ import annotations

import concurrent.futures as cf
import multiprocessing
import os
import sys
from collections.abc import Callable
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from .errors import SluiceError, one_line
from .run import RunSpec, run_one

BACKENDS = ("process", "ray")


@dataclass(frozen=True)
class RunFailure:
    """A run of :func:`run_many` (``keep_going=True``) that failed: a user-facing error
    (:class:`SluiceError`: a missing or unreadable input, an invalid setting), a bug in the
    run or a lost worker; ``message`` is one line (:func:`sluice.errors.one_line`)."""

    spec: RunSpec
    message: str


def _run_quiet(spec: RunSpec) -> str:
    return str(run_one(replace(spec, progress=False)))


def _core_panic(e: BaseException) -> RuntimeError:
    """pyo3's PanicException (a BaseException, which cannot be pickled) as an error that
    says what the core said."""
    return RuntimeError(f"internal error (a bug in Sluice's core): {e}")


def _run_caught(spec: RunSpec) -> tuple[bool, str]:
    """(True, run dir) or (False, the error as one line, :func:`sluice.errors.one_line`);
    a panic of the core is one too (one failed cell must not stop the others)."""
    try:
        return True, _run_quiet(spec)
    except Exception as e:  # noqa: BLE001 - one failed cell must not stop the others
        return False, one_line(e)
    except (KeyboardInterrupt, SystemExit, GeneratorExit):
        raise
    except BaseException as e:  # noqa: BLE001 (pyo3's PanicException: the core's panic)
        return False, one_line(_core_panic(e))


def check_pool(backend: str, jobs: int | None, address: str | None) -> None:
    """Where runs go, checked before anything is run or replaced (:func:`run_many` checks
    again)."""
    if backend not in BACKENDS:
        raise SluiceError(f"unknown backend {backend!r} (expected one of: {', '.join(BACKENDS)})")
    if jobs is not None and jobs < 1:
        raise SluiceError(f"--jobs must be at least 1, got {jobs}")
    if address and backend != "ray":
        raise SluiceError("--address is the Ray cluster's: add --backend ray")


def run_many(
    specs: list[RunSpec],
    jobs: int | None = None,
    backend: str = "process",
    progress: bool = True,
    *,
    keep_going: bool = False,
    desc: str = "runs",
    address: str | None = None,
) -> list[Any]:
    """Runs ``specs`` in parallel; returns their run directories (``Path``) in the order
    given.

    ``backend="process"``: a local process pool of ``jobs`` workers (default: the CPU count).
    ``backend="ray"``: Ray tasks (:mod:`sluice.cluster`) on a local Ray or, with ``address``
    (or ``RAY_ADDRESS``), on a cluster; inputs travel with the tasks and this process writes
    the results, so no filesystem is shared. ``progress``: a bar over the runs (on a
    terminal only), labelled ``desc``. The first failure cancels what has not started and is
    raised, unless ``keep_going``: then a run that fails is a :class:`RunFailure` in the list
    (its cause on one line) and the others go on.
    """
    check_pool(backend, jobs, address)
    ray_jobs = jobs
    outs = [s.resolved_out_dir() for s in specs]
    if len(set(map(os.path.abspath, outs))) != len(outs):
        raise SluiceError("two runs would write to the same output directory")
    # Absolute paths: workers may not share our working directory.
    specs = [replace(s, out_dir=os.path.abspath(o), progress=False) for s, o in zip(specs, outs)]
    if not specs:
        return []
    jobs = min(jobs or os.cpu_count() or 1, len(specs))
    show = progress and len(specs) > 1 and hasattr(sys.stderr, "isatty") and sys.stderr.isatty()

    from tqdm import tqdm

    bar = tqdm(total=len(specs), unit="run", desc=desc, disable=not show, file=sys.stderr)
    try:
        if backend == "ray":
            from . import cluster

            done = cluster.run_specs(specs, bar, keep_going, jobs=ray_jobs, address=address)
        elif jobs == 1:
            fn = _run_caught if keep_going else _run_quiet
            done = []
            for s in specs:
                done.append(fn(s))
                bar.update(1)
        else:
            done = _run_pool(specs, jobs, bar, keep_going)
    finally:
        bar.close()
    out: list[Any] = []
    for s, r in zip(specs, done):
        if isinstance(r, tuple):
            ok, text = r
            out.append(Path(text) if ok else RunFailure(s, text))
        else:
            out.append(Path(r))
    return out


PR_SET_PDEATHSIG = 1  # <linux/prctl.h>


def _worker_init(parent_pid: int) -> None:
    """A pool worker's setup: it dies with its parent (Linux: PR_SET_PDEATHSIG, else a
    watchdog thread on the parent's pid), leaves SIGINT to the parent (which terminates the
    pool) and unwinds on SIGTERM (temporary files removed, see :func:`_pool_task`)."""
    import signal

    signal.signal(signal.SIGINT, signal.SIG_IGN)
    signal.signal(signal.SIGTERM, _worker_sigterm)
    armed = False
    if sys.platform.startswith("linux"):
        import ctypes

        try:
            libc = ctypes.CDLL(None, use_errno=True)
            armed = libc.prctl(PR_SET_PDEATHSIG, signal.SIGTERM, 0, 0, 0) == 0
        except (OSError, AttributeError):
            armed = False
    if os.getppid() != parent_pid:  # the parent died before the line above
        os._exit(143)
    if not armed:
        import threading
        import time

        def watch() -> None:
            while os.getppid() == parent_pid:
                time.sleep(0.5)
            os.kill(os.getpid(), signal.SIGTERM)

        threading.Thread(target=watch, daemon=True).start()


_task_running = False


def _worker_sigterm(signum: int, frame: Any) -> None:
    """SIGTERM in a pool worker (its parent stops the pool): a run under way unwinds (its
    temporary files removed, :func:`_pool_task`); an idle worker just ends."""
    from .errors import Terminated

    if _task_running:
        raise Terminated()
    os._exit(143)


def _pool_task(fn: Any, spec: RunSpec) -> Any:
    from .errors import Terminated

    global _task_running
    _task_running = True
    try:
        return fn(spec)
    except Terminated:  # the run unwound (its temporary files are gone); the worker ends
        os._exit(143)
    except (Exception, KeyboardInterrupt, SystemExit, GeneratorExit):
        raise
    except BaseException as e:  # noqa: BLE001 (pyo3's PanicException: the core's panic)
        # It cannot be pickled back to the parent (which then reports a PicklingError
        # instead): what it said goes back as an error of the run.
        raise _core_panic(e) from None
    finally:
        _task_running = False


WORKER_DIED = "its worker process died (killed by a signal, or out of memory)"


def _run_pool(specs: list[RunSpec], jobs: int, bar: Any, keep_going: bool,
              fn: Callable[[RunSpec], Any] | None = None) -> list[Any]:  # fmt: skip
    """Runs ``specs`` on a pool of ``jobs`` processes. A worker that dies (rather than
    raising) breaks the pool and fails every run in it: those runs go again in fresh pools,
    ``jobs`` at a time, and one that breaks a pool again is run alone, so that a death is
    charged only to the run that dies alone (:data:`WORKER_DIED`; with ``keep_going`` a
    failure of that run, else an error). ``fn``: what a worker does with a spec (default:
    run it and write its result)."""
    fn = fn or (_run_caught if keep_going else _run_quiet)
    out: list[Any] = [None] * len(specs)
    broken = _pool_pass(specs, list(range(len(specs))), jobs, fn, bar, out)
    suspects: list[int] = []
    while broken:  # again, in groups small enough that all of a group is under way at once
        group, broken = broken[:jobs], broken[jobs:]
        suspects += _pool_pass(specs, group, len(group), fn, bar, out)
    for i in suspects:
        if _pool_pass(specs, [i], 1, fn, bar, out):
            if not keep_going:
                raise SluiceError(f"run {specs[i].scheme} ({specs[i].out_dir}) failed: "
                                  f"{WORKER_DIED}")  # fmt: skip
            out[i] = (False, WORKER_DIED)
            bar.update(1)
    return out


def _pool_pass(specs: list[RunSpec], which: list[int], jobs: int, fn: Any, bar: Any,
               out: list[Any]) -> list[int]:  # fmt: skip
    """Runs ``specs[i]`` for ``i`` in ``which`` on a fresh pool into ``out[i]``; returns the
    ones that did not run because the pool broke (a worker died)."""
    # "spawn": no fork of a process that may hold threads (tqdm, BLAS, the extension).
    ctx = multiprocessing.get_context("spawn")
    broken: list[int] = []
    with cf.ProcessPoolExecutor(max_workers=jobs, mp_context=ctx, initializer=_worker_init,
                                initargs=(os.getpid(),)) as pool:  # fmt: skip
        futures: dict[Any, int] = {}
        try:
            for n, i in enumerate(which):
                try:
                    futures[pool.submit(_pool_task, fn, specs[i])] = i
                except cf.process.BrokenProcessPool:  # a worker died already
                    broken += which[n:]
                    break
            for fut in cf.as_completed(futures):
                try:
                    out[futures[fut]] = fut.result()
                except cf.process.BrokenProcessPool:
                    broken.append(futures[fut])
                    continue
                bar.update(1)
        except BaseException:
            # Stop the workers (a run under way unwinds on SIGTERM); the pool then fails the
            # queued runs itself. Cancelling their futures first made the pool's manager
            # thread print a traceback (Python 3.11 sets the pool's error on every pending
            # future, cancelled or not: InvalidStateError).
            for p in list(getattr(pool, "_processes", {}).values()):
                if p.is_alive():
                    p.terminate()
            raise
    return sorted(broken)
