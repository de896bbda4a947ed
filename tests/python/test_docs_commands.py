"""The commands and links the documentation shows (README.md and docs/*.md) work.

* Every fenced block whose info string is ``sh runnable`` is run: a file's blocks in order,
  as one bash script (``set -euo pipefail``) from the repository root with the virtualenv's
  ``bin`` first on ``PATH``, within :data:`TIMEOUT_S` per file. Later blocks may use earlier
  outputs. What they write goes under ``results/docs-example/<file stem>/``, which is removed
  first. A failure reports the failing command and its stderr.
* Every ``sluice ...`` line of any ``sh`` block, runnable or not, is parsed by the CLI's
  argument parser (:func:`sluice.cli.build_parser`) without running it, so a renamed or
  removed flag fails here. Placeholders (``T``, ``CLIP``, ``DIR``, ``N``, ...; optional groups
  in brackets, ``a|b`` alternatives in them) are replaced by dummy values first.
* Relative links between these files point to files (and headings) that exist.

``docs/results/*.md`` are generated reports, not checked here.
"""

from __future__ import annotations

import contextlib
import io
import os
import re
import shlex
import shutil
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import pytest
from sluice.cli import build_parser

REPO = Path(__file__).resolve().parents[2]
DOCS = [REPO / "README.md", *sorted((REPO / "docs").glob("*.md"))]
EXAMPLES = "results/docs-example"
TIMEOUT_S = 120

#: Placeholder words of synopsis lines and the dummy values they are parsed with.
PLACEHOLDERS = {
    "T": "data/traces/step-30-3.mahi",
    "U": "data/traces/constant-12.mahi",
    "CLIP": "data/videos/bbb-intro_1280x720_24fps_10s.mp4",
    "DIR": "results/x",
    "RUN_DIR": "results/x",
    "FILE": "x.json",
    "FILE.json": "x.json",
    "PLAN.toml": "plan.toml",
    "SPEC": "constant:12",
    "S": "10",
    "N": "2",
    "P": "0.01",
    "D": "20",
    "B": "100000",
    "F": "30",
    "W": "640",
    "K": "2500",
    "MS": "5",
    "LIST": "1-3",
    "IP": "127.0.0.1",
    "PORT": "5004",
    "IP:PORT": "127.0.0.1:5000",
    "HOST:PORT": "127.0.0.1:6379",
    "START:END": "5:7",
    "PATH=VALUE": "duration_s=10",
    "A,B,C": "webrtc,cbr",
    "SCHEME,...": "webrtc",
}
#: Shell tokens that end a command (what follows is not the command's arguments).
SHELL_OPERATORS = ("|", "||", "&&", ";", "&", ">", ">>", "<", "2>", "2>&1", "&>")
#: Commands that write results, and the option that says where.
WRITERS = {("run",): "--out", ("compare",): "--out", ("live", "run"): "--out",
           ("browser", "run"): "--out", ("matrix",): "--results"}  # fmt: skip


@dataclass(frozen=True)
class Block:
    path: Path
    line: int  # 1-based line of the opening fence
    info: str
    text: str

    @property
    def runnable(self) -> bool:
        words = self.info.split()
        return bool(words) and words[0] == "sh" and "runnable" in words[1:]

    @property
    def where(self) -> str:
        return f"{self.path.relative_to(REPO)}:{self.line}"


_FENCE = re.compile(r"^(\s*)(`{3,}|~{3,})(.*)$")


def blocks(path: Path) -> list[Block]:
    """The fenced code blocks of a Markdown file, dedented by their fence's indentation."""
    out: list[Block] = []
    lines = path.read_text(encoding="utf-8").splitlines()
    i = 0
    while i < len(lines):
        m = _FENCE.match(lines[i])
        if not m or "`" in m.group(3):
            i += 1
            continue
        indent, fence, info = len(m.group(1)), m.group(2), m.group(3).strip()
        body: list[str] = []
        j = i + 1
        while j < len(lines) and not re.fullmatch(rf"\s*{re.escape(fence)}\s*", lines[j]):
            body.append(lines[j][indent:] if lines[j][:indent].isspace() else lines[j])
            j += 1
        out.append(Block(path, i + 1, info, "\n".join(body) + "\n"))
        i = j + 1
    return out


