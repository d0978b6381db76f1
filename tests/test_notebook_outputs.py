"""Stored outputs that nbval compares hold on every conforming OpenCL device.

A compared output (a code cell without the tag ``nbval-ignore-output`` or ``nbval-skip``)
must not show what differs from device to device: a float32 result's low digits, a device
name, a time or a rate, a loss or a score after training. Measured numbers go into cells
tagged ``nbval-ignore-output``; a cell whose numbers are float64 host arithmetic on
deterministic inputs (they repeat on any device) says so with the tag ``host-float64``.
"""

import configparser
import re
from pathlib import Path

import nbformat
import pytest

NOTEBOOKS = Path(__file__).resolve().parent.parent / "notebooks"
# A printed kernel (nnlib.source) is the same text on every device: its lines are not results.
KERNEL_LINES = {line.strip() for path in (NOTEBOOKS.parent / "kernels").glob("*.cl")
                for line in path.read_text().splitlines() if line.strip()}
STEMS = sorted(p.stem for p in NOTEBOOKS.glob("[0-9][0-9]_*.ipynb"))
IGNORED = {"nbval-ignore-output", "nbval-skip"}

DEVICES = r"pthread-|Oclgrind Simulator|NVIDIA|GeForce|Radeon|\bEPYC\b|\bXeon\b|Intel\(R\)|Apple M\d"
VENDORS = DEVICES + r"|Portable Computing Language|\bPoCL\b"
RULES = {
    # 1.9e-07: the size of a float32 rounding error, which differs between devices
    "a float32 error in scientific notation": re.compile(r"\b\d\.\d+e[-+]?\d+", re.I),
    # 0.12345: digits below float32's reach once a value went through a kernel
    "a number with 4 or more decimals": re.compile(r"(?<![\w.])\d+\.\d{4,}"),
    "a time or a rate": re.compile(
        r"\b\d+(\.\d+)?\s*(ns|us|µs|ms|s|seconds|GFLOP/s|GB/s)(?![\w])"),
    "a device or vendor name": re.compile(VENDORS),
    "a score after training": re.compile(
        r"\b(loss|accuracy|auc\S*|f1|precision|recall)\b\D{0,25}\d\.\d{2,}", re.I),
}
# What float64 host numbers (tag host-float64) may show; the other rules hold there too.
HOST_RULES = ("a number with 4 or more decimals", "a score after training")


def compared_text(cell) -> str:
    """The text nbval compares for one code cell ('' if the cell's output is not compared)."""
    if cell.cell_type != "code" or IGNORED & set(cell.metadata.get("tags", [])):
        return ""
    parts = []
    for out in cell.get("outputs", []):
        if out.output_type == "stream" and out.name == "stdout":
            parts.append(out.text)
        elif out.output_type in ("execute_result", "display_data"):
            parts.append(out.get("data", {}).get("text/plain", ""))
        elif out.output_type == "error":
            parts.append(out.get("evalue", ""))
    return "\n".join(parts)


def problems(nb) -> list[str]:
    """'cell N: <rule>: <matched text>' for every device-dependent thing in compared outputs."""
    found = []
    for index, cell in enumerate(nb.cells):
        text = compared_text(cell)
        host = "host-float64" in cell.metadata.get("tags", [])
        for rule, pattern in RULES.items():
            if host and rule in HOST_RULES:
                continue
            for match in pattern.finditer(text):
                line = text.splitlines()[text[:match.start()].count("\n")].strip()
                if line not in KERNEL_LINES:
                    found.append(f"cell {index} ({cell.source.splitlines()[0][:40]!r}): "
                                 f"{rule}: {line[:100]!r}")
    return found


@pytest.mark.parametrize("stem", STEMS)
def test_compared_outputs_are_device_independent(stem):
    nb = nbformat.read(NOTEBOOKS / f"{stem}.ipynb", as_version=4)
    found = problems(nb)
    assert not found, f"{stem}.ipynb: move these outputs into a cell tagged " \
                      f"nbval-ignore-output (followed by an assertion):\n" + "\n".join(found)


@pytest.mark.parametrize("stem", STEMS)
def test_markers_are_tags_not_comments(stem):
    """Students do not read nbval's comment markers: they are cell tags."""
    nb = nbformat.read(NOTEBOOKS / f"{stem}.ipynb", as_version=4)
    marked = [i for i, c in enumerate(nb.cells) if re.search(r"#\s*NBVAL_", c.source)]
    assert not marked, f"{stem}: cells {marked} use '# NBVAL_...' comments; use cell tags"


def _cell(source, output, tags=()):
    cell = nbformat.v4.new_code_cell(source, metadata={"tags": list(tags)})
    cell.outputs = [nbformat.v4.new_output("stream", name="stdout", text=output)]
    return cell


@pytest.mark.parametrize("output", [
    "max |error| 1.9e-07", "loss: first epoch 0.0312, last 0.0012", "kernel time: 12.5 us",
    "pthread-AMD EPYC 7B13", "dense: 115.0 GFLOP/s", "value 0.12345", "AUC-ROC 0.97"])
def test_scan_names_the_cell_of_a_device_dependent_output(output):
    nb = nbformat.v4.new_notebook(cells=[_cell("print(1)", "ok\n"), _cell("print(x)", output)])
    found = problems(nb)
    assert found and all(f.startswith("cell 1 ('print(x)')") for f in found)


@pytest.mark.parametrize("output,tags", [
    ("max |error| < 1e-5: True", ()), ("train (3000, 240), test (900, 240)", ()),
    ("loss 0.0312 after 12.5 ms", ("nbval-ignore-output",)),
    ("finite difference 0.123456", ("host-float64",)), ("n = 1024: True", ()),
    ("    const float s3 = 0.866025403784438647f; /* sin(2 pi / 3) */" + " " * 26 + "\\", ())])
