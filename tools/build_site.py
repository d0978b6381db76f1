"""Build a static HTML site of the executed workbook from the stored notebooks/NN_*.ipynb.

    python tools/build_site.py --out build/site

Nothing is executed: each page shows the cells of a notebook's .py source with the outputs
stored in its .ipynb (those nbval checks), as a real run printed them. The site is complete
offline and loads nothing from another host: maths is turned into MathML at build time
(latex2mathml, accents and display style set; browsers typeset MathML themselves, with the
Latin Modern Math font shipped in tools/site/), widget panels are drawn from the widget state
stored in the notebook (a labelled, static picture of the controls and of the panel's stored
output), and search runs in the page over an index written next to the pages.

Every page has the same bars: a course sidebar (every notebook and its sections; a menu on
phones), the contents, the previous and next notebook, a search box. index.html is the table
of contents: each notebook's title, what it teaches (README.md's table of notebooks) and its
sections. Figures are numbered per notebook ("Figure 3.2") and captioned from their cell's
``caption`` metadata (``# %% caption="..."`` in the .py source; its first sentence is the
image's alt text). "notebook NN" in the text links to that notebook's page. Exercise and
nbval markers are left out of the code shown.
"""

import argparse
import html
import json
import math
import re
import shutil
import sys
import xml.etree.ElementTree as ET
from html.parser import HTMLParser
from pathlib import Path

import jinja2
import jupytext
import nbformat
from jupytext.combine import combine_inputs_with_outputs
from latex2mathml.converter import convert as tex_to_mathml
from nbconvert import HTMLExporter
from nbconvert.filters import markdown2html_mistune
from nbconvert.preprocessors import ExtractOutputPreprocessor

ROOT = Path(__file__).resolve().parent.parent
SITE = Path(__file__).resolve().parent / "site"  # page template, style, script, maths font
ASSETS = ("site.css", "site.js", "latinmodern-math.woff2", "latinmodern-math-LICENSE.txt")
TITLE = "nnlib · the OpenCL neural-net workbook"
REFERENCE = re.compile(r"(?<!\[)\bnotebook (\d\d)\b")
# Comment lines for nbval and for tools/make_exercises.py, in Python or OpenCL C
MARKER_LINE = re.compile(r"^\s*(#+|//)\s*(###\s*)?(NBVAL_\w+|BEGIN SOLUTION|END SOLUTION|"
                         r"BEGIN HIDDEN TESTS|END HIDDEN TESTS|HINT:|STUB:).*(\n|$)", re.MULTILINE)
CODE = re.compile(r"(```.*?```|`[^`\n]*`)", re.DOTALL)
MATH = re.compile(r"\$\$(.+?)\$\$|(?<![\\$])\$(?![\s$])((?:\\.|[^$\\])+?)(?<!\s)\$", re.DOTALL)
MATH_TOKEN = re.compile(r"MATHxx(\d+)xx")
MATHML = "http://www.w3.org/1998/Math/MathML"
# latex2mathml's accent characters (\hat, \bar, \tilde, \dot, \ddot, \check, \breve, \vec,
# \acute, \grave) and the combining marks that write them in plain text
ACCENTS = {"^": "\u0302", "\u00af": "\u0304", "~": "\u0303", "\u02d9": "\u0307",
           "\u00a8": "\u0308", "\u02c7": "\u030c", "\u02d8": "\u0306", "\u2192": "\u20d7",
           "\u00b4": "\u0301", "`": "\u0300"}
OVERLINE = "\u2015"  # latex2mathml's \overline
SPACED = set("=+-\u2212\u00d7\u22c5\u2264\u2265<>\u2190\u2192\u2248\u2260\u2208")
# README.md's table of notebooks: | `NN_name` | what you learn | study time |
NOTEBOOK_ROW = re.compile(r"^\| `(\d\d_\w+)` \| (.+?) \| (.+?) \|$", re.MULTILINE)
PROMPT = re.compile(r'<div class="jp-(?:Input|Output)Prompt[^"]*">[^<]*</div>')
MATH_ELEMENT = re.compile(r'<math\b[^>]*?alttext="([^"]*)"[^>]*>.*?</math>', re.DOTALL)
WIDGET_VIEW = "application/vnd.jupyter.widget-view+json"
WIDGET_STATE = "application/vnd.jupyter.widget-state+json"
SEARCH_PAGE = '# Search\n\n<p id="summary"></p>\n<ol id="results"></ol>\n'

