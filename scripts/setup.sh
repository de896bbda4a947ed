#!/usr/bin/env bash
# Installs what Sluice needs on a Debian machine, skipping what already works.
#
# Every prerequisite is checked by using it (scripts/prereqs.py): a C program is built and run
# against libx264, libclang is loaded the way bindgen finds it, a venv is created with pip,
# ffmpeg is asked for libvmaf. The Debian packages of the checks that fail are installed and
# the checks run again; anything still broken stops the setup with one line saying what to do.
# Rust (>= 1.82, from rustup) and Python 3 must be present; Debian's Rust is too old.
set -euo pipefail
venv=${1:-.venv}
here=$(cd "$(dirname "$0")" && pwd)
export PATH="$HOME/.cargo/bin:$PATH"

sudo_cmd=""
[ "$(id -u)" -ne 0 ] && sudo_cmd="sudo"
apt_install() {
    echo "setup: installing Debian packages: $*"
    $sudo_cmd apt-get update -qq
    DEBIAN_FRONTEND=noninteractive $sudo_cmd apt-get install -y -qq --no-install-recommends "$@" \
        >/dev/null
}

# The checks are Python (standard library only); everything else follows from them.
if ! command -v python3 >/dev/null 2>&1; then
    apt_install python3
fi

missing=$(python3 "$here/prereqs.py" missing-packages)
if [ -n "$missing" ]; then
    # shellcheck disable=SC2086 # a list of package names
    apt_install $missing
fi
# clippy (for `make test`) comes from rustup, not Debian.
if ! cargo clippy --version >/dev/null 2>&1 && command -v rustup >/dev/null 2>&1; then
    echo "setup: adding clippy to the Rust toolchain"
    rustup component add clippy >/dev/null
fi
echo "setup: checking the system"
if ! python3 "$here/prereqs.py" system; then
    exit 1
fi

if [ ! -x "$venv/bin/python" ]; then
    echo "setup: creating $venv"
    python3 -m venv "$venv"
fi
"$venv/bin/python" -m pip install -q --upgrade pip >/dev/null
"$venv/bin/python" -m pip install -q \
    "maturin>=1.5,<2" "numpy>=1.24" "pandas>=2.0" "matplotlib>=3.7" "tqdm>=4.60" \
    "imageio-ffmpeg>=0.5" "tomli>=1.1; python_version < '3.11'" "pytest>=7" "ruff>=0.4" \
    "ray>=2.9"
echo "setup: checking $venv"
if ! "$venv/bin/python" "$here/prereqs.py" venv; then
    exit 1
fi
echo "setup: ok ($(cargo --version), $("$venv/bin/python" --version))"
