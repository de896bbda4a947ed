"""Runs on Ray: a local Ray, or a cluster (``--backend ray --address HOST:PORT``).

:func:`run_specs` is the Ray backend of :func:`sluice.pool.run_many`. Nothing is shared but
Ray itself:

- **Inputs travel with the tasks.** Trace and clip files are read here, on the driver, with
  the paths as the user gave them (relative to the driver's working directory), put into
  Ray's object store once per distinct content, and written on the node that runs a cell to
  ``<node dir>/inputs/<sha256>/<file name>``; a clip is decoded there, into
  ``<node dir>/video-cache``, never into the worker's working directory (the node dir:
  ``SLUICE_RAY_NODE_DIR`` where ``ray start`` ran, else ``<temp dir>/sluice-ray-<uid>``).
  Scheme files are already compositions in the specs (read where the plan or command line
  named them).
- **Results come back.** A task runs :func:`sluice.run.simulate` in a scratch directory
  and returns the records and any files the run wrote (x264's bitstreams); the driver writes
  the run directory (:meth:`sluice.run.RunOutput.write`, the process pool's writer), so
  ``--out`` and ``--results`` are local to the driver. The header's git SHA is the driver's
  (the nodes run the same code: below); ``encoder.bitstream_path`` is ``stream.264``, the
  run directory's own, as on the process pool. ``encoder.video_path`` is the decoded clip's
  absolute path on the node that ran the cell (it is not on the driver): the one header
  field that differs from a process-pool run, where it is relative to the run directory.
- **Sluice reaches the nodes.** Connecting to a cluster (an address, or ``RAY_ADDRESS``),
  the driver ships its own installed package, the ``sluice`` directory with the built
  extension ``_core.abi3.so`` and a ``dist-info`` for its version (what installing the
  wheel unpacks), through Ray's ``runtime_env`` ``py_modules``: Ray uploads it to the
  cluster once per content hash. Nothing is built on demand: the package the driver runs
  is the one shipped (staged once per content hash under ``~/.cache/sluice/ray-package``).
  ``SLUICE_RAY_SHIP=0`` turns shipping off (the nodes then need their own sluice);
  ``SLUICE_RAY_SHIP=1`` turns it on for a local Ray too. Before any cell runs, every node
  reports its sluice (a probe sent by value, so it runs where sluice is missing): a node
  without it, or with other code (another content hash, unless both are clean checkouts
  of the same commit), stops the run with one line.
- **Failures are one line.** A cell that fails (a user error, a bug, a worker that died)
  is ``(False, message)`` with the cause on one line; ``keep_going`` goes on with the
  others. ``--jobs N`` caps the cells in flight (default: as many as the cluster has CPUs
  for, one CPU per cell).
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import re
import shutil
import sys
import tempfile
import time
from collections.abc import Iterator
from dataclasses import replace
from pathlib import Path
from typing import Any

from . import __version__, results
from .errors import SluiceError, one_line
from .run import RunSpec
from .traces import is_generated

SHIP_ENV = "SLUICE_RAY_SHIP"
NODE_DIR_ENV = "SLUICE_RAY_NODE_DIR"
PROBE_TIMEOUT_S = 300.0
RAY_HINT = (
    "pip install 'ray>=2.9' (in this checkout: .venv/bin/pip install -e '.[cluster]', "
    "or make setup)"
)
AUTH_HINT = (
    "set RAY_AUTH_MODE=token here too, with the cluster's token in RAY_AUTH_TOKEN, "
    "RAY_AUTH_TOKEN_PATH or ~/.ray/auth_token"
)

# The probe runs on every node before the cells, sent by value (compiled from this source,
# not imported from sluice), so it can report a node whose Python lacks sluice. The driver
# runs the same code for its own identity.
PROBE_SOURCE = '''
def package_digest(root):
    import hashlib, os
    h = hashlib.sha256()
    for dirpath, dirnames, filenames in os.walk(root):
        dirnames[:] = sorted(d for d in dirnames if d != "__pycache__")
        for name in sorted(filenames):
            if name.endswith((".pyc", ".pyo")):
                continue
            path = os.path.join(dirpath, name)
            h.update(os.path.relpath(path, root).replace(os.sep, "/").encode() + b"\\0")
            with open(path, "rb") as f:
                h.update(hashlib.sha256(f.read()).digest())
    return h.hexdigest()


def probe(want_ffmpeg):
    import os, platform, socket, sys
    info = {"host": socket.gethostname(), "python": platform.python_version(),
            "executable": sys.executable}
    try:
        import sluice
    except ImportError as e:
        info["missing"] = type(e).__name__ + ": " + str(e)
        return info
    info["version"] = getattr(sluice, "__version__", "?")
    info["path"] = os.path.dirname(os.path.abspath(sluice.__file__))
    info["digest"] = package_digest(info["path"])
    try:
        from sluice import _core  # noqa: F401
        from sluice.results import git_info
        info["git_sha"], info["git_dirty"] = git_info()
    except Exception as e:
        info["missing"] = "sluice is there but does not load: " + type(e).__name__ + ": " + str(e)
        return info
    if want_ffmpeg:
        try:
            from sluice.video import ffmpeg_exe
            ffmpeg_exe()
        except Exception as e:
            info["ffmpeg"] = str(e)
    return info
'''


def _probe_namespace() -> dict[str, Any]:
    ns: dict[str, Any] = {"__name__": "__sluice_probe__"}
    # Our own source, compiled here so that Ray sends the probe by value.
    exec(compile(PROBE_SOURCE, "<sluice probe>", "exec"), ns)
    return ns


def package_root() -> Path:
    """The directory of the ``sluice`` package this process runs."""
    return Path(__file__).resolve().parent


def identity() -> dict[str, Any]:
    """This process's sluice: version, content hash, git SHA (and whether modified)."""
    from .results import git_info

    sha, dirty = git_info()
    digest = _probe_namespace()["package_digest"](str(package_root()))
    return {"version": __version__, "digest": digest, "git_sha": sha, "git_dirty": dirty}


