"""The reports' fixed text lives in ``sluice/analysis/templates``: every section a report
asks for is there, every section there is asked for, and each fills in what it names."""

import ast
import string
from pathlib import Path

import pytest
from sluice import analysis
from sluice.analysis import TEMPLATES, prose, template_sections

MODULES = Path(analysis.__file__).parent


def _calls(module: Path) -> dict[str, set[str]]:
    """The sections ``module`` renders: ``prose(REPORT, "section", name=...)`` calls, with
    the names of the values each passes."""
    tree = ast.parse(module.read_text(encoding="utf-8"))
    calls: dict[str, set[str]] = {}
    for node in ast.walk(tree):
        if isinstance(node, ast.Call) and getattr(node.func, "id", None) == "prose":
            section = node.args[1]
            assert isinstance(section, ast.Constant), ast.unparse(node)
            calls.setdefault(section.value, set()).update(k.arg for k in node.keywords)
    return calls


@pytest.mark.parametrize("template", sorted(p.stem for p in TEMPLATES.glob("*.md")))
def test_each_section_is_rendered_with_the_values_it_names(template):
    calls = _calls(MODULES / f"{template}.py")
    sections = template_sections(template)
    assert set(calls) == set(sections), (set(calls) ^ set(sections))
    for name, text in sections.items():
        wanted = {m[1] or m[2] for m in string.Template.pattern.findall(text) if m[1] or m[2]}
        assert wanted == calls[name], (name, wanted, calls[name])
        assert text.endswith("\n") and not text.startswith("\n")


def test_a_missing_value_is_an_error_and_dollars_escape(tmp_path, monkeypatch):
    (tmp_path / "t.md").write_text(
        "<!-- editors' note -->\n\n<!-- section: a -->\n\ncosts $$5 at ${rate}x\n\n"
        "<!-- section: b -->\nplain\n"
    )
    monkeypatch.setattr(analysis, "TEMPLATES", tmp_path)
    template_sections.cache_clear()
    try:
        assert prose("t", "a", rate=2) == "costs $5 at 2x\n"
        assert prose("t", "b") == "plain\n"
        with pytest.raises(KeyError):
            prose("t", "a")
        with pytest.raises(KeyError):
            prose("t", "c")
    finally:
        template_sections.cache_clear()