ET.register_namespace("", MATHML)


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


def strip_markers(text: str) -> str:
    """``text`` without the lines that only carry nbval or exercise markers."""
    return MARKER_LINE.sub("", text)


def _local(element) -> str:
    return element.tag.rpartition("}")[2]


def _grouped(text: str) -> str:
    return text if len(text) <= 1 else f"({text})"


def plain(element) -> str:
    """A formula as plain text (its alt text, and what search shows): x̂, a/b, β_1^t."""
    tag, parts = _local(element), [plain(child) for child in element]
    if tag in ("mi", "mn", "mtext", "ms"):
        return element.text or ""
    if tag == "mo":
        text = element.text or ""
        return f" {text} " if text in SPACED else text
    if tag == "mspace":
        return " "
    if tag == "mfrac":
        return f"{_grouped(parts[0].strip())}/{_grouped(parts[1].strip())}"
    if tag in ("msqrt", "mroot"):
        return "√" + _grouped("".join(parts[:1]).strip())
    if tag in ("msub", "munder"):
        return f"{parts[0]}_{_grouped(parts[1].strip())}"
    if tag == "msup":
        sup = parts[1].strip()
        return parts[0] + (sup if sup in ("′", "″") else f"^{_grouped(sup)}")
    if tag in ("msubsup", "munderover"):
        return f"{parts[0]}_{_grouped(parts[1].strip())}^{_grouped(parts[2].strip())} "
    if tag == "mover" and element.get("accent") == "true":
        return parts[0] + ACCENTS.get(element[1].text, "")
    if tag == "mover":
        return f"{parts[0]}^{_grouped(parts[1].strip())}"
    return "".join(parts)


def typeset(root) -> None:
    """Accents sit on their letter (``accent="true"``, not stretched); \\overline becomes a
    rule over its base (CSS), which browsers draw where a stretched bar goes astray."""
    for parent in root.iter():
        for i, child in enumerate(parent):
            if _local(child) != "mover" or len(child) != 2 or _local(child[1]) != "mo":
                continue
            mark = child[1].text
            if mark in ACCENTS:
                child.set("accent", "true")
                child[1].set("stretchy", "false")
                child[1].attrib.pop("accent", None)
            elif mark == OVERLINE:
                base = ET.Element(f"{{{MATHML}}}mrow", {"class": "overline"})
                base.append(child[0])
                parent[i] = base


def mathml(tex: str, display: bool, table: bool = False) -> str:
    """MathML for one TeX formula, in display style when ``display`` (a block) or ``table``
    (a fraction in a table cell keeps its size); raises ValueError where the converter left
    TeX behind."""
    tex = re.sub(r"\\[Bb]igg?(?=\\[lr](floor|ceil|vert|Vert|angle))", "", tex)
    root = ET.fromstring(tex_to_mathml(tex, display="block" if display else "inline"))
    leftover = "".join(root.itertext())
    if "\\" in leftover:
        raise ValueError(f"latex2mathml could not convert {tex!r}")
    typeset(root)
    if display or table:
        root.set("displaystyle", "true")
    root.set("alttext", " ".join(plain(root).split()))
    return ET.tostring(root, encoding="unicode")


def tokenize_maths(text: str, formulas: list) -> str:
    """Replace each formula outside code by a token ``MATHxxNxx``; append its MathML to
    ``formulas`` (tokens pass through Markdown untouched, the MathML goes in afterwards).
    A formula on a table row (a line starting with ``|``) is set in display style."""
    def token(m):
        display = m[1] is not None
        row = m.string[m.string.rfind("\n", 0, m.start()) + 1:m.start()]
        formulas.append((mathml(m[1] if display else m[2], display,
                                table=row.lstrip().startswith("|")), m[0]))
        return f"MATHxx{len(formulas) - 1}xx"
    parts = CODE.split(text)
    return "".join(part if i % 2 else MATH.sub(token, part) for i, part in enumerate(parts))


