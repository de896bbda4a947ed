#!/usr/bin/env bash
# Installs what Sluice needs on a Debian machine, skipping what is already there:
# a C toolchain, Rust (cargo >= 1.82), Python 3 with venv, libx264-dev, pkg-config and
# libclang (for x264's bindings), and the Python packages (imageio-ffmpeg brings ffmpeg).
set -euo pipefail
venv=${1:-.venv}

need_apt=()
command -v cc >/dev/null 2>&1 || need_apt+=(build-essential)
command -v python3 >/dev/null 2>&1 || need_apt+=(python3)
python3 -c 'import venv, ensurepip' >/dev/null 2>&1 || need_apt+=(python3-venv)
command -v git >/dev/null 2>&1 || need_apt+=(git)
# libx264 (Debian's build 164, as the seeds used) and what its bindings are generated with.
command -v pkg-config >/dev/null 2>&1 || need_apt+=(pkg-config)
pkg-config --exists x264 2>/dev/null || need_apt+=(libx264-dev)
ls /usr/lib/llvm-*/lib/libclang*.so* >/dev/null 2>&1 || ls /usr/lib/x86_64-linux-gnu/libclang*.so* >/dev/null 2>&1 || need_apt+=(libclang-dev)
if ! command -v cargo >/dev/null 2>&1 && [ ! -x "$HOME/.cargo/bin/cargo" ]; then
    need_apt+=(cargo rustc)
fi
if [ ${#need_apt[@]} -gt 0 ]; then
    echo "setup: installing Debian packages: ${need_apt[*]}"
    sudo_cmd=""
    [ "$(id -u)" -ne 0 ] && sudo_cmd="sudo"
    $sudo_cmd apt-get update -qq
    DEBIAN_FRONTEND=noninteractive $sudo_cmd apt-get install -y -qq "${need_apt[@]}"
fi

export PATH="$HOME/.cargo/bin:$PATH"
rust_minor=$(cargo --version | sed -E 's/^cargo 1\.([0-9]+).*/\1/')
if [ "$rust_minor" -lt 82 ]; then
    echo "setup: cargo $(cargo --version) is too old; Sluice needs Rust >= 1.82 (rustup.rs)" >&2
    exit 1
fi

if [ ! -x "$venv/bin/python" ]; then
    echo "setup: creating $venv"
    python3 -m venv "$venv"
fi
"$venv/bin/python" -m pip install -q --upgrade pip >/dev/null
"$venv/bin/python" -m pip install -q \
    "maturin>=1.5,<2" "numpy>=1.24" "pandas>=2.0" "matplotlib>=3.7" "tqdm>=4.60" \
    "imageio-ffmpeg>=0.5" "pytest>=7" "ruff>=0.4"
echo "setup: ok ($(cargo --version), $("$venv/bin/python" --version))"
