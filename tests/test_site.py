"""The static site: built from the stored notebook outputs (nothing executed), one page per
notebook, contents in reading order, working links, every figure present, nothing loaded from
another host, maths as MathML, widget panels drawn from their stored state, a table of
contents on each page and a search index over the course (tests/test_browser.py loads the
pages in a browser)."""

import json
import re

from pathlib import Path

import nbformat
import pytest
from bs4 import BeautifulSoup

from .tools import load_tool

ROOT = Path(__file__).resolve().parent.parent
NOTEBOOKS = sorted((ROOT / "notebooks").glob("[0-9][0-9]_*.ipynb"))
build_site = load_tool("build_site")


@pytest.fixture(scope="module")
def site(tmp_path_factory):
    out = tmp_path_factory.mktemp("site")
    build_site.build(out)
    return out


def _soup(path: Path) -> BeautifulSoup:
    return BeautifulSoup(path.read_text(encoding="utf-8"), "html.parser")


def _local(href: str) -> bool:
    return not href.startswith(("#", "http://", "https://", "mailto:", "data:"))


def test_every_notebook_has_a_page(site):
    assert NOTEBOOKS
    for path in NOTEBOOKS:
        assert (site / f"{path.stem}.html").is_file(), path.name


def test_contents_list_the_notebooks_in_reading_order(site):
    links = _soup(site / "index.html").select(".jp-MarkdownCell ol a")
    assert [a["href"] for a in links] == [f"{p.stem}.html" for p in NOTEBOOKS]
    for a, path in zip(links, NOTEBOOKS):
        assert a.get_text().startswith(path.stem[:2]), a.get_text()  # the notebook's title


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.stem)
def test_links_resolve_and_neighbours_are_linked(site, path):
    page = site / f"{path.stem}.html"
    hrefs = [a["href"] for a in _soup(page).find_all("a", href=True) if _local(a["href"])]
    assert "index.html" in hrefs
    missing = [h for h in hrefs if not (site / h).is_file()]
    assert not missing, f"{page.name} links to missing pages {missing}"
    i = NOTEBOOKS.index(path)
    for j in (i - 1, i + 1):
        if 0 <= j < len(NOTEBOOKS):
            assert f"{NOTEBOOKS[j].stem}.html" in hrefs


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.stem)
def test_notebook_references_are_links(site, path):
    pages = {p.stem[:2]: f"{p.stem}.html" for p in NOTEBOOKS}
    soup = _soup(site / f"{path.stem}.html")
    for cell in soup.select(".jp-MarkdownCell"):
        for text in cell.find_all(string=build_site.REFERENCE):
            for number in build_site.REFERENCE.findall(text):
                if number in pages:
                    assert text.parent.name == "a" and text.parent["href"] == pages[number], \
                        f"{path.stem}: {text!r} is not a link"


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.stem)
def test_figures_are_present(site, path):
    nb = nbformat.read(path, as_version=4)
    widgets = nb.metadata.get("widgets", {}).get(build_site.WIDGET_STATE, {}).get("state", {})
    in_widgets = [o for w in widgets.values() for o in w["state"].get("outputs", [])]
    outputs = [o for c in nb.cells for o in c.get("outputs", [])] + in_widgets
    stored = sum("image/png" in o.get("data", {}) for o in outputs)
    images = [img["src"] for img in _soup(site / f"{path.stem}.html").find_all("img")
              if _local(img["src"])]
    assert len(images) == stored
    for src in images:
        assert (site / src).read_bytes()[:8] == b"\x89PNG\r\n\x1a\n", src


def test_links_are_added_only_where_a_page_exists():
    pages = {"01": "01_dense_kernels.html"}
    text = build_site.link_references("see notebook 01 and notebook 09; [notebook 01](x)", pages)
    assert text == "see [notebook 01](01_dense_kernels.html) and notebook 09; [notebook 01](x)"


def test_a_reference_in_the_text_became_a_link(site):
    soup = _soup(site / "02_train_fractal_classifier.html")
    assert any(a.get_text() == "notebook 01" and a["href"] == "01_dense_kernels.html"
               for a in soup.select(".jp-MarkdownCell a"))