def insert_maths(page: str, formulas: list) -> str:
    """Tokens in tag attributes (heading ids) become plain text, in the text MathML."""
    def bare(m):
        return re.sub(r"\W+", "", formulas[int(m[1])][1])
    page = re.sub(r"<[^<>]*>", lambda tag: MATH_TOKEN.sub(bare, tag[0]), page)
    return MATH_TOKEN.sub(lambda m: formulas[int(m[1])][0], page)


def widget_html(model_id: str, state: dict) -> str:
    """A static, disabled picture of a stored widget and its children."""
    model = state.get(model_id)
    if model is None:
        return ""
    s, name = model["state"], model["model_name"]
    label = html.escape(s.get("description", ""))
    if name in ("VBoxModel", "HBoxModel", "BoxModel", "GridBoxModel"):
        return "".join(widget_html(child.removeprefix("IPY_MODEL_"), state)
                       for child in s.get("children", []))
    if name.endswith("SliderModel") or name.endswith("TextModel"):
        value = s.get("value")
        shown = f"{value:.3g}" if isinstance(value, float) else html.escape(str(value))
        position = dict(s)
        if name == "FloatLogSliderModel":  # min, max and step are exponents of the base
            position["value"] = math.log(value, s["base"])
        limits = "".join(f' {k}="{position[k]}"' for k in ("min", "max", "step", "value")
                         if k in position)
        return f'<div class="row"><label>{label}</label> <input type="range"{limits} disabled> ' \
               f"<output>{shown}</output></div>"
    if name in ("DropdownModel", "RadioButtonsModel", "SelectModel", "ToggleButtonsModel"):
        options = "".join(f"<option{' selected' if i == s.get('index') else ''}>"
                          f"{html.escape(o)}</option>"
                          for i, o in enumerate(s.get("_options_labels", [])))
        return f'<div class="row"><label>{label}</label> <select disabled>{options}</select></div>'
    if name in ("ButtonModel", "CheckboxModel", "ToggleButtonModel"):
        return f'<div class="row"><button disabled>{label}</button></div>'
    if name in ("HTMLModel", "LabelModel", "HTMLMathModel"):
        return f'<div class="row">{s.get("value", "")}</div>'
    return ""


def output_widgets(model_id: str, state: dict) -> list:
    """The outputs stored in the Output widgets under ``model_id``, in order."""
    model = state.get(model_id, {})
    s = model.get("state", {})
    outputs = list(s.get("outputs", [])) if model.get("model_name") == "OutputModel" else []
    for child in s.get("children", []):
        outputs += output_widgets(child.removeprefix("IPY_MODEL_"), state)
    return outputs


def static_widgets(nb) -> None:
    """Each widget view output -> a labelled static picture of its stored state, followed by
    the outputs its Output widgets stored (a figure, printed text)."""
    state = nb.metadata.get("widgets", {}).get(WIDGET_STATE, {}).get("state", {})
    for cell in (c for c in nb.cells if c.cell_type == "code"):
        outputs = []
        for output in cell.outputs:
            view = output.get("data", {}).get(WIDGET_VIEW)
            if view is None:
                outputs.append(output)
                continue
            note = ('<div class="note">Interactive panel, shown as stored: open the notebook '
                    "in JupyterLab (<code>make lab</code>) to use it.</div>")
            picture = note + widget_html(view["model_id"], state)
            outputs.append(nbformat.v4.new_output(
                "display_data", data={"text/html": f'<div class="widget-static">{picture}</div>'}))
            outputs += [nbformat.from_dict(o) for o in output_widgets(view["model_id"], state)]
        cell.outputs = outputs
    nb.metadata.pop("widgets", None)


def clean(nb) -> None:
    """Markers out of the code and the printed text."""
    for cell in nb.cells:
        if cell.cell_type != "code":
            continue
        cell.source = strip_markers(cell.source).strip("\n")
        for output in cell.outputs:
            if "text" in output:
                output["text"] = strip_markers(output["text"])


def number_figures(nb, stem: str) -> int:
    """Each figure's number ("3.2": notebook 03, its second figure), caption and alt text
    (the caption's first sentence) go into its output's metadata for the page template;
    raises ValueError for a figure whose cell has no caption."""
    count = 0
    for index, cell in enumerate(nb.cells):
        for output in cell.get("outputs", []):
            if "image/png" not in output.get("data", {}):
                continue
            caption = " ".join(cell.metadata.get("caption", "").split())
            if not caption or "$" in caption:
                raise ValueError(
                    f"{stem}: cell {index} draws a figure; give its cell a caption in plain "
                    f'text (no TeX): `# %% caption="Figure: what it shows. What to see."`')
            count += 1
            output.setdefault("metadata", {})["site_figure"] = {
                "number": f"{int(stem[:2])}.{count}", "caption": caption,
                "alt": re.split(r"(?<=[.!?])\s", caption, maxsplit=1)[0]}
    return count


