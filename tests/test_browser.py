"""What a reader sees, in headless Chromium (Debian's chromium + chromium-driver, driven by
selenium; `make browser` installs them as root): every page of the static site offline, with
its maths typeset, its figures loaded and no request failing or leaving the machine; and
JupyterLab, started here on 127.0.0.1, running notebook 00 to the end and showing the widget
panel stored in notebook 04 before anything has run. Screenshots go to build/browser/."""

import json
import shutil
import socket
import subprocess
import sys
import time
import urllib.request

import pytest

from .isolated import ROOT, child_env
from .tools import load_tool

SHOTS = ROOT / "build" / "browser"
CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")
DRIVER = shutil.which("chromedriver")
webdriver = pytest.importorskip("selenium.webdriver", reason="selenium is not installed "
                                "(pip install -e '.[test]')")
pytestmark = pytest.mark.skipif(
    not (CHROMIUM and DRIVER),
    reason="no headless Chromium: `make browser` installs Debian's chromium and "
           "chromium-driver when run as root (apt-get install chromium chromium-driver)")
LOCAL = ("file:", "data:", "about:", "blob:", "chrome:", "devtools:", "http://127.0.0.1")


def wait_for(condition, seconds: float, what: str):
    """Poll ``condition()`` until it returns something true; fail after ``seconds``."""
    end = time.monotonic() + seconds
    while time.monotonic() < end:
        value = condition()
        if value:
            return value
        time.sleep(0.25)
    pytest.fail(f"timed out after {seconds:.0f} s waiting for {what}")


@pytest.fixture(scope="module")
def browser():
    options = webdriver.ChromeOptions()
    options.binary_location = CHROMIUM
    for arg in ("--headless=new", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage",
                "--window-size=1300,1000", "--no-first-run",
                # offline: every host name but the loopback address fails to resolve
                "--host-resolver-rules=MAP * ~NOTFOUND, EXCLUDE 127.0.0.1"):
        options.add_argument(arg)
    options.set_capability("goog:loggingPrefs", {"performance": "ALL"})
    driver = webdriver.Chrome(options=options, service=webdriver.ChromeService(DRIVER))
    SHOTS.mkdir(parents=True, exist_ok=True)
    yield driver
    driver.quit()


def network(driver) -> dict:
    """Requests since the last call: every URL, the ones that left the machine and the ones
    that failed (from Chromium's performance log)."""
    urls, failed = {}, []
    for entry in driver.get_log("performance"):
        message = json.loads(entry["message"])["message"]
        params = message.get("params", {})
        if message["method"] == "Network.requestWillBeSent":
            urls[params["requestId"]] = params["request"]["url"]
        elif message["method"] == "Network.loadingFailed" and not params.get("canceled"):
            failed.append(urls.get(params["requestId"], params["requestId"]))
    outside = [u for u in urls.values() if not u.startswith(LOCAL)]
    return {"requests": len(urls), "outside": outside, "failed": failed}


@pytest.fixture(scope="module")
def site(tmp_path_factory):
    out = tmp_path_factory.mktemp("site")
    pages = load_tool("build_site").build(out)
    return [out / "search.html"] + pages


RENDERED = """
const text = (document.querySelector(".site-main") || document.body).innerText;
const images = [...document.images];
const maths = [...document.querySelectorAll('math')];
return {tex: ['$$', '$\\\\'].filter(s => text.includes(s)),
        images: images.length,
        broken: images.filter(i => !i.complete || i.naturalWidth === 0).map(i => i.src),
        maths: maths.length,
        unlaid: maths.filter(m => m.getBoundingClientRect().width === 0).length};
"""


def open_at(browser, page, anchor: str) -> None:
    """Open ``page`` scrolled to the element ``anchor`` by script: Chrome's driver can time out
    ("aborted by navigation") on a get() of a URL with a fragment."""
    browser.get(page.as_uri())
    browser.execute_script(f"document.getElementById('{anchor}').scrollIntoView()")


