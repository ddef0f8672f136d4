"""The investigation notebooks execute top to bottom (nbclient + ipykernel), so they never rot.

Each runs in a fresh temporary directory with a kernel spec written for this
very interpreter (so CI needs no `jupyter kernelspec install`), with the
repository on PYTHONPATH. The notebooks are stored without outputs.
"""

from __future__ import annotations

import ast
import importlib
import importlib.util
import json
import os
import sys
import tomllib
from pathlib import Path

import pytest


def need(module: str):
    """Import ``module``; in CI (``CI`` set, where the README's install gives the test extra) a missing
    one fails instead of skipping, so the notebooks can never silently stop being run."""
    if os.environ.get("CI"):
        return importlib.import_module(module)
    return pytest.importorskip(module)


nbformat = need("nbformat")
nbclient = need("nbclient")
need("ipykernel")
need("matplotlib")

ROOT = Path(__file__).resolve().parent.parent
NOTEBOOKS = sorted((ROOT / "notebooks").glob("*.ipynb"))
KERNEL = "popprof-test-python3"


@pytest.fixture(scope="module")
def kernel_name(tmp_path_factory):
    """A kernel spec for the running interpreter, found through JUPYTER_PATH."""
    from ipykernel.kernelspec import write_kernel_spec
    from jupyter_client.kernelspec import KernelSpecManager

    data = tmp_path_factory.mktemp("jupyter")
    write_kernel_spec(str(data / "kernels" / KERNEL))
    patch = pytest.MonkeyPatch()
    import os

    patch.setenv("JUPYTER_PATH", str(data) + os.pathsep + os.environ.get("JUPYTER_PATH", ""))
    patch.setenv("PYTHONPATH", str(ROOT) + os.pathsep + os.environ.get("PYTHONPATH", ""))
    patch.setenv("MPLBACKEND", "module://matplotlib_inline.backend_inline")
    assert KERNEL in KernelSpecManager().find_kernel_specs()
    yield KERNEL
    patch.undo()


def test_four_notebooks_stored_without_outputs():
    assert [p.name for p in NOTEBOOKS] == [
        "01_why_does_it_not_fit.ipynb",
        "02_why_is_it_slow.ipynb",
        "03_what_changed.ipynb",
        "04_trends.ipynb",
    ]
    for path in NOTEBOOKS:
        nb = nbformat.read(path, as_version=4)
        nbformat.validate(nb)
        code = [c for c in nb.cells if c.cell_type == "code"]
        assert code and all(not c.outputs and c.execution_count is None for c in code), path.name
        prose = sum(len(c.source) for c in nb.cells if c.cell_type == "markdown")
        assert prose > 2000, f"{path.name} should explain what the reader sees"


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.stem)
def test_notebook_executes(path, kernel_name, tmp_path):
    nb = nbformat.read(path, as_version=4)
    client = nbclient.NotebookClient(
        nb, timeout=120, kernel_name=kernel_name, resources={"metadata": {"path": str(tmp_path)}}
    )
    client.execute()
    images = sum(
        1 for c in nb.cells if c.cell_type == "code" for o in c.outputs if "image/png" in o.get("data", {})
    )
    errors = [o for c in nb.cells if c.cell_type == "code" for o in c.outputs if o.output_type == "error"]
    assert not errors
    assert images >= 2, f"{path.name} drew {images} figures"


def _extras() -> dict[str, list[str]]:
    return tomllib.loads((ROOT / "pyproject.toml").read_text("utf-8"))["project"]["optional-dependencies"]


def _imported_modules(path: Path) -> set[str]:
    """Top-level modules the code cells of a notebook import."""
    cells = json.loads(path.read_text("utf-8"))["cells"]
    found = set()
    for cell in cells:
        if cell["cell_type"] != "code":
            continue
        source = "".join(cell["source"])
        code = "\n".join(line for line in source.splitlines() if not line.lstrip().startswith(("%", "!")))
        tree = ast.parse(code)  # IPython magics (%matplotlib inline) left out: they are not Python
        for node in ast.walk(tree):
            if isinstance(node, ast.Import):
                found.update(alias.name.split(".")[0] for alias in node.names)
            elif isinstance(node, ast.ImportFrom) and node.module and not node.level:
                found.add(node.module.split(".")[0])
    return found


def _requirement_name(spec: str) -> str:
    name = spec.split(";")[0]
    for sep in "[<>=!~ ":
        name = name.split(sep)[0]
    return name.strip().lower().replace("_", "-")


def test_the_notebooks_extra_provides_what_the_notebooks_import_and_the_test_extra_includes_it():
    extras = _extras()
    assert "popprof[notebooks]" in extras["test"], (
        "the notebook tests must run in the notebooks extra's environment"
    )
    notebooks = {_requirement_name(s) for s in extras["notebooks"]}
    assert {"jupyterlab", "matplotlib", "ipykernel"} <= notebooks
    base = {
        _requirement_name(s)
        for s in tomllib.loads((ROOT / "pyproject.toml").read_text("utf-8"))["project"]["dependencies"]
    }
    providers = importlib.metadata.packages_distributions()
    for path in NOTEBOOKS:
        for module in _imported_modules(path) - {"popprof"} - set(sys.stdlib_module_names):
            dists = {d.lower().replace("_", "-") for d in providers.get(module, [module])}
            assert dists & (base | notebooks), (
                f"{path.name} imports {module}, which no base or notebooks dependency gives"
            )


def test_jupyterlab_is_installed_with_the_test_extra():
    """`jupyter lab` works after the README's set-up (the test extra pulls in the notebooks extra)."""
    if not os.environ.get("CI") and importlib.util.find_spec("jupyterlab") is None:
        pytest.skip("jupyterlab not installed here (pip install '.[test]' installs it)")
    assert importlib.util.find_spec("jupyterlab") is not None


def _markdown(name: str) -> str:
    nb = json.loads((ROOT / "notebooks" / name).read_text("utf-8"))
    return "\n".join("".join(c["source"]) for c in nb["cells"] if c["cell_type"] == "markdown")


def test_nb01_quotes_the_out_of_memory_message_as_poplar_prints_it():
    """Issue 28: nb01 showed the message with thousands separators that Poplar does not print."""
    import re

    real = (ROOT / "fixtures/real/poplar/tutorials_tut4_oom_message_mk2.txt").read_text("utf-8")
    poplar_line = re.search(r"Out of memory on tile [^\n]*", real).group(0)
    shape = re.escape(re.sub(r"\d+", "0", poplar_line)).replace("0", r"\d+")
    quoted = re.findall(r"Out of memory on tile [^\"*]*", _markdown("01_why_does_it_not_fit.ipynb"))
    assert quoted and all(re.fullmatch(shape, q.strip()) for q in quoted), (quoted, poplar_line)


def test_nb02_describes_the_numbered_stall_markers_the_timeline_draws():
    text = _markdown("02_why_is_it_slow.ipynb")
    assert "boxes name" not in text and "number" in text
