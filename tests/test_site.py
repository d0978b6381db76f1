"""The static site: built from the stored notebook outputs (nothing executed), one page per
notebook, contents in reading order, working links, every figure present."""

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
    stored = sum("image/png" in o.get("data", {}) for c in nb.cells for o in c.get("outputs", []))
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