def same_code(driver: dict[str, Any], node: dict[str, Any]) -> bool:
    """The node runs the driver's code: the same package content, or clean checkouts of the
    same commit at the same version (extensions built apart differ byte for byte)."""
    if node.get("digest") == driver["digest"]:
        return True
    return (
        node.get("version") == driver["version"]
        and driver["git_sha"] not in (None, "unknown")
        and node.get("git_sha") == driver["git_sha"]
        and driver["git_dirty"] is False
        and node.get("git_dirty") is False
    )


def _describe(info: dict[str, Any]) -> str:
    sha = info.get("git_sha") or "unknown"
    git = "no git checkout" if sha == "unknown" else f"git {sha[:10]}"
    if info.get("git_dirty"):
        git += " modified"
    return f"{info.get('version', '?')}, {git}, package {str(info.get('digest', '?'))[:12]}"


def check_node(driver: dict[str, Any], info: dict[str, Any], shipped: bool) -> None:
    """:class:`SluiceError` (one line) if the probe's report ``info`` shows a node that
    lacks sluice or runs other code than the driver."""
    where = f"Ray node {info.get('host', '?')} (python {info.get('executable', '?')})"
    fix = (
        "the package shipped by the driver did not load there"
        if shipped
        else f"let sluice ship itself (unset {SHIP_ENV}) or install this version on every node"
    )
    if "missing" in info:
        if info["missing"].startswith("ModuleNotFoundError") and "'sluice'" in info["missing"]:
            raise SluiceError(f"sluice is not installed on {where}: {fix}")
        raise SluiceError(f"sluice does not work on {where} ({info['missing']}): {fix}")
    if not same_code(driver, info):
        raise SluiceError(
            f"sluice on {where} is {_describe(info)}, not this driver's {_describe(driver)}: "
            f"{fix}"
        )
    if "ffmpeg" in info:
        raise SluiceError(f"{where} has no ffmpeg for the video cells ({info['ffmpeg']})")


