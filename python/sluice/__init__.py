"""Sluice: a reference stack for low-latency real-time video, compared on one pipeline.

The simulator is the Rust extension ``sluice._core``; this package is the front end: run
configs and config paths (:mod:`sluice.config`), trace loading, running one or many
(:mod:`sluice.run`), experiment plans and their results tables (:mod:`sluice.plan`,
:mod:`sluice.experiments`), the versioned result format, plots, analysis and the ``sluice``
CLI.
"""

from __future__ import annotations

from .errors import SluiceError

try:
    from importlib.metadata import PackageNotFoundError, version

    __version__ = version("sluice")
except PackageNotFoundError:  # running from a source tree without an install
    __version__ = "0.0.0+unknown"

__all__ = ["SluiceError", "__version__"]
