"""The last stage of a run: its result. :class:`RunOutput` holds what a run produced until
:meth:`RunOutput.write` writes it as one versioned result (:func:`sluice.results.write_run`)."""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from .. import results
from ..errors import SluiceError


@dataclass
class RunOutput:
    """What a run produced, before it is written (:meth:`write`): the header's fields (for
    :func:`sluice.results.make_header`, which adds the version and git SHA of the process
    that writes) and the records. ``files``: what the run wrote itself (x264's
    ``stream.264`` and its index, ``delivered.264``), by name in the run directory, each
    still under its temporary name until :meth:`write` moves it in. ``quality_error``: why
    quality scoring failed, if it did (the run is still written, then this is raised)."""

    run_dir: Path
    header: dict[str, Any]
    frames: list[dict[str, Any]]
    samples: list[dict[str, Any]]
    summary: dict[str, Any]
    quality: list[dict[str, Any]]
    skips: list[dict[str, Any]]
    files: dict[str, Path] = field(default_factory=dict)
    quality_error: str | None = None

    def write(self, run_dir: str | os.PathLike[str] | None = None,
              raise_quality_error: bool = True) -> Path:  # fmt: skip
        """Writes the run into ``run_dir`` (default: the run's) as one result
        (:func:`sluice.results.write_run`: ``run.jsonl``, ``summary.json``, ``files``, the
        manifest). Raises :class:`SluiceError` after writing if quality scoring failed
        (unless ``raise_quality_error`` is false: the summary says it either way)."""
        header = results.make_header(**self.header)
        if self.quality_error:  # said in the result too, so that a matrix runs it again
            self.summary = {**self.summary, results.QUALITY_ERROR_KEY: self.quality_error}
        try:
            out = results.write_run(
                run_dir or self.run_dir, header, self.frames, self.samples, self.summary,
                quality=self.quality, skips=self.skips, extra=self.files,
            )  # fmt: skip
        finally:
            self.discard()
        if self.quality_error and raise_quality_error:
            raise SluiceError(f"run written to {out} without quality scores: {self.quality_error}")
        return out

    def discard(self) -> None:
        """Removes the run's own files that were not moved into a result."""
        for tmp in self.files.values():
            tmp.unlink(missing_ok=True)