def sh_blocks(path: Path) -> list[Block]:
    return [b for b in blocks(path) if b.info.split()[:1] == ["sh"]]


def _open_quote(line: str) -> bool:
    try:
        shlex.split(line, comments=True)
    except ValueError:
        return True
    return False


def commands(text: str) -> list[tuple[int, str]]:
    """The logical command lines of a shell block, each with the index of its first line:
    continuations and quoted strings over several lines joined, heredoc bodies and comment
    lines left out."""
    out: list[tuple[int, str]] = []
    lines = text.splitlines()
    i = 0
    while i < len(lines):
        start, line = i, lines[i]
        while (line.endswith("\\") or _open_quote(line)) and i + 1 < len(lines):
            i += 1
            if line.endswith("\\"):
                line = line[:-1] + " " + lines[i].strip()
            else:
                line += "\n" + lines[i]
        i += 1
        here = re.search(r"<<-?\s*(['\"]?)(\w+)\1", line)
        if here:  # skip the heredoc's body up to its terminator
            while i < len(lines) and lines[i].strip() != here.group(2):
                i += 1
            i += 1
        if line.strip() and not line.lstrip().startswith("#"):
            out.append((start, line.strip()))
    return out


def sluice_argv(line: str) -> list[str] | None:
    """The arguments of a ``sluice`` command line (placeholders replaced), or None if the
    line runs something else."""
    try:
        tokens = shlex.split(line, comments=True)
    except ValueError as e:
        raise AssertionError(f"{line!r}: {e}") from None
    while tokens and re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*=.*", tokens[0]):
        tokens = tokens[1:]  # VAR=value prefixes
    if not tokens or Path(tokens[0]).name != "sluice":
        return None
    argv: list[str] = []
    for tok in tokens[1:]:
        if tok in SHELL_OPERATORS or tok.startswith((">", "2>", "<", "|")):
            break
        optional = tok.startswith("[") or tok.endswith("]")
        tok = tok.strip("[]")
        if tok in ("", "...", "…"):
            continue
        if optional and "|" in tok and not tok.startswith("-"):
            tok = tok.split("|", 1)[0]
        argv.append(PLACEHOLDERS.get(tok, tok))
    return argv


def _id(p: Path) -> str:
    return str(p.relative_to(REPO))


def _stem(p: Path) -> str:
    return p.stem.lower()


# --- every sluice line parses --------------------------------------------------------------


def _sluice_lines() -> list[tuple[str, str]]:
    out = []
    for doc in DOCS:
        for b in sh_blocks(doc):
            rel = doc.relative_to(REPO)
            out += [(f"{rel}:{b.line + 1 + i}", line) for i, line in commands(b.text)
                    if sluice_argv(line) is not None]  # fmt: skip
    return out


SLUICE_LINES = _sluice_lines()


def test_the_docs_show_sluice_commands():
    assert len(SLUICE_LINES) > 30, SLUICE_LINES
    assert any(b.runnable for doc in DOCS for b in sh_blocks(doc))


@pytest.fixture(scope="module")
def parser():
    return build_parser()


@pytest.mark.parametrize(("where", "line"), SLUICE_LINES, ids=[w for w, _ in SLUICE_LINES])
def test_sluice_line_parses(parser, where, line):
    argv = sluice_argv(line)
    assert argv is not None
    err = io.StringIO()
    try:
        with contextlib.redirect_stderr(err), contextlib.redirect_stdout(io.StringIO()):
            parser.parse_args(argv)
    except SystemExit as e:
        if e.code not in (0, None):
            pytest.fail(f"{where}: the CLI rejects\n  {line}\n{err.getvalue().strip()}")


# --- runnable blocks run -------------------------------------------------------------------

RUNNABLE = [doc for doc in DOCS if any(b.runnable for b in sh_blocks(doc))]


@pytest.mark.parametrize("doc", RUNNABLE, ids=[_id(d) for d in RUNNABLE])
def test_runnable_blocks_write_only_their_examples_directory(doc):
    own = f"{EXAMPLES}/{_stem(doc)}"
    for b in sh_blocks(doc):
        if not b.runnable:
            continue
        for path in re.findall(r"\bresults/[^\s'\"]*", b.text):
            assert path == own or path.startswith(own + "/"), (
                f"{b.where}: runnable commands write under {own}/, not {path}"
            )
        for _, line in commands(b.text):
            argv = sluice_argv(line)
            if argv is None:
                continue
            for words, option in WRITERS.items():
                if tuple(argv[: len(words)]) == words:
                    assert option in argv, f"{b.where}: give {option} under {own}/: {line}"


