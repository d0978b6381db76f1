"""Build a static HTML site of the executed workbook from the stored notebooks/NN_*.ipynb.

    python tools/build_site.py --out build/site

Nothing is executed: the pages show the outputs stored in the .ipynb files (those nbval
checks). The site is complete offline and loads nothing from another host: maths is turned
into MathML at build time (latex2mathml; browsers typeset MathML themselves), widget panels
are drawn from the widget state stored in the notebook (a labelled, static picture of the
controls and of the panel's stored output), and search runs in the page over an index
written next to the pages (search.js). index.html lists the notebooks in reading order;
every page has a table of its sections, links to the contents and to the previous and next
notebook; "notebook NN" in the text links to that notebook's page; figures are written to
<out>/figures/. Exercise and nbval markers are left out of the code shown, and the names of
OpenCL devices out of the outputs shown.
"""

import argparse
import html
import json
import math
import re
import sys
from html.parser import HTMLParser
from pathlib import Path

import jinja2
import nbformat
from latex2mathml.converter import convert as tex_to_mathml
from nbconvert import HTMLExporter
from nbconvert.preprocessors import ExtractOutputPreprocessor

ROOT = Path(__file__).resolve().parent.parent
TITLE = "nnlib · the OpenCL neural-net workbook"
REFERENCE = re.compile(r"(?<!\[)\bnotebook (\d\d)\b")
# Comment lines for nbval and for tools/make_exercises.py, in Python or OpenCL C
MARKER_LINE = re.compile(r"^\s*(#+|//)\s*(###\s*)?(NBVAL_\w+|BEGIN SOLUTION|END SOLUTION|"
                         r"BEGIN HIDDEN TESTS|END HIDDEN TESTS|HINT:|STUB:).*(\n|$)", re.MULTILINE)
# OpenCL device names as runtimes report them: PoCL's CPU devices, then GPU vendors' names
WORD = r"(?:[^\s|()'\",]|\((?:R|TM)\))+"
DEVICE_NAME = re.compile(rf"\b(?:pthread|cpu)-{WORD}(?: {WORD})*"
                         rf"|\b(?:NVIDIA|GeForce|Quadro|Tesla|Radeon|Intel\(R\)|Apple M\d)"
                         rf"(?: {WORD})*")
CODE = re.compile(r"(```.*?```|`[^`\n]*`)", re.DOTALL)
MATH = re.compile(r"\$\$(.+?)\$\$|(?<![\\$])\$(?![\s$])((?:\\.|[^$\\])+?)(?<!\s)\$", re.DOTALL)
MATH_TOKEN = re.compile(r"MATHxx(\d+)xx")
WIDGET_VIEW = "application/vnd.jupyter.widget-view+json"
WIDGET_STATE = "application/vnd.jupyter.widget-state+json"

TEMPLATE = """{%- extends 'index.html.j2' -%}
{%- macro neighbours(site) -%}
  <a href="index.html">Contents</a>
  {% if site.prev %}<a rel="prev" href="{{ site.prev.href }}">\
← {{ site.prev.title | e }}</a>{% endif %}
  {% if site.next %}<a rel="next" href="{{ site.next.href }}">\
{{ site.next.title | e }} →</a>{% endif %}
{%- endmacro -%}
{%- block html_head_js -%}{%- endblock html_head_js -%}
{%- block jupyter_widgets -%}{%- endblock jupyter_widgets -%}
{%- block html_head_js_mathjax -%}{%- endblock html_head_js_mathjax -%}
{%- block html_head_js_mermaidjs -%}{%- endblock html_head_js_mermaidjs -%}
{%- block extra_css -%}<link rel="stylesheet" href="site.css">{%- endblock extra_css -%}
{%- block body_header -%}
{{ super() }}
<header class="site-bar">{{ neighbours(nb.metadata.site) }}
  <form class="site-search" action="search.html"><input name="q" type="search" \
placeholder="Search the course" aria-label="Search the course"></form>
</header>
<nav class="site-toc" aria-label="On this page"><!--SITE-TOC--></nav>
{%- endblock body_header -%}
{%- block body_footer -%}
<footer class="site-bar">{{ neighbours(nb.metadata.site) }}</footer>
{{ super() }}
{%- endblock body_footer -%}
"""

