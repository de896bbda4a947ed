#!/usr/bin/env python3
"""Checks that every build prerequisite of Sluice *works*, and names the Debian package that
provides each one that does not.

A check never trusts a file name: it compiles and runs a C program against libx264, loads
libclang the way bindgen does and calls into it, creates a virtual environment with pip,
runs ffmpeg and asks it for libvmaf. ``scripts/setup.sh`` installs the packages of the
checks that fail and then runs them again.

Usage (standard library only, Python >= 3.9, so it runs before the venv exists):

    python3 scripts/prereqs.py system            # report; exit 1 if something fails
    python3 scripts/prereqs.py missing-packages  # Debian packages of the failing checks
    .venv/bin/python scripts/prereqs.py venv     # the Python packages and ffmpeg in a venv
"""

from __future__ import annotations

import argparse
import ctypes
import glob
import os
import re
import shutil
import subprocess
import sys
import tempfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable

#: Oldest Rust that builds Sluice (the workspace uses let-else chains and 2021 edition
#: features stabilised by 1.82).
MIN_RUST_MINOR = 82
#: libx264 build the x264 bindings need (sluice-x264/build.rs asks pkg-config for >= 0.148).
MIN_X264_BUILD = 148
#: Python the project supports (pyproject.toml: requires-python).
MIN_PYTHON = (3, 9)


@dataclass
class Result:
    """The outcome of one check: ``ok``, and what was found or why it failed."""

    ok: bool
    detail: str


@dataclass
class Check:
    name: str
    #: Debian package that provides it, or None when setup cannot install it.
    package: str | None
    run: Callable[[], Result]
    #: What to do when it fails and no package can fix it.
    hint: str = ""
    extra: dict = field(default_factory=dict)


def _run(cmd: list[str], timeout: float = 120, **kw) -> subprocess.CompletedProcess:
    return subprocess.run(cmd, capture_output=True, text=True, timeout=timeout, **kw)


def _first_line(text: str) -> str:
    lines = [ln.strip() for ln in (text or "").splitlines() if ln.strip()]
    return lines[0] if lines else ""


# --- C toolchain, pkg-config, libx264 -------------------------------------------------------


def c_compiler_works(cc: str | None = None) -> Result:
    """Compiles, links and runs a C program with ``$CC`` (default ``cc``), as the Rust build
    does for its linker and build scripts."""
    cc = cc or os.environ.get("CC") or "cc"
    with tempfile.TemporaryDirectory(prefix="sluice-prereq-") as tmp:
        src, exe = Path(tmp, "t.c"), Path(tmp, "t")
        src.write_text("#include <stdio.h>\nint main(void){puts(\"ok\");return 0;}\n")
        try:
            p = _run([cc, str(src), "-o", str(exe)])
        except (OSError, subprocess.SubprocessError) as e:
            return Result(False, f"cannot run the C compiler {cc!r}: {e}")
        if p.returncode != 0:
            return Result(False, f"{cc} cannot build a program: {_first_line(p.stderr)}")
        try:
            out = _run([str(exe)])
        except (OSError, subprocess.SubprocessError) as e:
            return Result(False, f"a program built by {cc} does not run: {e}")
        if out.stdout.strip() != "ok":
            return Result(False, f"a program built by {cc} does not run")
    return Result(True, f"{cc} builds and runs C programs")


def pkg_config_works(env: dict | None = None) -> Result:
    try:
        p = _run(["pkg-config", "--version"], env=env)
    except (OSError, subprocess.SubprocessError) as e:
        return Result(False, f"pkg-config does not run: {e}")
    if p.returncode != 0:
        return Result(False, "pkg-config does not run")
    return Result(True, f"pkg-config {p.stdout.strip()}")


X264_PROBE = r"""
#include <stdint.h>
#include <stdio.h>
#include <x264.h>
int main(void) {
    x264_param_t p;
    if (x264_param_default_preset(&p, "superfast", "zerolatency") < 0) return 2;
    p.i_width = 64; p.i_height = 64; p.i_csp = X264_CSP_I420;
    x264_t *h = x264_encoder_open(&p);
    if (!h) return 3;
    x264_encoder_close(h);
    printf("%d\n", X264_BUILD);
    return 0;
}
"""