def _pages(site):
    return sorted(site.glob("*.html"))


def test_nothing_is_loaded_from_another_host(site):
    for page in _pages(site):
        soup = _soup(page)
        for tag in soup.find_all(["script", "link", "img", "iframe", "source"]):
            url = tag.get("src") or tag.get("href") or ""
            assert not re.match(r"(https?:)?//", url), f"{page.name} loads {url}"
        assert not soup.find_all("script", type="application/vnd.jupyter.widget-view+json")


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.stem)
def test_maths_is_mathml_and_no_tex_is_left(site, path):
    nb = nbformat.read(path, as_version=4)
    formulas = sum(len(build_site.MATH.findall(build_site.CODE.sub("", c.source)))
                   for c in nb.cells if c.cell_type == "markdown")
    soup = _soup(site / f"{path.stem}.html")
    assert len(soup.find_all("math")) == formulas
    for cell in soup.select(".jp-MarkdownCell"):
        for code in cell.find_all("code"):
            code.decompose()
        text = cell.get_text()
        assert "$$" not in text and "$\\" not in text and "MATHxx" not in text, text[:200]


def test_a_formula_the_converter_cannot_take_is_an_error():
    assert "<mfrac>" in build_site.mathml(r"\Big\lfloor\frac{a}{b}\Big\rfloor", display=True)
    with pytest.raises(ValueError, match="could not convert"):
        build_site.mathml(r"\unknowncommand{x}", display=False)


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.stem)
def test_code_shows_no_markers_and_outputs_no_device_names(site, path):
    soup = _soup(site / f"{path.stem}.html")
    text = "\n".join(c.get_text() for c in soup.select(".jp-CodeCell"))
    for marker in ("NBVAL_", "BEGIN SOLUTION", "END SOLUTION", "HIDDEN TESTS", "STUB:", "HINT:"):
        assert marker not in text, f"{path.stem} shows {marker}"
    assert not build_site.DEVICE_NAME.search(text), build_site.DEVICE_NAME.search(text)[0]


def test_markers_and_device_names_are_recognised():
    code = ("x = 1\n# NBVAL_IGNORE_OUTPUT\n    ### BEGIN SOLUTION\n// STUB: return 0;\n"
            "### BEGIN HIDDEN TESTS\n    // ### END SOLUTION\ny = 2\n")
    assert build_site.strip_markers(code) == "x = 1\ny = 2\n"
    row = "PoCL  | pthread-AMD EPYC    | CPU"
    assert build_site.hide_device_names(row) == "PoCL  | [device name]       | CPU"
    assert build_site.hide_device_names("Runtime(PoCL: cpu-haswell-Intel(R) Core(TM) i7)") == \
        "Runtime(PoCL: [device name])"


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.stem)
def test_each_page_has_a_table_of_its_sections(site, path):
    soup = _soup(site / f"{path.stem}.html")
    links = soup.select("nav.site-toc a")
    headings = soup.select(".jp-MarkdownCell h2[id]")
    assert headings and [a["href"] for a in links if "level-2" in a["class"]] == \
        [f"#{h['id']}" for h in headings]


def test_search_index_covers_every_page(site):
    text = (site / "search.js").read_text(encoding="utf-8")
    entries = json.loads(text.removeprefix("const SEARCH_INDEX = ").rstrip().rstrip(";"))
    assert {e["href"].split("#")[0] for e in entries} >= {f"{p.stem}.html" for p in NOTEBOOKS}
    assert any("Adam-mini" in e["text"] and e["href"].startswith("04_") for e in entries)
    assert _soup(site / "04_optimizers.html").select_one("form.site-search input[name=q]")


@pytest.mark.parametrize("stem, labels", [
    ("04_optimizers", ["optimizer", "learning rate (per step)", "β₁: memory"]),
    ("07_catch", ["flagged share of steps (%)"])])
def test_widget_panels_are_drawn_from_their_stored_state(site, stem, labels):
    panel = _soup(site / f"{stem}.html").select_one(".widget-static")
    assert panel is not None and "shown as stored" in panel.get_text()
    shown = [label.get_text() for label in panel.find_all("label")]
    for label in labels:
        assert any(s.startswith(label) for s in shown), (label, shown)