def test_site_pages_render_offline(browser, site):
    network(browser)
    totals = {}
    for page in site:
        browser.get(page.as_uri() + ("?q=adam" if page.name == "search.html" else ""))
        wait_for(lambda: browser.execute_script("return document.readyState") == "complete",
                 30, f"{page.name} to load")
        seen = browser.execute_script(RENDERED)
        seen.update(network(browser))
        totals[page.name] = seen
        browser.save_screenshot(str(SHOTS / f"site_{page.stem}.png"))
    if "01_dense_kernels.html" in totals:  # a page of formulas, scrolled to them
        open_at(browser, site[0].with_name("01_dense_kernels.html"), "The-maths")
        browser.save_screenshot(str(SHOTS / "site_maths.png"))
    (SHOTS / "site_network.json").write_text(json.dumps(totals, indent=1))
    for name, seen in totals.items():
        assert not seen["tex"], f"{name}: raw TeX {seen['tex']} in the rendered text"
        assert not seen["unlaid"], f"{name}: {seen['unlaid']} formulas not laid out"
        assert not seen["broken"], f"{name}: figures not loaded {seen['broken']}"
        assert not seen["outside"] and not seen["failed"], f"{name}: {seen}"
    assert sum(s["maths"] for s in totals.values()) > 100
    assert sum(s["images"] for s in totals.values()) > 10


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture(scope="module")
def lab(tmp_path_factory):
    """JupyterLab on 127.0.0.1 over a copy of the notebooks (running them changes no file
    here), with its own settings and workspace folders, no token; yields its URL."""
    home = tmp_path_factory.mktemp("lab")
    shutil.copytree(ROOT / "notebooks", home / "notebooks",
                    ignore=shutil.ignore_patterns("*.py", "__pycache__", ".ipynb_checkpoints"))
    for folder in ("kernels", "data", "puzzles"):
        (home / folder).symlink_to(ROOT / folder)
    news = home / "settings" / "@jupyterlab" / "apputils-extension"
    news.mkdir(parents=True)
    (news / "notification.jupyterlab-settings").write_text('{"fetchNews": "false"}')
    port = free_port()
    env = child_env(JUPYTERLAB_SETTINGS_DIR=str(home / "settings"),
                    JUPYTERLAB_WORKSPACES_DIR=str(home / "workspaces"),
                    JUPYTER_RUNTIME_DIR=str(home / "runtime"), JUPYTER_DATA_DIR=str(home / "data"))
    # Lab draws widget views only in trusted notebooks (`make lab` trusts them the same way)
    subprocess.run([sys.executable, "-m", "jupyter", "trust",
                    *map(str, (home / "notebooks").glob("*.ipynb"))],
                   env=env, check=True, capture_output=True)
    server = subprocess.Popen(
        [sys.executable, "-m", "jupyterlab", "--no-browser", "--ip=127.0.0.1", f"--port={port}",
         "--ServerApp.token=", "--ServerApp.password=", "--allow-root",
         "--LabApp.expose_app_in_browser=True",
         f"--ServerApp.root_dir={home / 'notebooks'}"],
        env=env, stdout=subprocess.DEVNULL, stderr=open(home / "lab.log", "w"))
    url = f"http://127.0.0.1:{port}"

    def up():
        try:
            return urllib.request.urlopen(f"{url}/api/status", timeout=2).status == 200
        except OSError:
            return server.poll() is not None  # stop waiting if it died
    wait_for(up, 60, "JupyterLab to start")
    assert server.poll() is None, (home / "lab.log").read_text()[-2000:]
    yield url
    server.terminate()
    server.wait(timeout=30)


NOTEBOOK_STATE = """
const panel = window.jupyterapp && window.jupyterapp.shell.currentWidget;
if (!panel || !panel.content || !panel.content.model || !panel.sessionContext.session) return null;
const cells = panel.content.model.toJSON().cells.filter(c => c.cell_type === 'code');
return {path: panel.context.path, kernel: panel.sessionContext.session.kernel.status,
        pending: cells.filter(c => c.execution_count === null).length,
        errors: cells.flatMap(c => c.outputs).filter(o => o.output_type === 'error')
                     .map(o => o.ename + ': ' + o.evalue)};
"""


