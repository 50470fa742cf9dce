"""docs/frontend/language-reference.md is what scripts/gen_lang_reference.py renders from the compiler's tables, it
documents every op, method, annotation and entry option, and every example on it runs on the CPU interpreter and
agrees with its numpy expectation (and prints what the page says it prints)."""

from __future__ import annotations

import contextlib
import importlib
import io
import re
import runpy
import sys
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest

import tile.frontend as tile
from tile.compiler.lang import _ops

ROOT = Path(__file__).resolve().parents[1]
SCRIPTS = ROOT / "scripts"


def _generator(name: str = "render") -> ModuleType:
    """``lang_reference.<name>`` from scripts/ (a folder of developer scripts, not an installed package)."""
    if str(SCRIPTS) not in sys.path:
        sys.path.insert(0, str(SCRIPTS))
    return importlib.import_module(f"lang_reference.{name}")


render = _generator()
SNIPPETS: dict[str, str] = render.snippets()


@pytest.fixture(autouse=True)
def _cpu_backend() -> None:
    tile.set_backend("cpu")  # what TILE_INTERPRET=1 selects, for this process


def test_the_committed_page_is_the_generated_one() -> None:
    page = (ROOT / render.PAGE).read_text(encoding="utf-8")
    assert page == render.render(), "run: python scripts/gen_lang_reference.py"


def test_the_page_shows_every_example_verbatim_with_its_heading() -> None:
    page = (ROOT / render.PAGE).read_text(encoding="utf-8")
    blocks = re.findall(r"```python\n(.*?)```", page, flags=re.DOTALL)
    assert blocks[0] == render.PRELUDE
    assert sorted(blocks[1:]) == sorted(SNIPPETS.values())
    for name in _ops.OPS:
        assert f"### `tile.{name}`" in page


def _anchors(markdown: str) -> set[str]:
    """The anchors mkdocs gives the headings of a page."""
    return {render._slug(h) for h in re.findall(r"^#+ (.*)$", markdown, flags=re.MULTILINE)}


def test_every_link_on_the_page_reaches_a_heading() -> None:
    page = (ROOT / render.PAGE).read_text(encoding="utf-8")
    links = re.findall(r"\]\(([^)]*)\)", page)
    assert len(links) > 40
    for link in links:
        target, _, anchor = link.partition("#")
        text = (ROOT / render.PAGE).parent.joinpath(target).read_text(encoding="utf-8") if target else page
        assert not anchor or anchor in _anchors(text), f"{link}: no such heading"


def test_gen_script_check_mode_reports_drift(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    gen = runpy.run_path(str(SCRIPTS / "gen_lang_reference.py"))
    assert gen["main"](["--check"]) == 0
    monkeypatch.setitem(gen["main"].__globals__, "ROOT", tmp_path)  # no page there: out of date
    assert gen["main"](["--check"]) == 1
    (tmp_path / render.PAGE).parent.mkdir(parents=True)
    (tmp_path / render.PAGE).write_text("stale\n", encoding="utf-8")
    assert gen["main"](["--check"]) == 1
    assert gen["main"]([]) == 0
    assert gen["main"](["--check"]) == 0
    assert (tmp_path / render.PAGE).read_text(encoding="utf-8") == render.render()


def test_an_undocumented_op_fails_generation(monkeypatch: pytest.MonkeyPatch) -> None:
    row = _ops.LangOp("frobnicate", "frob", _ops._p("x"), ("frob",), "a new op nobody documented")
    monkeypatch.setattr(render, "OPS", {**_ops.OPS, "frobnicate": row})
    with pytest.raises(render.GenError) as info:
        render.render()
    assert "op family 'frob' is in no section" in str(info.value)
    assert "'frobnicate' has no example" in str(info.value)


def test_an_undocumented_method_or_entry_option_fails_generation(monkeypatch: pytest.MonkeyPatch) -> None:
    methods: dict[str, Any] = {**_ops.METHODS, "mut": {**_ops.METHODS["mut"], "flush": "mut_flush"}}
    monkeypatch.setattr(render, "METHODS", methods)
    monkeypatch.setattr(render, "ENTRY_OPTIONS", {k: v for k, v in render.ENTRY_OPTIONS.items() if k != "approx"})
    with pytest.raises(render.GenError) as info:
        render.render()
    assert "'mut_flush' (z.flush) has no sections.METHOD_DOCS entry" in str(info.value)
    assert "tile.entry takes" in str(info.value)


def test_an_example_without_an_assertion_fails_generation(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(render.MATH_SNIPPETS, "exp", "print('looks fine')\n")
    with pytest.raises(render.GenError, match="example 'exp' checks nothing"):
        render.render()


@pytest.mark.parametrize("key", sorted(SNIPPETS))
def test_example_runs_on_the_interpreter(key: str, tmp_path: Path) -> None:
    script = tmp_path / ("example_" + re.sub(r"\W", "_", key) + ".py")  # kernels need a file to read their source
    script.write_text(render.PRELUDE + "\n" + SNIPPETS[key], encoding="utf-8")
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        runpy.run_path(str(script), run_name="__example__")
    assert out.getvalue() == render.PRINTS.get(key, "")


# On the GPU: device printf writes to the process's stdout file, not sys.stdout, so nothing printed is compared; the
# assert_ example traps on purpose, which leaves the CUDA context unusable for the rest of the process.
_NOT_ON_GPU = {"assert_"}


@pytest.mark.gpu
@pytest.mark.parametrize("key", sorted(set(SNIPPETS) - _NOT_ON_GPU))
def test_example_runs_on_the_gpu(key: str, tmp_path: Path) -> None:
    tile.set_backend("gpu")
    try:
        script = tmp_path / ("example_" + re.sub(r"\W", "_", key) + ".py")
        script.write_text(render.PRELUDE + "\n" + SNIPPETS[key], encoding="utf-8")
        namespace = runpy.run_path(str(script), run_name="__example__")  # each example asserts its own result
    finally:
        tile.set_backend("cpu")
    assert namespace, "the example ran to its end"


def test_a_wrong_expectation_fails_its_example(tmp_path: Path) -> None:
    script = tmp_path / "example_wrong.py"
    script.write_text(
        render.PRELUDE + "\n" + SNIPPETS["exp"].replace("np.exp(x)", "np.exp(x) + 1e-3"), encoding="utf-8"
    )
    with pytest.raises(AssertionError, match="Not equal to tolerance"):
        runpy.run_path(str(script), run_name="__example__")