def _cache_root() -> Path:
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return Path(base) / "sluice"


def stage_package(driver: dict[str, Any]) -> list[str]:
    """The ``py_modules`` that install this process's sluice on a node: a copy of the
    package (no bytecode) and a ``dist-info`` naming its version, staged once per content
    hash."""
    digest = driver["digest"]
    dist = f"sluice-{__version__}.dist-info"
    home = _cache_root() / "ray-package" / digest[:24]
    if not (home / "ready").is_file():
        home.parent.mkdir(parents=True, exist_ok=True)
        tmp = Path(tempfile.mkdtemp(prefix=".stage-", dir=home.parent))
        try:
            shutil.copytree(package_root(), tmp / "sluice",
                            ignore=shutil.ignore_patterns("__pycache__", "*.pyc"))  # fmt: skip
            (tmp / dist).mkdir()
            (tmp / dist / "METADATA").write_text(
                f"Metadata-Version: 2.1\nName: sluice\nVersion: {__version__}\n", encoding="utf-8"
            )
            (tmp / "ready").write_text(digest, encoding="utf-8")
            shutil.rmtree(home, ignore_errors=True)
            tmp.rename(home)
        finally:
            shutil.rmtree(tmp, ignore_errors=True)
    return [str(home / "sluice"), str(home / dist)]


def _ship_wanted(address: str | None) -> bool:
    raw = os.environ.get(SHIP_ENV, "auto").strip().lower()
    if raw in ("0", "no", "never", "false", "off"):
        return False
    if raw in ("1", "yes", "always", "true", "on"):
        return True
    if raw not in ("", "auto"):
        raise SluiceError(f"{SHIP_ENV} must be 0, 1 or auto, got {raw!r}")
    return address is not None


def import_ray() -> Any:
    """The ``ray`` module, or a one-line :class:`SluiceError` saying how to install it."""
    try:
        import ray
    except ImportError as e:
        raise SluiceError(f"--backend ray needs Ray, which is not installed ({e}): "
                          f"{RAY_HINT}") from None  # fmt: skip
    return ray


def _first_line(text: str) -> str:
    text = re.sub(r"\x1b\[[0-9;]*m", "", text)
    lines = [ln.strip() for ln in text.splitlines() if ln.strip()]
    return lines[0] if lines else "no message"


def _connect(ray: Any, address: str | None, ship: bool) -> bool:
    """Starts or joins Ray, shipping sluice with the job if ``ship``; returns whether it
    shipped. A Ray this process had already initialised is used as it is (not shipped to:
    the probe still checks its nodes)."""
    if ray.is_initialized():
        return False
    import logging

    kwargs: dict[str, Any] = {"log_to_driver": False, "logging_level": logging.WARNING}
    # Ray warns that the extension (14 MiB) is a large file to upload: it is meant to be.
    logging.getLogger("ray._private.runtime_env.packaging").setLevel(logging.ERROR)
    if ship:  # Ray uploads local py_modules directories for a job's runtime_env only
        kwargs["runtime_env"] = {"py_modules": stage_package(identity())}
    if address:
        _check_reachable(address)
    try:
        if address:
            # Ray's core logs each failed attempt to reach the cluster on stderr (20 lines
            # for a token it lacks): kept aside, and given back if the connection works.
            with _stderr_aside() as aside:
                try:
                    ray.init(address=address, **kwargs)
                finally:
                    aside.seek(0)
                    logged = aside.read().decode(errors="replace")
            sys.stderr.write(logged)
        else:
            ray.init(include_dashboard=False, **kwargs)
    except (ConnectionError, ray.exceptions.RayError) as e:
        if not address:
            raise SluiceError(f"cannot start a local Ray ({_first_line(str(e))})") from None
        if "InvalidAuthToken" in logged or isinstance(e, ray.exceptions.AuthenticationError):
            raise SluiceError(f"cannot connect to the Ray cluster at {address}: it wants token "
                              f"authentication (RAY_AUTH_MODE=token on its nodes): "
                              f"{AUTH_HINT}") from None  # fmt: skip
        raise SluiceError(f"cannot connect to the Ray cluster at {address} "
                          f"({_first_line(str(e))})") from None  # fmt: skip
    except (ValueError, RuntimeError) as e:
        raise SluiceError(f"cannot start Ray ({_first_line(str(e))})") from None
    return ship