def open_notebook(browser, url: str, name: str) -> dict:
    browser.get(f"{url}/lab/tree/{name}")
    def opened():
        state = browser.execute_script(NOTEBOOK_STATE)
        return state if state and state["path"] == name and state["kernel"] == "idle" else None
    return wait_for(opened, 120, f"{name} to open with an idle kernel")


def test_lab_runs_notebook_00_to_the_end(browser, lab):
    open_notebook(browser, lab, "00_devices.ipynb")
    browser.execute_script("return window.jupyterapp.commands.execute("
                           "'notebook:clear-all-cell-outputs')")
    assert browser.execute_script(NOTEBOOK_STATE)["pending"] > 0
    browser.execute_script("window.jupyterapp.commands.execute('notebook:run-all-cells')")

    def finished():
        state = browser.execute_script(NOTEBOOK_STATE)
        done = state["errors"] or (state["pending"] == 0 and state["kernel"] == "idle")
        return state if done else None
    state = wait_for(finished, 300, "notebook 00 to run to the end")
    browser.save_screenshot(str(SHOTS / "lab_00_run.png"))
    assert not state["errors"], state["errors"]


SCROLL_TO = """
const notebook = window.jupyterapp.shell.currentWidget.content;
const i = notebook.widgets.findIndex(c => c.model.sharedModel.getSource().includes(arguments[0]));
notebook.activeCellIndex = i;
notebook.scrollToItem(i, 'start');
return i;
"""


def test_lab_shows_the_stored_widget_panel_of_04(browser, lab):
    """Before anything runs: the panel comes from the widget state stored in the notebook."""
    state = open_notebook(browser, lab, "04_optimizers.ipynb")
    assert browser.execute_script(SCROLL_TO, "interact_manual") > 0
    labels = wait_for(lambda: browser.execute_script(
        "return [...document.querySelectorAll('.jupyter-widgets .widget-label')]"
        ".map(e => e.textContent);"), 60, "04's widget panel")
    browser.execute_script("document.querySelector('.widget-interact')"
                           ".scrollIntoView({block: 'center'})")
    time.sleep(1)
    browser.save_screenshot(str(SHOTS / "lab_04_widgets.png"))
    assert "learning rate (per step)" in labels, labels
    assert browser.execute_script(NOTEBOOK_STATE)["pending"] == state["pending"]  # ran nothing


PHONE = """
const menu = document.querySelector('details.site-menu');
const rules = [...document.querySelectorAll('.table-scroll')];
return {page: document.documentElement.scrollWidth, viewport: window.innerWidth,
        menuOpen: menu.open, menuHeight: menu.getBoundingClientRect().height,
        sidebar: getComputedStyle(document.querySelector('.site-sidebar')).display,
        main: document.querySelector('.site-main').getBoundingClientRect().top,
        tables: rules.map(t => [t.scrollWidth, t.clientWidth, getComputedStyle(t).overflowX])};
"""


def test_phone_width_scrolls_only_inside_boxes(browser, site):
    """At 390 px: the menu is collapsed above the text, no page scrolls sideways, and a
    table wider than the screen (04's rules) scrolls in its own box."""
    browser.execute_cdp_cmd("Emulation.setDeviceMetricsOverride", {
        "width": 390, "height": 844, "deviceScaleFactor": 1, "mobile": True})
    try:
        seen = {}
        for page in site[1:]:
            browser.get(page.as_uri())
            wait_for(lambda: browser.execute_script("return window.innerWidth") == 390, 10,
                     "the phone's width")
            seen[page.name] = browser.execute_script(PHONE)
        open_at(browser, site[0].with_name("04_optimizers.html"), "The-rules")
        browser.save_screenshot(str(SHOTS / "phone_04_rules.png"))
    finally:
        browser.execute_cdp_cmd("Emulation.clearDeviceMetricsOverride", {})
    for name, s in seen.items():
        assert s["page"] <= s["viewport"], f"{name} scrolls sideways: {s}"
        assert not s["menuOpen"] and s["sidebar"] == "none" and s["main"] < 150, (name, s)
        assert all(overflow == "auto" for _, _, overflow in s["tables"]), (name, s)
    assert any(wide > shown for wide, shown, _ in seen["04_optimizers.html"]["tables"])


