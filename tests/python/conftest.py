"""Shared helpers for the Python tests: run the CLI in-process and capture its output."""

from __future__ import annotations

from dataclasses import dataclass

import pytest
from sluice.cli import main


@dataclass
class Result:
    code: int
    out: str
    err: str

    def assert_one_line_error(self, *needles: str) -> None:
        """Exit status 2 and exactly one ``sluice: error: ...`` line containing ``needles``."""
        assert self.code == 2, self
        lines = self.err.strip().splitlines()
        assert len(lines) == 1, self.err
        assert lines[0].startswith("sluice: error: "), self.err
        assert "Traceback" not in self.err
        for n in needles:
            assert n in lines[0], (n, lines[0])


@pytest.fixture
def sluice(capsys):
    """Calls ``sluice ARGS...`` in-process; returns exit code, stdout and stderr."""

    def run(*argv: str) -> Result:
        capsys.readouterr()
        try:
            code = main(list(argv))
        except SystemExit as e:  # argparse errors and --help
            code = int(e.code or 0)
        captured = capsys.readouterr()
        return Result(code, captured.out, captured.err)

    return run
