"""A report's provenance names the checkout as it was when the report command started: the
figures and text the report rewrites do not make it say "dirty tree"."""

from __future__ import annotations

from sluice import analysis, results


def test_the_report_command_reads_the_checkout_before_it_writes(monkeypatch):
    states = iter([("abc123", False), ("abc123", True)])  # clean, then its own files changed
    monkeypatch.setattr(results, "git_info", lambda: next(states))

    def write(args, command):
        return "\n".join(analysis.provenance(["abc123"], command))

    lines = []
    monkeypatch.setattr("builtins.print", lambda s: lines.append(s))
    assert analysis.report_main("python -m sluice.analysis.x", ["a"], lambda a: a, write) == 0
    assert lines[0].startswith("- git: `abc123`; runs produced at `abc123` (1 runs)")
    assert "dirty" not in lines[0]
    # Outside a report command, provenance asks git itself (here: the second, dirty state).
    assert "(dirty tree)" in analysis.provenance(["abc123"])[0]