def x264_works(env: dict | None = None, cc: str | None = None) -> Result:
    """Builds a program against libx264 with the flags pkg-config gives (as build.rs does),
    runs it, opens an encoder, and checks the build number bindgen needs."""
    cc = cc or os.environ.get("CC") or "cc"
    try:
        flags = _run(["pkg-config", "--cflags", "--libs", "x264"], env=env)
    except (OSError, subprocess.SubprocessError) as e:
        return Result(False, f"pkg-config does not run: {e}")
    if flags.returncode != 0:
        return Result(False, f"pkg-config does not know x264: {_first_line(flags.stderr)}")
    with tempfile.TemporaryDirectory(prefix="sluice-prereq-") as tmp:
        src, exe = Path(tmp, "x.c"), Path(tmp, "x")
        src.write_text(X264_PROBE)
        try:
            p = _run([cc, str(src), "-o", str(exe), *flags.stdout.split()], env=env)
        except (OSError, subprocess.SubprocessError) as e:
            return Result(False, f"cannot run the C compiler {cc!r}: {e}")
        if p.returncode != 0:
            return Result(False, f"cannot build against libx264: {_first_line(p.stderr)}")
        try:
            out = _run([str(exe)], env=env)
        except (OSError, subprocess.SubprocessError) as e:
            return Result(False, f"a program linked to libx264 does not run: {e}")
        if out.returncode != 0:
            return Result(False, f"libx264 does not open an encoder (exit {out.returncode})")
    build = int(out.stdout.strip() or 0)
    if build < MIN_X264_BUILD:
        return Result(False, f"libx264 build {build} is older than {MIN_X264_BUILD}")
    return Result(True, f"libx264 build {build} encodes")


# --- libclang, as bindgen finds it ----------------------------------------------------------

#: clang-sys (bindgen's loader, `runtime` feature) on Linux: these file-name patterns ...
LIBCLANG_PATTERNS = ("libclang.so", "libclang-*.so", "libclang.so.*", "libclang-*.so.*")
#: ... in these directories when neither LIBCLANG_PATH nor llvm-config says otherwise.
LIBCLANG_DIRS = (
    "/usr/local/llvm*/lib*",
    "/usr/local/lib*/*/*",
    "/usr/local/lib*/*",
    "/usr/local/lib*",
    "/usr/lib*/*/*",
    "/usr/lib*/*",
    "/usr/lib*",
)


def libclang_search_dirs(env: dict | None = None) -> list[Path]:
    """The directories clang-sys searches, in its order: ``LIBCLANG_PATH`` alone if set,
    else ``llvm-config --prefix``'s bin, lib and lib64, then the fixed globs."""
    env = os.environ if env is None else env
    if env.get("LIBCLANG_PATH"):
        p = Path(env["LIBCLANG_PATH"])
        return [p.parent] if p.is_file() else [p]
    dirs: list[Path] = []
    llvm_config = env.get("LLVM_CONFIG_PATH") or "llvm-config"
    try:
        out = _run([llvm_config, "--prefix"], timeout=20)
        if out.returncode == 0 and out.stdout.strip():
            prefix = Path(out.stdout.splitlines()[0].strip())
            dirs += [prefix / "bin", prefix / "lib", prefix / "lib64"]
    except (OSError, subprocess.SubprocessError):
        pass
    for pattern in LIBCLANG_DIRS:
        dirs += [Path(d) for d in sorted(glob.glob(pattern)) if os.path.isdir(d)]
    return dirs


def libclang_candidates(dirs: list[Path]) -> list[Path]:
    """Files bindgen would consider: the patterns above, minus ``libclang-cpp`` (clang-sys
    skips it: it is Clang's C++ library, not the C API bindgen calls)."""
    seen: set[Path] = set()
    out = []
    for d in dirs:
        for pattern in LIBCLANG_PATTERNS:
            for f in sorted(glob.glob(str(d / pattern))):
                path = Path(f)
                if "-cpp." in path.name or path in seen:
                    continue
                seen.add(path)
                out.append(path)
    return out


def _elf64(path: Path) -> bool:
    try:
        with open(path, "rb") as f:
            head = f.read(5)
    except OSError:
        return False
    return head[:4] == b"\x7fELF" and head[4] == 2


def libclang_loads(path: Path) -> bool:
    """Whether ``path`` is a 64-bit ELF library that loads and exports libclang's C API."""
    if not _elf64(path):
        return False
    try:
        lib = ctypes.CDLL(str(path))
        return hasattr(lib, "clang_createIndex") and hasattr(lib, "clang_getClangVersion")
    except OSError:
        return False


def libclang_works(dirs: list[Path] | None = None) -> Result:
    """A libclang bindgen finds (same search as clang-sys) and can load and call."""
    dirs = libclang_search_dirs() if dirs is None else dirs
    candidates = libclang_candidates(dirs)
    for c in candidates:
        if libclang_loads(c):
            return Result(True, f"bindgen can load {c}")
    if candidates:
        names = ", ".join(str(c) for c in candidates[:4])
        return Result(False, f"no loadable libclang (found but unusable: {names})")
    return Result(False, "no libclang.so or libclang-<N>.so where bindgen looks")


# --- Python, git, Rust ----------------------------------------------------------------------