def _check_reachable(address: str) -> None:
    """A one-line error at once if nothing answers at ``HOST:PORT`` (Ray would retry for
    minutes); other forms of address (``auto``, ``ray://...``) are left to Ray."""
    import socket

    host, sep, port = address.rpartition(":")
    if not sep or not port.isdigit() or "/" in host or not host:
        return
    try:
        with socket.create_connection((host.strip("[]"), int(port)), timeout=10):
            pass
    except OSError as e:
        raise SluiceError(f"cannot connect to the Ray cluster at {address}: "
                          f"{e.strerror or e} (is its head started, with that port?)") from None


@contextlib.contextmanager
def _stderr_aside() -> Iterator[Any]:
    """File descriptor 2 into a temporary file (for a call that starts no process)."""
    sys.stderr.flush()
    saved = os.dup(2)
    with tempfile.TemporaryFile() as f:
        os.dup2(f.fileno(), 2)
        try:
            yield f
        finally:
            sys.stderr.flush()
            os.dup2(saved, 2)
            os.close(saved)


def _ray_error_line(ray: Any, e: BaseException) -> str:
    """A Ray error (a task's exception, a dead worker, a runtime_env that failed) on one
    line, without Ray's traceback."""
    if isinstance(e, ray.exceptions.RayTaskError):
        cause = getattr(e, "cause", None)
        if isinstance(cause, BaseException) and not isinstance(cause, ray.exceptions.RayError):
            return f"{type(cause).__name__}: {_first_line(str(cause)) if str(cause) else ''}"
    name = type(e).__name__
    return f"{name}: {_first_line(str(e))}"


def probe_nodes(ray: Any, shipped: bool, want_ffmpeg: bool) -> None:
    """Checks every alive node's sluice against this driver's (:func:`check_node`)."""
    from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy

    driver = identity()
    probe = ray.remote(num_cpus=0, max_retries=0)(_probe_namespace()["probe"])
    nodes = [n for n in ray.nodes() if n.get("Alive")]
    if not any(n.get("Resources", {}).get("CPU", 0) >= 1 for n in nodes):
        raise SluiceError("the Ray cluster has no node with a CPU to run cells on")
    refs = []
    for n in nodes:
        where = NodeAffinitySchedulingStrategy(n["NodeID"], soft=False)
        refs.append((n, probe.options(scheduling_strategy=where).remote(want_ffmpeg)))
    deadline = time.monotonic() + PROBE_TIMEOUT_S
    for n, ref in refs:
        where = f"Ray node {n.get('NodeManagerHostname', '?')} ({n.get('NodeManagerAddress')})"
        try:
            info = ray.get(ref, timeout=max(1.0, deadline - time.monotonic()))
        except ray.exceptions.GetTimeoutError:
            raise SluiceError(f"{where} did not answer within {PROBE_TIMEOUT_S:g} s") from None
        except ray.exceptions.RayError as e:
            raise SluiceError(f"{where} cannot run sluice: {_ray_error_line(ray, e)}") from None
        check_node(driver, info, shipped=shipped)


# --- inputs ---------------------------------------------------------------------------------


def _read_input(kind: str, path: str) -> bytes:
    """The bytes of an input file, read on the driver; errors as the run would report them."""
    try:
        return Path(path).read_bytes()
    except FileNotFoundError:
        msg = (f"trace file not found: {path}" if kind == "trace"
               else f"{path}: video file not found")  # fmt: skip
    except IsADirectoryError:
        msg = (f"trace path is a directory, not a file: {path}" if kind == "trace"
               else f"{path}: video file not found")  # fmt: skip
    except OSError as e:
        msg = f"cannot read {kind} file {path}: {e.strerror or e}"
    raise SluiceError(msg)


