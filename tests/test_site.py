"""The static site: built from the stored notebook outputs (nothing executed), one page per
notebook, a table of contents in reading order, working links, every figure present,
numbered and captioned, nothing loaded from another host, maths as MathML with no TeX left,
widget panels drawn from their stored state, a course sidebar on each page and a search
index over the course (tests/test_browser.py loads the pages in a browser)."""

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
    items = _soup(site / "index.html").select("ol.site-contents > li")
    links = [item.select_one("a.notebook") for item in items]
    assert [a["href"] for a in links] == [f"{p.stem}.html" for p in NOTEBOOKS]
    for item, a, path in zip(items, links, NOTEBOOKS):
        assert a.get_text().startswith(path.stem[:2]), a.get_text()  # the notebook's title
        assert item.select_one(".teaches").get_text().strip()  # what it teaches
        sections = [s["href"] for s in item.select(".sections a")]
        headings = _soup(site / a["href"]).select(".jp-MarkdownCell h2[id]")
        assert sections == [f"{a['href']}#{h['id']}" for h in headings]


def test_what_each_notebook_teaches_comes_from_the_readme(tmp_path):
    readme = tmp_path / "README.md"
    readme.write_text("| `00_devices` | platforms and devices | 45 min |\n")
    assert build_site.teaches(readme, ["00_devices"]) == \
        {"00_devices": ("platforms and devices", "45 min")}
    with pytest.raises(ValueError, match="no row for .'01_dense_kernels'"):
        build_site.teaches(readme, ["00_devices", "01_dense_kernels"])


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.stem)
def test_links_resolve_and_neighbours_are_linked(site, path):
    page = site / f"{path.stem}.html"
    hrefs = [a["href"] for a in _soup(page).find_all("a", href=True) if _local(a["href"])]
    assert "index.html" in hrefs
    missing = [h for h in hrefs if not (site / h.split("#")[0]).is_file()]
    assert not missing, f"{page.name} links to missing pages {missing}"
    for href in {h for h in hrefs if "#" in h}:
        target, anchor = href.split("#")
        assert _soup(site / target).find(id=anchor), f"{page.name}: no #{anchor} in {target}"
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


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.stem)
def test_every_figure_is_numbered_captioned_and_has_alt_text(site, path):
    images = _soup(site / f"{path.stem}.html").find_all("img")
    for count, img in enumerate(images, 1):
        figure = img.find_parent("figure")
        assert figure is not None, f"{img['src']} is not in a <figure>"
        caption = figure.find("figcaption").get_text(" ", strip=True)
        number = f"Figure {int(path.stem[:2])}.{count}:"
        assert caption.startswith(number) and len(caption) > len(number) + 20, caption
        assert len(img.get("alt", "")) > 10 and img["alt"] in caption, img.get("alt")


def test_a_figure_without_caption_stops_the_build():
    cell = nbformat.v4.new_code_cell("plot()")
    cell.outputs = [nbformat.v4.new_output("display_data", data={"image/png": "iVBOR"})]
    nb = nbformat.v4.new_notebook(cells=[cell])
    with pytest.raises(ValueError, match="cell 0 draws a figure"):
        build_site.number_figures(nb, "03_x")
    cell.metadata["caption"] = "Time per width. The curves meet at small widths."
    assert build_site.number_figures(nb, "03_x") == 1
    assert cell.outputs[0].metadata["site_figure"] == {
        "number": "3.1", "caption": "Time per width. The curves meet at small widths.",
        "alt": "Time per width."}


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


# TeX a reader must never see: dollars, commands, braced scripts, the builder's tokens
RAW_TEX = re.compile(r"\$|\\[A-Za-z]+|[\^_]\{|MATHxx")


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.stem)
def test_maths_is_mathml_and_no_tex_is_left(site, path):
    nb = build_site.load(path)
    formulas = sum(len(build_site.MATH.findall(build_site.CODE.sub("", c.source)))
                   for c in nb.cells if c.cell_type == "markdown")
    soup = _soup(site / f"{path.stem}.html")
    assert len(soup.find_all("math")) == formulas
    for tag in soup.find_all(["code", "pre", "script", "style", "math"]):
        tag.decompose()  # code and outputs show text as printed; formulas are MathML
    for element in soup.find_all(string=RAW_TEX):
        pytest.fail(f"{path.stem}: raw TeX in <{element.parent.name}>: {element.strip()[:120]!r}")
    for tag in soup.find_all(True):
        for name in ("alt", "title", "aria-label", "alttext"):
            assert not RAW_TEX.search(tag.get(name, "")), (tag.name, tag[name])


def test_a_formula_the_converter_cannot_take_is_an_error():
    assert "<mfrac>" in build_site.mathml(r"\Big\lfloor\frac{a}{b}\Big\rfloor", display=True)
    with pytest.raises(ValueError, match="could not convert"):
        build_site.mathml(r"\unknowncommand{x}", display=False)