def python_works(python: str | None = None) -> Result:
    python = python or sys.executable
    try:
        p = _run([python, "-c", "import sys; print('%d.%d' % sys.version_info[:2])"])
    except (OSError, subprocess.SubprocessError) as e:
        return Result(False, f"{python} does not run: {e}")
    if p.returncode != 0:
        return Result(False, f"{python} does not run")
    major, minor = (int(x) for x in p.stdout.strip().split("."))
    if (major, minor) < MIN_PYTHON:
        return Result(False, f"Python {major}.{minor} is older than 3.{MIN_PYTHON[1]}")
    return Result(True, f"Python {major}.{minor}")


def venv_works(python: str | None = None) -> Result:
    """Creates a throwaway virtual environment and runs pip in it (Debian ships venv and
    ensurepip apart from python3, in python3-venv)."""
    python = python or sys.executable
    with tempfile.TemporaryDirectory(prefix="sluice-prereq-") as tmp:
        env_dir = Path(tmp, "venv")
        try:
            p = _run([python, "-m", "venv", str(env_dir)], timeout=300)
        except (OSError, subprocess.SubprocessError) as e:
            return Result(False, f"{python} -m venv does not run: {e}")
        if p.returncode != 0:
            return Result(False, f"{python} -m venv fails: {_first_line(p.stdout + p.stderr)}")
        try:
            pip = _run([str(env_dir / "bin" / "python"), "-m", "pip", "--version"])
        except (OSError, subprocess.SubprocessError) as e:
            return Result(False, f"pip does not run in a new venv: {e}")
        if pip.returncode != 0:
            return Result(False, "a new venv has no working pip")
    return Result(True, "venv with pip")


def git_works() -> Result:
    try:
        p = _run(["git", "--version"])
    except (OSError, subprocess.SubprocessError) as e:
        return Result(False, f"git does not run: {e}")
    return Result(p.returncode == 0, p.stdout.strip() or "git does not run")


def _cargo() -> str | None:
    found = shutil.which("cargo")
    if found:
        return found
    home = Path.home() / ".cargo" / "bin" / "cargo"
    return str(home) if home.is_file() else None


def rust_works() -> Result:
    cargo = _cargo()
    if cargo is None:
        return Result(False, "cargo not found")
    try:
        p = _run([cargo, "--version"])
    except (OSError, subprocess.SubprocessError) as e:
        return Result(False, f"cargo does not run: {e}")
    m = re.match(r"cargo 1\.(\d+)", p.stdout)
    if p.returncode != 0 or not m:
        return Result(False, f"cargo does not run: {_first_line(p.stderr)}")
    if int(m.group(1)) < MIN_RUST_MINOR:
        return Result(False, f"{p.stdout.strip()} is older than 1.{MIN_RUST_MINOR}")
    return Result(True, p.stdout.strip())


def clippy_works() -> Result:
    cargo = _cargo()
    if cargo is None:
        return Result(False, "cargo not found")
    try:
        p = _run([cargo, "clippy", "--version"])
    except (OSError, subprocess.SubprocessError) as e:
        return Result(False, f"cargo clippy does not run: {e}")
    if p.returncode != 0:
        return Result(False, "cargo clippy is not installed")
    return Result(True, p.stdout.strip())


# --- Chromium (the browser in the loop) -----------------------------------------------------


def chromium_works() -> Result:
    """Debian's Chromium renders a page headless (as ``sluice browser run`` starts it) and
    has WebRTC: the page reports ``RTCPeerConnection`` into its DOM, which Chromium dumps."""
    exe = os.environ.get("SLUICE_CHROMIUM") or shutil.which("chromium") or shutil.which(
        "chromium-browser")  # fmt: skip
    if not exe:
        return Result(False, "chromium not found")
    page = ("data:text/html,<body><script>document.body.textContent='sluice-'+"
            "(typeof RTCPeerConnection)</script></body>")  # fmt: skip
    with tempfile.TemporaryDirectory(prefix="sluice-prereq-") as profile:
        try:
            p = _run([exe, "--headless=new", "--no-sandbox", "--disable-gpu",
                      f"--user-data-dir={profile}", "--dump-dom", page], timeout=120)  # fmt: skip
        except (OSError, subprocess.SubprocessError) as e:
            return Result(False, f"chromium does not run: {e}")
    if "sluice-function" not in p.stdout:
        return Result(False, f"headless chromium did not render a page with WebRTC "
                             f"({_first_line(p.stderr) or 'no output'})")  # fmt: skip
    version = _run([exe, "--version"]).stdout.strip().splitlines()
    return Result(True, (version[-1] if version else "chromium") + " renders pages headless")


