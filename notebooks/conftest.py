"""nbval settings: outputs that vary by process or device are not compared."""


def pytest_collectstart(collector):
    if collector.path.suffix == ".ipynb":
        collector.skip_compare += ("stderr", "text/html", "application/javascript",
                                   "application/vnd.jupyter.widget-view+json")