def scrolling_tables(page: str) -> str:
    """Each table in a box of its own that scrolls sideways (on a phone, not the page)."""
    page = re.sub(r"<table\b", '<div class="table-scroll"><table', page)
    return page.replace("</table>", "</table></div>")


class Sections(HTMLParser):
    """The h1-h3 headings of a rendered page (level, id, text) and the text under each."""

    def __init__(self):
        super().__init__()
        self.sections, self._heading, self._skip = [], None, 0

    def handle_starttag(self, tag, attrs):
        if tag in ("script", "style"):
            self._skip += 1
        elif tag in ("h1", "h2", "h3") and dict(attrs).get("id"):
            self._heading = [int(tag[1]), dict(attrs)["id"], ""]
            self.sections.append({"level": self._heading[0], "id": self._heading[1],
                                  "heading": "", "text": ""})

    def handle_endtag(self, tag):
        if tag in ("script", "style"):
            self._skip -= 1
        elif tag in ("h1", "h2", "h3") and self._heading:
            self.sections[-1]["heading"] = " ".join(self._heading[2].split()).rstrip("¶ ")
            self._heading = None

    def handle_data(self, data):
        if self._skip or not self.sections:
            return
        if self._heading:
            self._heading[2] += data
        else:
            self.sections[-1]["text"] += data


def sections(page: str) -> list:
    """The sections of the page's content: prompts left out, formulas as plain text."""
    main = page[page.find('<main class="site-main">'):page.rfind("<footer")]
    main = MATH_ELEMENT.sub(lambda m: m[1], PROMPT.sub("", main))
    parser = Sections()
    parser.feed(main)
    for s in parser.sections:
        s["text"] = " ".join(s["text"].split())
    return parser.sections


def course_nav(current: str, pages: dict) -> str:
    """Every notebook with its sections; the current one open, with its subsections too."""
    items = []
    for href, (page_title, found) in pages.items():
        here = href == current
        links = "".join(
            f'<li class="level-{s["level"]}"><a href="{"" if here else href}#'
            f'{html.escape(s["id"])}">{html.escape(s["heading"])}</a></li>'
            for s in found if s["level"] == 2 or (here and s["level"] == 3))
        items.append(f'<li{" class=current" if here else ""}><details{" open" if here else ""}>'
                     f'<summary><a href="{href}">{html.escape(page_title)}</a></summary>'
                     f"<ul>{links}</ul></details></li>")
    return f'<ol class="site-course">{"".join(items)}</ol>'


def teaches(readme: Path, stems) -> dict:
    """What each notebook teaches and its study time, from README.md's table of notebooks."""
    rows = {m[1]: (m[2], m[3]) for m in NOTEBOOK_ROW.finditer(readme.read_text())}
    missing = [stem for stem in stems if stem not in rows]
    if missing:
        raise ValueError(f"{readme.name}'s table of notebooks has no row for {missing}")
    return rows


def contents(pages: dict, rows: dict) -> str:
    """index.html's table of contents: titles, what each notebook teaches, its sections."""
    items = []
    for href, (page_title, found) in pages.items():
        what, time = rows[href.removesuffix(".html")]
        links = " · ".join(f'<a href="{href}#{html.escape(s["id"])}">'
                           f'{html.escape(s["heading"])}</a>' for s in found if s["level"] == 2)
        items.append(f'<li><a class="notebook" href="{href}">{html.escape(page_title)}</a>'
                     f'<div class="teaches">{markdown2html_mistune(what).strip()} '
                     f"<em>({html.escape(time)})</em></div>"
                     f'<div class="sections">{links}</div></li>')
    return (f"# {TITLE}\n\nA course that builds a neural network from OpenCL kernels up, "
            f"executed and stored as the notebooks ran; read the notebooks in order.\n\n"
            f'<ol class="site-contents">{"".join(items)}</ol>\n')