@pytest.mark.parametrize("doc", RUNNABLE, ids=[_id(d) for d in RUNNABLE])
def test_runnable_blocks_run(doc):
    runnable = [b for b in sh_blocks(doc) if b.runnable]
    shutil.rmtree(REPO / EXAMPLES / _stem(doc), ignore_errors=True)
    script = "\n".join(
        ["set -euo pipefail",
         "trap 'echo \"docs test: failed (exit $?): $BASH_COMMAND\" >&2' ERR",
         *(f"# {b.where}\n{b.text}" for b in runnable)]
    )  # fmt: skip
    venv_bin = REPO / ".venv" / "bin"
    bin_dir = venv_bin if (venv_bin / "sluice").exists() else Path(sys.executable).parent
    env = {**os.environ, "PATH": f"{bin_dir}{os.pathsep}{os.environ.get('PATH', '')}",
           "MPLBACKEND": "Agg"}  # fmt: skip
    env.pop("SLUICE_DEBUG", None)
    try:
        p = subprocess.run(["bash", "-c", script], cwd=REPO, env=env, capture_output=True,
                           text=True, timeout=TIMEOUT_S)  # fmt: skip
    except subprocess.TimeoutExpired as e:
        err = e.stderr.decode() if isinstance(e.stderr, bytes) else (e.stderr or "")
        pytest.fail(f"{_id(doc)}: runnable blocks took over {TIMEOUT_S} s\n{err[-3000:]}")
    if p.returncode != 0:
        failed = [ln for ln in p.stderr.splitlines() if ln.startswith("docs test: failed")]
        pytest.fail(f"{_id(doc)}: {failed[-1] if failed else f'exit {p.returncode}'}\n"
                    f"stderr:\n{p.stderr[-3000:]}")  # fmt: skip


# --- links ---------------------------------------------------------------------------------

_LINK = re.compile(r"\[[^\]]*\]\(([^)\s]+)\)")


def _without_code_blocks(path: Path) -> str:
    text = path.read_text(encoding="utf-8")
    return re.sub(r"(?ms)^[ \t]*(`{3,}|~{3,})[^\n]*\n.*?^[ \t]*\1[ \t]*$", "", text)


def anchors(path: Path) -> set[str]:
    """GitHub's heading anchors of a Markdown file."""
    seen: dict[str, int] = {}
    out = set()
    for line in _without_code_blocks(path).splitlines():
        m = re.match(r"#{1,6}\s+(.*?)\s*#*\s*$", line)
        if not m:
            continue
        slug = re.sub(r"[^\w\- ]", "", m.group(1).lower()).replace(" ", "-")
        n = seen.get(slug, 0)
        seen[slug] = n + 1
        out.add(slug if n == 0 else f"{slug}-{n}")
    return out


@pytest.mark.parametrize("doc", DOCS, ids=[_id(d) for d in DOCS])
def test_relative_links_resolve(doc):
    prose = re.sub(r"`[^`\n]*`", "", _without_code_blocks(doc))  # not inline code
    for target in _LINK.findall(prose):
        if re.match(r"[a-z]+:", target):
            continue  # http:, https:, mailto:
        file, _, anchor = target.partition("#")
        dest = (doc.parent / file).resolve() if file else doc
        assert dest.exists(), f"{_id(doc)}: broken link {target}"
        if anchor and dest.suffix == ".md":
            assert anchor in anchors(dest), f"{_id(doc)}: no heading for {target}"


PLANS = [b for d in DOCS for b in blocks(d) if b.info.split()[:1] == ["toml"]]


@pytest.mark.parametrize("block", PLANS, ids=[b.where for b in PLANS])
def test_the_docs_plans_load(block, tmp_path):
    # A plan shown in the docs is a plan Sluice takes (the every-key example in
    # experiments.md had a [video] table and no clip, which is an error).
    from sluice.plan import load_plan

    plan = tmp_path / "plan.toml"
    plan.write_text(block.text, encoding="utf-8")
    load_plan(plan)