CSS = """
body.jp-Notebook { margin: 0 auto; max-width: 1100px; padding: 0 1em 0 16em; }
.site-bar { display: flex; flex-wrap: wrap; gap: 1.5em; align-items: center;
  padding: 0.6em 0; border-bottom: 1px solid #ddd; font-family: var(--jp-ui-font-family); }
footer.site-bar { border-top: 1px solid #ddd; border-bottom: none; margin-top: 2em; }
.site-search { margin-left: auto; }
.site-search input { width: 14em; padding: 0.2em 0.4em; }
.site-toc { position: fixed; top: 1em; left: 1em; width: 14em; max-height: 90vh;
  overflow-y: auto; font: 13px var(--jp-ui-font-family); }
.site-toc a { display: block; padding: 0.15em 0; color: #333; text-decoration: none; }
.site-toc a.level-3 { padding-left: 1em; }
.site-toc a:hover { text-decoration: underline; }
@media (max-width: 900px) {
  body.jp-Notebook { padding-left: 1em; }
  .site-toc { position: static; width: auto; max-height: none; }
}
math { font-size: 1.1em; }
math[display="block"] { margin: 0.8em 0; }
.widget-static { border: 1px solid #bbb; border-radius: 4px; padding: 0.6em 0.8em;
  background: #fafafa; font-family: var(--jp-ui-font-family); }
.widget-static .note { color: #555; font-size: 0.9em; margin-bottom: 0.4em; }
.widget-static label { display: inline-block; min-width: 18em; }
.widget-static .row { margin: 0.25em 0; }
.site-plain { font-family: system-ui, sans-serif; line-height: 1.4; }
#results li { margin: 0.6em 0; }
#results .where { color: #555; }
"""

SEARCH_PAGE = """<!DOCTYPE html>
<html lang="en"><head><meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1.0">
<title>Search · {title}</title><link rel="stylesheet" href="site.css"></head>
<body class="jp-Notebook site-plain"><header class="site-bar"><a href="index.html">Contents</a>
<form class="site-search" action="search.html"><input id="q" name="q" type="search"
placeholder="Search the course" aria-label="Search the course"></form></header>
<main><h1>Search</h1><p id="summary"></p><ol id="results"></ol></main>
<script src="search.js"></script>
<script>
const query = new URLSearchParams(location.search).get("q") || "";
document.getElementById("q").value = query;
const words = query.toLowerCase().split(/\\s+/).filter(w => w);
const hits = SEARCH_INDEX.map(entry => {{
  const text = entry.text.toLowerCase(), heading = entry.heading.toLowerCase();
  let score = 0;
  for (const w of words) {{
    if (!text.includes(w) && !heading.includes(w)) return null;
    score += text.split(w).length - 1 + 5 * (heading.split(w).length - 1);
  }}
  return {{entry, score}};
}}).filter(h => h && words.length).sort((a, b) => b.score - a.score);
document.getElementById("summary").textContent = words.length
  ? `${{hits.length}} sections match “${{query}}”.` : "Type words to look for in the box above.";
const list = document.getElementById("results");
for (const {{entry}} of hits.slice(0, 50)) {{
  const item = document.createElement("li"), link = document.createElement("a");
  link.href = entry.href; link.textContent = entry.heading;
  const where = document.createElement("div"); where.className = "where";
  where.textContent = entry.page;
  const text = entry.text, at = Math.max(0, text.toLowerCase().indexOf(words[0]) - 80);
  const excerpt = document.createElement("div");
  excerpt.textContent = (at ? "…" : "") + text.slice(at, at + 240) + "…";
  item.append(link, where, excerpt); list.append(item);
}}
</script></body></html>
"""


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


def hide_device_names(text: str) -> str:
    """OpenCL device names replaced by a neutral word; padded to the name's width in a table."""
    def neutral(m):
        in_column = m.string[m.end():m.end() + 2] == "  "
        return "[device name]".ljust(len(m[0]) if in_column else 0)
    return DEVICE_NAME.sub(neutral, text)


def mathml(tex: str, display: bool) -> str:
    """MathML for one TeX formula; raises ValueError where the converter left TeX behind."""
    tex = re.sub(r"\\[Bb]igg?(?=\\[lr](floor|ceil|vert|Vert|angle))", "", tex)
    out = tex_to_mathml(tex, display="block" if display else "inline")
    leftover = re.sub(r"<[^>]+>", "", out)
    if "\\" in leftover:
        raise ValueError(f"latex2mathml could not convert {tex!r}")
    return out


def tokenize_maths(text: str, formulas: list) -> str:
    """Replace each formula outside code by a token ``MATHxxNxx``; append its MathML to
    ``formulas`` (tokens pass through Markdown untouched, the MathML goes in afterwards)."""
    def token(m):
        display = m[1] is not None
        formulas.append((mathml(m[1] if display else m[2], display), m[0]))
        return f"MATHxx{len(formulas) - 1}xx"
    parts = CODE.split(text)
    return "".join(part if i % 2 else MATH.sub(token, part) for i, part in enumerate(parts))