def system_checks() -> list[Check]:
    return [
        Check("C compiler", "build-essential", c_compiler_works),
        Check("pkg-config", "pkg-config", pkg_config_works),
        Check("libx264", "libx264-dev", x264_works),
        Check("libclang (bindgen)", "libclang-dev", libclang_works),
        Check("Python", "python3", python_works),
        Check("Python venv", "python3-venv", venv_works),
        Check("git", "git", git_works),
        Check("Chromium (browser runs)", "chromium", chromium_works),
        Check(
            "Rust", None, rust_works,
            hint=f"Sluice needs Rust >= 1.{MIN_RUST_MINOR} (Debian's is too old): "
            "install it with rustup, https://rustup.rs",
        ),  # fmt: skip
        Check(
            "clippy", None, clippy_works,
            hint="make test runs clippy: rustup component add clippy",
        ),  # fmt: skip
    ]


# --- inside the virtual environment ---------------------------------------------------------

#: Import name -> what it is for.
VENV_MODULES = {
    "numpy": "results",
    "pandas": "results",
    "matplotlib": "plots",
    "tqdm": "progress bars",
    "imageio_ffmpeg": "ffmpeg for real video and quality",
    # TOML for experiment plans: the standard library's from Python 3.11, tomli before.
    ("tomllib" if sys.version_info >= (3, 11) else "tomli"): "experiment plans",
    "pytest": "make test",
    "ray": "--backend ray and its tests",
}


def module_works(name: str) -> Result:
    try:
        code = f"import {name}; print(getattr({name}, '__version__', ''))"
        p = _run([sys.executable, "-c", code])
    except (OSError, subprocess.SubprocessError) as e:
        return Result(False, f"cannot import {name}: {e}")
    if p.returncode != 0:
        last = (p.stderr.strip().splitlines() or [""])[-1]
        return Result(False, f"cannot import {name}: {last}")
    return Result(True, f"{name} {p.stdout.strip()}".strip())


def ffmpeg_vmaf_works(ffmpeg: str | None = None) -> Result:
    """imageio-ffmpeg's ffmpeg runs and has the libvmaf, ssim and psnr filters."""
    if ffmpeg is None:
        try:
            import imageio_ffmpeg  # type: ignore[import-not-found]

            ffmpeg = imageio_ffmpeg.get_ffmpeg_exe()
        except Exception as e:  # noqa: BLE001 (any failure means: no usable ffmpeg)
            return Result(False, f"imageio-ffmpeg has no ffmpeg: {e}")
    try:
        p = _run([ffmpeg, "-hide_banner", "-filters"])
    except (OSError, subprocess.SubprocessError) as e:
        return Result(False, f"ffmpeg does not run: {e}")
    if p.returncode != 0:
        return Result(False, "ffmpeg does not run")
    names = {ln.split()[1] for ln in p.stdout.splitlines() if len(ln.split()) > 2}
    missing = [f for f in ("libvmaf", "ssim", "psnr") if f not in names]
    if missing:
        return Result(False, f"{ffmpeg} lacks the {', '.join(missing)} filter(s)")
    return Result(True, f"{ffmpeg} has libvmaf")


def tool_works(tool: str) -> Result:
    exe = Path(sys.executable).parent / tool
    try:
        p = _run([str(exe), "--version"])
    except (OSError, subprocess.SubprocessError) as e:
        return Result(False, f"{tool} does not run: {e}")
    return Result(p.returncode == 0, p.stdout.strip() or f"{tool} does not run")


def venv_checks() -> list[Check]:
    checks = [Check(f"Python: {m}", None, lambda m=m: module_works(m)) for m in VENV_MODULES]
    checks.append(Check("ffmpeg with libvmaf", None, ffmpeg_vmaf_works))
    checks.append(Check("maturin", None, lambda: tool_works("maturin")))
    checks.append(Check("ruff", None, lambda: tool_works("ruff")))
    return checks


# --- command line ---------------------------------------------------------------------------


def run_checks(checks: list[Check], quiet: bool = False) -> list[tuple[Check, Result]]:
    results = []
    for c in checks:
        try:
            r = c.run()
        except Exception as e:  # noqa: BLE001 (a check that crashes is a failed check)
            r = Result(False, f"check failed: {e}")
        results.append((c, r))
        if not quiet:
            mark = "ok  " if r.ok else "FAIL"
            print(f"  {mark} {c.name}: {r.detail}")
    return results


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("what", choices=("system", "missing-packages", "venv"))
    args = ap.parse_args(argv)
    if args.what == "missing-packages":
        failed = run_checks(system_checks(), quiet=True)
        pkgs = [c.package for c, r in failed if not r.ok and c.package]
        print(" ".join(dict.fromkeys(pkgs)))
        return 0
    checks = system_checks() if args.what == "system" else venv_checks()
    results = run_checks(checks)
    bad = [(c, r) for c, r in results if not r.ok]
    for c, r in bad:
        fix = f"install the Debian package {c.package}" if c.package else c.hint
        print(f"setup: {c.name} does not work ({r.detail}){': ' + fix if fix else ''}",
              file=sys.stderr)  # fmt: skip
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