def _input_fields(spec: RunSpec) -> list[tuple[str, str, str]]:
    """(RunSpec field, kind, path) of the spec's input files."""
    out = []
    for field_name in ("trace", "uplink_trace"):
        p = getattr(spec, field_name)
        if p is not None and not is_generated(p):
            out.append((field_name, "trace", p))
    if spec.video is not None:
        out.append(("video", "video", spec.video))
    return out


def node_dir() -> Path:
    """Where a node keeps sluice's inputs, decoded clips and scratch runs (never the
    worker's working directory): ``SLUICE_RAY_NODE_DIR`` in the node's environment (as
    ``ray start`` had it), else ``<temp dir>/sluice-ray-<uid>``."""
    if os.environ.get(NODE_DIR_ENV):
        return Path(os.environ[NODE_DIR_ENV])
    uid = os.getuid() if hasattr(os, "getuid") else "user"
    return Path(tempfile.gettempdir()) / f"sluice-ray-{uid}"


def _materialize(root: Path, sha: str, name: str, data: bytes) -> str:
    path = root / "inputs" / sha / name
    if not path.is_file():
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.with_name(f".{name}.{os.getpid()}.part")
        tmp.write_bytes(data)
        tmp.replace(path)
    return str(path)


def _remove_dead_scratch(root: Path) -> None:
    """Removes the scratch directories (``run-<pid>-*``) of cells whose worker process is gone
    (a cancelled or killed cell never reaches its own clean-up)."""
    for d in root.glob("run-*-*"):
        try:
            pid = int(d.name.split("-")[1])
        except ValueError:
            continue
        if pid != os.getpid() and not results.pid_alive(pid):
            shutil.rmtree(d, ignore_errors=True)


def run_cell(spec: RunSpec, inputs: list[tuple[str, str, str]], *blobs: bytes) -> tuple:
    """A Ray task: runs ``spec`` with its input files ``inputs`` ((field, sha256, the
    driver's path), the contents in ``blobs``) written on this node; errors name the
    driver's paths. Returns ``("ok", RunOutput,
    {file name: bytes}, (seconds, node id))`` or ``("error", one line)``."""
    import ray

    from . import run

    root = node_dir()
    work = None
    changes: dict[str, Any] = {}
    try:
        for (f, sha, path), data in zip(inputs, blobs):
            changes[f] = _materialize(root, sha, Path(path).name, data)
        root.mkdir(parents=True, exist_ok=True)
        _remove_dead_scratch(root)
        work = Path(tempfile.mkdtemp(prefix=f"run-{os.getpid()}-", dir=root))
        spec = replace(spec, **changes, out_dir=str(work / "run"), progress=False,
                       cache_dir=str(root / "video-cache"))  # fmt: skip
        t0 = time.perf_counter()
        out = run.simulate(spec)
        seconds = time.perf_counter() - t0
        # The run's own files (x264's streams) travel as bytes under their names in the run
        # directory; the driver moves them into the result (run.RunOutput.write).
        enc = out.header["config"].get("encoder") or {}
        if enc.get("video_path"):  # relative to the scratch run directory, deleted below
            enc["video_path"] = str((out.run_dir / enc["video_path"]).resolve())
        files = {name: tmp.read_bytes() for name, tmp in sorted(out.files.items())}
        out.discard()
        out.files = {}
        return ("ok", out, files, (seconds, ray.get_runtime_context().get_node_id()))
    except Exception as e:  # one failed cell must not stop the others: report it
        msg = one_line(e)
        for (f, _, path) in inputs:
            if f in changes:
                msg = msg.replace(changes[f], path)
        return ("error", msg)
    finally:
        if work is not None:
            shutil.rmtree(work, ignore_errors=True)