def insert_maths(page: str, formulas: list) -> str:
    """Tokens in tag attributes (heading ids) become plain text, in the text MathML."""
    def plain(m):
        return re.sub(r"\W+", "", formulas[int(m[1])][1])
    page = re.sub(r"<[^<>]*>", lambda tag: MATH_TOKEN.sub(plain, tag[0]), page)
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
    """Markers out of the code, device names out of the outputs."""
    for cell in nb.cells:
        if cell.cell_type != "code":
            continue
        cell.source = strip_markers(cell.source).strip("\n")
        for output in cell.outputs:
            if "text" in output:
                output["text"] = hide_device_names(strip_markers(output["text"]))
            for mime in ("text/plain", "text/html"):
                if mime in output.get("data", {}):
                    output["data"][mime] = hide_device_names(output["data"][mime])
            if "evalue" in output:
                output["evalue"] = hide_device_names(output["evalue"])
                output["traceback"] = [hide_device_names(t) for t in output["traceback"]]


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
    parser = Sections()
    parser.feed(page)
    for s in parser.sections:
        s["text"] = " ".join(s["text"].split())
    return parser.sections


def toc_html(found: list) -> str:
    links = [f'<a class="level-{s["level"]}" href="#{html.escape(s["id"])}">'
             f'{html.escape(s["heading"])}</a>' for s in found if s["level"] > 1]
    return "<strong>On this page</strong>" + "".join(links) if links else ""


def exporter() -> HTMLExporter:
    exp = HTMLExporter(template_name="lab", template_file="site.html.j2",
                       extra_loaders=[jinja2.DictLoader({"site.html.j2": TEMPLATE})])
    exp.register_preprocessor(ExtractOutputPreprocessor, enabled=True)
    return exp


def render(nb, exp: HTMLExporter, stem: str, out: Path) -> list:
    """Write ``<out>/<stem>.html`` and its figures under ``<out>/figures/``; returns the
    page's sections (for the search index)."""
    formulas = []
    for cell in nb.cells:
        if cell.cell_type == "markdown":
            cell.source = tokenize_maths(cell.source, formulas)
    page, resources = exp.from_notebook_node(
        nb, resources={"unique_key": stem, "output_files_dir": "figures"})
    for name, data in resources.get("outputs", {}).items():
        (out / name).parent.mkdir(parents=True, exist_ok=True)
        (out / name).write_bytes(data)
    page = insert_maths(page, formulas)
    found = sections(page)
    page = page.replace("<!--SITE-TOC-->", toc_html(found), 1)
    (out / f"{stem}.html").write_text(page, encoding="utf-8")
    return found


def search_index(pages: dict) -> str:
    """search.js: one entry per section of every page."""
    entries = [{"page": page_title, "heading": s["heading"] or page_title,
                "href": f"{href}#{s['id']}", "text": s["text"]}
               for href, (page_title, found) in pages.items() for s in found]
    return "const SEARCH_INDEX = " + json.dumps(entries, ensure_ascii=False) + ";\n"


def build(out: Path, notebook_dir: Path = ROOT / "notebooks") -> list[Path]:
    """Write the site under ``out``; returns the pages, contents first."""
    paths = sorted(notebook_dir.glob("[0-9][0-9]_*.ipynb"))
    if not paths:
        raise FileNotFoundError(f"no notebooks NN_*.ipynb in {notebook_dir}")
    notebooks = {p.stem: nbformat.read(p, as_version=4) for p in paths}
    order = [f"{stem}.html" for stem in notebooks]
    titles = {f"{stem}.html": title(nb, stem) for stem, nb in notebooks.items()}
    pages = {stem[:2]: f"{stem}.html" for stem in notebooks}
    exp = exporter()
    out.mkdir(parents=True, exist_ok=True)
    (out / "site.css").write_text(CSS, encoding="utf-8")
    (out / "search.html").write_text(SEARCH_PAGE.format(title=html.escape(TITLE)),
                                     encoding="utf-8")

    contents = "\n".join(f"{i + 1}. [{titles[page]}]({page})" for i, page in enumerate(order))
    index = nbformat.v4.new_notebook(metadata={"title": TITLE, "site": {}})
    index.cells = [nbformat.v4.new_markdown_cell(f"# {TITLE}\n\nThe notebooks in reading order, "
                                                 f"executed:\n\n{contents}")]
    found = {"index.html": (TITLE, render(index, exp, "index", out))}

    for i, (stem, nb) in enumerate(notebooks.items()):
        for cell in nb.cells:
            if cell.cell_type == "markdown":
                cell.source = link_references(cell.source, pages)
        static_widgets(nb)
        clean(nb)
        near = {"prev": i - 1, "next": i + 1}
        nb.metadata["site"] = {k: {"href": order[j], "title": titles[order[j]]}
                               for k, j in near.items() if 0 <= j < len(order)}
        nb.metadata["title"] = titles[f"{stem}.html"]
        found[f"{stem}.html"] = (titles[f"{stem}.html"], render(nb, exp, stem, out))
    (out / "search.js").write_text(search_index(found), encoding="utf-8")
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
