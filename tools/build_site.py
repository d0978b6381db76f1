"""Build a static HTML site of the executed workbook from the stored notebooks/NN_*.ipynb.

    python tools/build_site.py --out build/site

Nothing is executed: the pages show the outputs stored in the .ipynb files (those nbval
checks). index.html lists the notebooks in reading order; every page links to the contents
and to the previous and next notebook; "notebook NN" in the text links to that notebook's
page; figures are written to <out>/figures/ and the pages point at them. Pages are rendered
by nbconvert's lab template (math is typeset by MathJax when the reader is online).
"""

import argparse
import re
import sys
from pathlib import Path

import nbformat
from nbconvert import HTMLExporter
from nbconvert.preprocessors import ExtractOutputPreprocessor

ROOT = Path(__file__).resolve().parent.parent
TITLE = "nnlib · the OpenCL neural-net workbook"
REFERENCE = re.compile(r"(?<!\[)\bnotebook (\d\d)\b")


def title(nb, fallback: str) -> str:
    """The text of the notebook's first level-1 heading."""
    for cell in nb.cells:
        if cell.cell_type == "markdown":
            for line in cell.source.splitlines():
                if line.startswith("# "):
                    return line[2:].strip()
    return fallback


def link_references(text: str, pages: dict) -> str:
    """``notebook NN`` -> a Markdown link to that notebook's page, where the site has one."""
    def link(m):
        page = pages.get(m[1])
        return f"[{m[0]}]({page})" if page else m[0]
    return REFERENCE.sub(link, text)


def navigation(order: list, titles: dict, index: int) -> str:
    parts = ["[Contents](index.html)"]
    if index > 0:
        parts.append(f"← [{titles[order[index - 1]]}]({order[index - 1]})")
    if index + 1 < len(order):
        parts.append(f"[{titles[order[index + 1]]}]({order[index + 1]}) →")
    return " · ".join(parts)


def render(nb, exporter: HTMLExporter, stem: str, out: Path) -> None:
    """Write ``<out>/<stem>.html`` and its figures under ``<out>/figures/``."""
    html, resources = exporter.from_notebook_node(
        nb, resources={"unique_key": stem, "output_files_dir": "figures"})
    for name, data in resources.get("outputs", {}).items():
        (out / name).parent.mkdir(parents=True, exist_ok=True)
        (out / name).write_bytes(data)
    (out / f"{stem}.html").write_text(html, encoding="utf-8")


def build(out: Path, notebook_dir: Path = ROOT / "notebooks") -> list[Path]:
    """Write the site under ``out``; returns the pages, contents first."""
    paths = sorted(notebook_dir.glob("[0-9][0-9]_*.ipynb"))
    if not paths:
        raise FileNotFoundError(f"no notebooks NN_*.ipynb in {notebook_dir}")
    notebooks = {p.stem: nbformat.read(p, as_version=4) for p in paths}
    order = [f"{stem}.html" for stem in notebooks]
    titles = {f"{stem}.html": title(nb, stem) for stem, nb in notebooks.items()}
    pages = {stem[:2]: f"{stem}.html" for stem in notebooks}
    exporter = HTMLExporter(template_name="lab")
    exporter.register_preprocessor(ExtractOutputPreprocessor, enabled=True)
    out.mkdir(parents=True, exist_ok=True)

    contents = "\n".join(f"{i + 1}. [{titles[page]}]({page})" for i, page in enumerate(order))
    index = nbformat.v4.new_notebook(metadata={"title": TITLE})
    index.cells = [nbformat.v4.new_markdown_cell(f"# {TITLE}\n\nThe notebooks in reading order, "
                                                 f"executed:\n\n{contents}")]
    render(index, exporter, "index", out)

    for i, (stem, nb) in enumerate(notebooks.items()):
        for cell in nb.cells:
            if cell.cell_type == "markdown":
                cell.source = link_references(cell.source, pages)
        nav = navigation(order, titles, i)
        nb.cells.insert(0, nbformat.v4.new_markdown_cell(nav))
        nb.cells.append(nbformat.v4.new_markdown_cell(nav))
        nb.metadata["title"] = titles[f"{stem}.html"]
        render(nb, exporter, stem, out)
    return [out / "index.html"] + [out / page for page in order]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=ROOT / "build" / "site")
    args = parser.parse_args()
    for page in build(args.out):
        print(page.relative_to(args.out))
    print(f"open {args.out / 'index.html'}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