FIGURE = """
const figure = document.querySelector('figure.site-figure');
const img = figure.querySelector('img');
return {caption: figure.querySelector('figcaption').innerText, alt: img.alt,
        loaded: img.complete && img.naturalWidth > 0,
        below: figure.querySelector('figcaption').getBoundingClientRect().top >=
               img.getBoundingClientRect().bottom};
"""


def test_a_figure_is_shown_with_its_number_and_caption(browser, site):
    """The page's first figure: its image loads (waited for: get() may return before the
    image is decoded on a loaded machine), numbered caption below it, alt text from it."""
    browser.get(site[0].with_name("03_cpu_vs_gpu.html").as_uri())

    def loaded():
        seen = browser.execute_script(FIGURE)
        return seen if seen["loaded"] else None
    seen = wait_for(loaded, 20, "notebook 03's first figure to load")
    assert seen["caption"].startswith("Figure 3.1: ") and seen["below"], seen
    assert seen["alt"] and seen["alt"] in seen["caption"], seen


ACCENT = """
const font = parseFloat(getComputedStyle(document.querySelector('math')).fontSize);
const hats = [...document.querySelectorAll('mover[accent="true"]')].map(m => {
  const base = m.children[0].getBoundingClientRect(), mark = m.children[1].getBoundingClientRect();
  return (base.top - mark.bottom) / font;
});
const sums = [...document.querySelectorAll('math[display="block"] munder > mo:first-child')]
  .filter(mo => !mo.closest('mfrac')).map(mo => mo.getBoundingClientRect().height / font);
return {hats, font, sums,
        widths: [...document.querySelectorAll('math')].map(m => m.getBoundingClientRect().width)};
"""


@pytest.mark.parametrize("name", ["01_dense_kernels.html", "06_attention_primer.html"])
def test_formulas_are_typeset_with_accents_on_their_letters(browser, site, name):
    """MathML laid out with the maths font: each hat or bar sits on its letter (06's x̂: a
    gap under a fifth of the font size), and a display sum (01's bias gradient) is taller
    than the text around it."""
    browser.get(site[0].with_name(name).as_uri())
    wait_for(lambda: browser.execute_script("return document.fonts.status") == "loaded",
             30, "the maths font")
    seen = browser.execute_script(ACCENT)
    assert all(-0.3 < gap < 0.2 for gap in seen["hats"]), seen["hats"]
    assert all(height > 1.3 for height in seen["sums"]), seen["sums"]
    assert seen["hats" if name.startswith("06") else "sums"], seen
    assert all(width > 0 for width in seen["widths"])


def test_search_marks_the_query_in_results_and_on_the_page(browser, site):
    browser.get(site[0].with_name("search.html").as_uri() + "?q=softmax")
    results = wait_for(lambda: browser.execute_script(
        "return [...document.querySelectorAll('#results li')].map(li => "
        "[li.querySelector('a').href, [...li.querySelectorAll('mark')].map(m => m.textContent)])"),
        10, "search results")
    assert all(marks and all(m.lower() == "softmax" for m in marks) for _, marks in results[:5])
    assert not any("In [" in text for text in browser.execute_script(
        "return [...document.querySelectorAll('#results p')].map(p => p.textContent)"))
    browser.get(results[0][0])  # the page marks the query once its script has run
    marks = wait_for(lambda: browser.execute_script(
        "return [...document.querySelectorAll('.site-main mark')].map(m => m.textContent)"),
        10, "the query marked on the page")
    browser.save_screenshot(str(SHOTS / "search_target.png"))
    assert all(m.lower() == "softmax" for m in marks)