def _write_result(out: Any, files: dict[str, bytes], run_dir: Path) -> Path:
    """Writes a cell's result on the driver as one result: the run's own files under
    temporary names, then :meth:`sluice.run.RunOutput.write` moves them in with the
    records (the header's paths are relative to the run directory already)."""
    try:
        run_dir.mkdir(parents=True, exist_ok=True)
    except OSError as e:
        raise SluiceError(f"cannot create output directory {run_dir}: {e.strerror or e}") from None
    out.files = {}
    try:
        for name, data in files.items():
            tmp = results.temp_path(run_dir / name)
            out.files[name] = tmp
            tmp.write_bytes(data)
    except BaseException:
        out.discard()
        raise
    return Path(out.write(run_dir))


# --- running --------------------------------------------------------------------------------

#: (seconds in :func:`sluice.run.simulate`, Ray node id) of each finished cell of the
#: last :func:`run_specs` call (None: failed): for the benchmark of Ray's overhead per cell
#: and for tests.
last_cells: list[tuple[float, str] | None] = []


def run_specs(
    specs: list[RunSpec],
    bar: Any,
    keep_going: bool,
    *,
    jobs: int | None = None,
    address: str | None = None,
) -> list[Any]:
    """Runs ``specs`` (their ``out_dir`` absolute, on this machine) as Ray tasks; returns,
    in order, each run directory (``str``), or with ``keep_going`` ``(True, dir)`` /
    ``(False, one-line error)``. Without ``keep_going`` the first failure cancels the rest
    and raises a :class:`SluiceError`."""
    ray = import_ray()
    address = address or os.environ.get("RAY_ADDRESS") or None
    shipped = _connect(ray, address, _ship_wanted(address))
    probe_nodes(ray, shipped, want_ffmpeg=any(s.video for s in specs))

    # SPREAD: cells go to every node, not first to fill the driver's.
    task = ray.remote(num_cpus=1, max_retries=0, scheduling_strategy="SPREAD")(run_cell)
    blobs: dict[str, Any] = {}  # sha256 -> object ref, one put per distinct content
    out: list[Any] = [None] * len(specs)
    last_cells[:] = [None] * len(specs)
    pending: dict[Any, int] = {}
    cap = jobs or len(specs)
    nxt = 0

    def fail(i: int, msg: str) -> None:
        if not keep_going:
            raise SluiceError(f"run {specs[i].scheme} ({specs[i].out_dir}) failed: {msg}")
        out[i] = (False, msg)
        bar.update(1)

    def submit(i: int) -> None:
        spec = specs[i]
        names, refs = [], []
        try:
            for field_name, kind, path in _input_fields(spec):
                data = _read_input(kind, path)
                sha = hashlib.sha256(data).hexdigest()
                if sha not in blobs:
                    blobs[sha] = ray.put(data)
                names.append((field_name, sha, path))
                refs.append(blobs[sha])
        except SluiceError as e:
            fail(i, one_line(e))
            return
        pending[task.remote(spec, names, *refs)] = i

    try:
        while nxt < len(specs) or pending:
            while nxt < len(specs) and len(pending) < cap:
                submit(nxt)
                nxt += 1
            if not pending:
                continue
            ready, _ = ray.wait(list(pending), num_returns=1)
            for ref in ready:
                i = pending.pop(ref)
                try:
                    res = ray.get(ref)
                except ray.exceptions.RayError as e:
                    fail(i, _ray_error_line(ray, e))
                    continue
                if res[0] != "ok":
                    fail(i, res[1])
                    continue
                _, result, files, where = res
                try:
                    run_dir = _write_result(result, files, Path(specs[i].resolved_out_dir()))
                except Exception as e:  # noqa: BLE001 - as on the pool: this cell fails
                    fail(i, one_line(e))
                    continue
                last_cells[i] = where
                out[i] = (True, str(run_dir)) if keep_going else str(run_dir)
                bar.update(1)
    except BaseException:
        for ref in pending:
            ray.cancel(ref, force=True)
        raise
    return out