def test_accents_sit_on_their_letters_and_display_maths_is_display_style():
    formula = BeautifulSoup(build_site.mathml(r"\hat m_t + \bar z", display=False), "html.parser")
    accents = formula.find_all("mover")
    assert [m.get("accent") for m in accents] == ["true", "true"]
    assert all(m.find("mo")["stretchy"] == "false" for m in accents)
    assert formula.math["alttext"] == "m\u0302_t + z\u0304"
    assert formula.math.get("displaystyle") is None
    block = BeautifulSoup(build_site.mathml(r"\sum_i x_i", display=True), "html.parser").math
    assert block["display"] == "block" and block["displaystyle"] == "true"


def test_a_fraction_in_a_table_keeps_display_size():
    formulas = []
    build_site.tokenize_maths("| Adam | $\\frac{a}{b}$ |\n\ntext $\\frac{a}{b}$", formulas)
    in_table, in_text = (BeautifulSoup(f[0], "html.parser").math for f in formulas)
    assert in_table["displaystyle"] == "true" and in_table["display"] == "inline"
    assert in_text.get("displaystyle") is None


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.stem)
def test_code_shows_no_markers_and_outputs_are_as_stored(site, path):
    soup = _soup(site / f"{path.stem}.html")
    text = "\n".join(c.get_text() for c in soup.select(".jp-CodeCell"))
    for marker in ("NBVAL_", "BEGIN SOLUTION", "END SOLUTION", "HIDDEN TESTS", "STUB:", "HINT:"):
        assert marker not in text, f"{path.stem} shows {marker}"
    printed = [o.text for c in nbformat.read(path, as_version=4).cells
               for o in c.get("outputs", []) if o.get("name") == "stdout"]
    for line in {line.strip() for out in printed for line in out.splitlines()[:3]} - {""}:
        if not build_site.MARKER_LINE.match(line):
            assert line in text, f"{path.stem}: the site does not show {line!r} as printed"


def test_markers_are_recognised():
    code = ("x = 1\n# NBVAL_IGNORE_OUTPUT\n    ### BEGIN SOLUTION\n// STUB: return 0;\n"
            "### BEGIN HIDDEN TESTS\n    // ### END SOLUTION\ny = 2\n")
    assert build_site.strip_markers(code) == "x = 1\ny = 2\n"


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.stem)
def test_every_page_has_the_course_sidebar_and_menu(site, path):
    soup = _soup(site / f"{path.stem}.html")
    for nav in (soup.select_one("nav.site-sidebar"), soup.select_one("details.site-menu")):
        courses = nav.select("ol.site-course > li > details > summary > a")
        assert [a["href"] for a in courses] == [f"{p.stem}.html" for p in NOTEBOOKS]
        current = nav.select_one("ol.site-course > li.current")
        headings = soup.select(".jp-MarkdownCell h2[id]")
        assert headings and [a["href"] for a in current.select("li.level-2 a")] == \
            [f"#{h['id']}" for h in headings]
    assert soup.select_one("details.site-menu").get("open") is None  # collapsed


def _entries(site):
    text = (site / "search-index.js").read_text(encoding="utf-8")
    return json.loads(text.removeprefix("const SEARCH_INDEX = ").rstrip().rstrip(";"))


def test_search_index_covers_every_page(site):
    entries = _entries(site)
    assert {e["href"].split("#")[0] for e in entries} >= {f"{p.stem}.html" for p in NOTEBOOKS}
    assert any("Adam-mini" in e["text"] and e["href"].startswith("04_") for e in entries)
    assert _soup(site / "04_optimizers.html").select_one("form.site-search input[name=q]")


def test_search_excerpts_have_no_prompts_and_no_raw_maths(site):
    for entry in _entries(site):
        assert not re.search(r"\b(In|Out) ?\[\d*\]:", entry["text"]), entry["text"][:200]
        # code is indexed as written; formulas must not be
        tex = re.search(r"\$|\\(frac|hat|bar|sum|mathrm|sqrt|beta|eta|partial|odot)\b",
                        entry["text"] + entry["heading"])
        assert not tex, (entry["href"], tex[0])
    rules = next(e for e in _entries(site) if e["href"] == "04_optimizers.html#The-rules")
    assert "β_1" in rules["text"]  # formulas as plain text


def test_the_search_page_is_in_the_course_style(site):
    soup = _soup(site / "search.html")
    assert soup.select_one("nav.site-sidebar ol.site-course") and soup.select_one("#results")
    assert [s["src"] for s in soup.find_all("script")] == ["search-index.js", "site.js"]
    assert soup.find("link", href="site.css")


@pytest.mark.parametrize("stem, labels", [
    ("04_optimizers", ["optimizer", "learning rate (per step)", "β₁: memory"]),
    ("07_catch", ["flagged share of steps (%)"])])
def test_widget_panels_are_drawn_from_their_stored_state(site, stem, labels):
    panel = _soup(site / f"{stem}.html").select_one(".widget-static")
    assert panel is not None and "shown as stored" in panel.get_text()
    shown = [label.get_text() for label in panel.find_all("label")]
    for label in labels:
        assert any(s.startswith(label) for s in shown), (label, shown)