def exporter() -> HTMLExporter:
    template = (SITE / "page.html.j2").read_text(encoding="utf-8")
    exp = HTMLExporter(template_name="lab", template_file="site.html.j2",
                       extra_loaders=[jinja2.DictLoader({"site.html.j2": template})])
    exp.register_preprocessor(ExtractOutputPreprocessor, enabled=True)
    return exp


def render(nb, exp: HTMLExporter, stem: str, out: Path) -> str:
    """The page of ``nb`` (its figures written under ``<out>/figures/``), with the course
    navigation still to insert at <!--SITE-NAV-->."""
    formulas = []
    for cell in nb.cells:
        if cell.cell_type == "markdown":
            cell.source = tokenize_maths(cell.source, formulas)
    page, resources = exp.from_notebook_node(
        nb, resources={"unique_key": stem, "output_files_dir": "figures"})
    for name, data in resources.get("outputs", {}).items():
        (out / name).parent.mkdir(parents=True, exist_ok=True)
        (out / name).write_bytes(data)
    return scrolling_tables(insert_maths(page, formulas))


def search_index(pages: dict) -> str:
    """search-index.js: one entry per section of every notebook."""
    entries = [{"page": page_title, "heading": s["heading"] or page_title,
                "href": f"{href}#{s['id']}", "text": s["text"]}
               for href, (page_title, found) in pages.items() for s in found]
    return "const SEARCH_INDEX = " + json.dumps(entries, ensure_ascii=False) + ";\n"


def load(path: Path) -> nbformat.NotebookNode:
    """The notebook's cells as its .py source has them (text, captions), with the outputs
    stored in its .ipynb (jupytext pairs cells by their source)."""
    stored = nbformat.read(path, as_version=4)
    source = path.with_suffix(".py")
    return combine_inputs_with_outputs(jupytext.read(source), stored) if source.is_file() \
        else stored


def page_notebook(markdown: str, name: str, **site) -> nbformat.NotebookNode:
    return nbformat.v4.new_notebook(
        cells=[nbformat.v4.new_markdown_cell(markdown)],
        metadata={"title": f"{name} · {TITLE}" if name else TITLE, "site": site})


def build(out: Path, notebook_dir: Path = ROOT / "notebooks") -> list[Path]:
    """Write the site under ``out``; returns the pages, contents first."""
    paths = sorted(notebook_dir.glob("[0-9][0-9]_*.ipynb"))
    if not paths:
        raise FileNotFoundError(f"no notebooks NN_*.ipynb in {notebook_dir}")
    rows = teaches(ROOT / "README.md", [p.stem for p in paths])
    notebooks = {p.stem: load(p) for p in paths}
    order = [f"{stem}.html" for stem in notebooks]
    titles = {f"{stem}.html": title(nb, stem) for stem, nb in notebooks.items()}
    links = {stem[:2]: f"{stem}.html" for stem in notebooks}
    exp = exporter()
    out.mkdir(parents=True, exist_ok=True)
    for name in ASSETS:
        shutil.copyfile(SITE / name, out / name)

    rendered, found = {}, {}
    for i, (stem, nb) in enumerate(notebooks.items()):
        for cell in nb.cells:
            if cell.cell_type == "markdown":
                cell.source = link_references(cell.source, links)
        static_widgets(nb)
        clean(nb)
        number_figures(nb, stem)
        near = {"prev": i - 1, "next": i + 1}
        nb.metadata["site"] = {k: {"href": order[j], "title": titles[order[j]]}
                               for k, j in near.items() if 0 <= j < len(order)}
        nb.metadata["title"] = titles[f"{stem}.html"]
        page = f"{stem}.html"
        rendered[page] = render(nb, exp, stem, out)
        found[page] = (titles[page], sections(rendered[page]))
    rendered["index.html"] = render(page_notebook(contents(found, rows), ""), exp, "index", out)
    rendered["search.html"] = render(page_notebook(SEARCH_PAGE, "Search", search=True),
                                     exp, "search", out)
    for name, page in rendered.items():
        nav = course_nav(name, found)
        (out / name).write_text(page.replace("<!--SITE-NAV-->", nav), encoding="utf-8")
    (out / "search-index.js").write_text(search_index(found), encoding="utf-8")
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