def test_scan_accepts_device_independent_outputs(output, tags):
    nb = nbformat.v4.new_notebook(cells=[_cell("print(x)", output, tags)])
    assert problems(nb) == []


# A folder of the machine that ran the notebook: an absolute POSIX path or a Windows drive
MACHINE_PATH = re.compile(r"(?<![\w.:/~])/(?:[\w.+-]+/)+[\w.+-]*|\b[A-Za-z]:\\")
PLACEHOLDERS = ("[device name]", "<OPENCL-OBJECT>", "ADDRESS", "TIME", "PATH")


def stored_texts(nb):
    """(cell index, text) of every stored output, those of widget panels included."""
    widgets = nb.metadata.get("widgets", {}).get("application/vnd.jupyter.widget-state+json", {})
    panels = [o for w in widgets.get("state", {}).values() for o in w["state"].get("outputs", [])]
    for index, cell in enumerate(nb.cells):
        for out in cell.get("outputs", []) + (panels if index == len(nb.cells) - 1 else []):
            data = out.get("data", {})
            yield index, "\n".join([out.get("text", ""), data.get("text/plain", ""),
                                    data.get("text/html", ""), *out.get("traceback", [])])


@pytest.mark.parametrize("stem", STEMS)
def test_stored_outputs_are_a_real_run_and_name_no_machine_folder(stem):
    """The reader's edition shows what the device printed: sanitising is nbval's, at
    comparison time (nbval_sanitize.cfg), never in what is stored."""
    nb = nbformat.read(NOTEBOOKS / f"{stem}.ipynb", as_version=4)
    found = [f"cell {i}: {m[0]!r}" for i, text in stored_texts(nb)
             for m in MACHINE_PATH.finditer(text)]
    found += [f"cell {i}: placeholder {p!r}" for i, text in stored_texts(nb)
              for p in PLACEHOLDERS if p in text]
    assert not found, f"{stem}.ipynb: print paths relative to the repository:\n" + \
        "\n".join(found)


def sanitize(text: str) -> str:
    """``text`` as nbval compares it: notebooks/nbval_sanitize.cfg's rules, in order."""
    config = configparser.ConfigParser(interpolation=None)
    config.read(NOTEBOOKS / "nbval_sanitize.cfg")
    for section in config.sections():
        text = re.sub(config[section]["regex"], config[section]["replace"], text)
    return text


@pytest.mark.parametrize("printed, compared", [
    ("PoCL  | pthread-AMD EPYC 7B13   | CPU", "PoCL  | DEVICE   | CPU"),
    ("Runtime(PoCL: cpu-haswell-Intel(R) Core(TM) i7)", "Runtime(PoCL: DEVICE)"),
    ("NVIDIA H100 80GB HBM3, 132 compute units", "DEVICE, 132 compute units"),
    ("Runtime(Intel(R) OpenCL: AMD EPYC)", "Runtime(DEVICE)"),  # Intel's runtime names the
    ("OpenCL: AMD EPYC 7B13 (OpenCL 3.1 LINUX)", "OpenCL: DEVICE (OpenCL 3.1 LINUX)"),  # CPU
    ("Intel(R) Xeon(R) Platinum 8481C CPU @ 2.70GHz | CPU", "DEVICE | CPU"),
    ("CPU: AMD EPYC 7B13; OpenCL: pthread-AMD EPYC 7B13 (OpenCL 3.0)",
     "CPU: MODEL; OpenCL: DEVICE (OpenCL 3.0)"),
    ("dense forward 12.5 us, 3 ms", "dense forward TIME, TIME"),
    ("wrote /home/someone/nnlib/build/bench/launch.json", "wrote PATH"),
    ("<pyopencl.Device 'x' on 'y' at 0x55d0>", "<OPENCL-OBJECT>")])
def test_nbval_compares_without_device_names_times_and_paths(printed, compared):
    assert sanitize(printed) == compared


@pytest.mark.parametrize("stem", STEMS)
def test_sanitised_outputs_name_no_device(stem):
    """What nbval would compare after sanitising names no device or CPU, in any cell."""
    nb = nbformat.read(NOTEBOOKS / f"{stem}.ipynb", as_version=4)
    found = [f"cell {i}: {m[0]!r}" for i, text in stored_texts(nb)
             for m in re.finditer(DEVICES, sanitize(text))]
    assert not found, "\n".join(found)


PRINTED_KERNEL = re.compile(r"print\((nnlib\.source\(.*\))\)\s*(#.*)?")


@pytest.mark.parametrize("stem", STEMS)
def test_printed_kernels_are_the_kernel_files_of_today(stem, monkeypatch):
    """A cell that prints kernels/*.cl (``print(nnlib.source(...))``) stores the file's text
    as it is now: an edited kernel comment means executing the notebook again (nbval would
    fail on it only after the unit tests)."""
    import nnlib

    monkeypatch.chdir(NOTEBOOKS)  # the cells' folder="../kernels"
    nb = nbformat.read(NOTEBOOKS / f"{stem}.ipynb", as_version=4)
    for index, cell in enumerate(nb.cells):
        call = PRINTED_KERNEL.fullmatch(cell.source.strip()) if cell.cell_type == "code" else None
        if call:
            stored = "".join(o.get("text", "") for o in cell.outputs if o.get("name") == "stdout")
            assert stored == eval(call[1], {"nnlib": nnlib}) + "\n", \
                f"{stem}.ipynb cell {index} prints an older {call[1]}: execute it again"
