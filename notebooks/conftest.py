"""nbval settings: outputs that vary by process or device are not compared."""


def pytest_collectstart(collector):
    if collector.path.suffix == ".ipynb":
        collector.skip_compare += ("stderr", "text/html", "application/javascript",
                                   "application/vnd.jupyter.widget-view+json")


# The longest notebooks first (a stable sort: each notebook's cells keep their order):
# pytest-xdist (`make test`, --dist loadfile) hands out notebooks in this order, so the
# short ones fill in around the long ones instead of one long notebook running alone last.
LONGEST_FIRST = ("03_cpu_vs_gpu.ipynb", "07_catch.ipynb", "04_optimizers.ipynb",
                 "02_train_fractal_classifier.ipynb")


def pytest_collection_modifyitems(items):
    rank = {name: i for i, name in enumerate(LONGEST_FIRST)}
    items.sort(key=lambda item: rank.get(item.path.name, len(rank)))
