"""The investigation notebooks execute top to bottom (nbclient + ipykernel), so they never rot.

Each runs in a fresh temporary directory with a kernel spec written for this
very interpreter (so CI needs no `jupyter kernelspec install`), with the
repository on PYTHONPATH. The notebooks are stored without outputs.
"""

from __future__ import annotations

from pathlib import Path

import pytest

nbformat = pytest.importorskip("nbformat")
nbclient = pytest.importorskip("nbclient")
pytest.importorskip("ipykernel")
pytest.importorskip("matplotlib")

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


def test_three_notebooks_stored_without_outputs():
    assert [p.name for p in NOTEBOOKS] == ["01_why_does_it_not_fit.ipynb", "02_why_is_it_slow.ipynb",
                                           "03_what_changed.ipynb"]
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
    client = nbclient.NotebookClient(nb, timeout=120, kernel_name=kernel_name,
                                     resources={"metadata": {"path": str(tmp_path)}})
    client.execute()
    images = sum(1 for c in nb.cells if c.cell_type == "code" for o in c.outputs
                 if "image/png" in o.get("data", {}))
    errors = [o for c in nb.cells if c.cell_type == "code" for o in c.outputs if o.output_type == "error"]
    assert not errors
    assert images >= 2, f"{path.name} drew {images} figures"
