"""The redaction vocabulary files: provenance, content, and the script that regenerates them."""

from __future__ import annotations

import importlib.util
import re
import subprocess
import sys
from pathlib import Path

import pytest

from popprof.redaction import vocabulary

ROOT = Path(__file__).resolve().parents[1]
REAL_POPLAR = ROOT / "fixtures" / "real" / "poplar"


def _load_regenerate():
    """The regeneration script of the source tree (``tools/``: run by hand, not part of the package)."""
    spec = importlib.util.spec_from_file_location(
        "regenerate_vocabulary", ROOT / "tools" / "regenerate_vocabulary.py"
    )
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # its dataclasses look their module up
    spec.loader.exec_module(module)
    return module


regenerate = _load_regenerate()


@pytest.mark.parametrize("name", sorted(vocabulary.NAME_FILES) + sorted(vocabulary.JSON_FILES))
def test_every_file_says_where_it_came_from(name):
    prov = vocabulary.provenance(name)
    assert prov["repository"] and prov["repository"][0].strip()
    assert prov["path"], name
    assert prov["commit"] and prov["commit"][0].strip()
    assert "tools/regenerate_vocabulary.py" in prov["regenerate"][0]


@pytest.mark.parametrize("name", sorted(vocabulary.NAME_FILES))
def test_text_files_hold_names_only(name):
    found = vocabulary.names(name)
    assert len(found) >= 8, name
    assert not any(n.startswith("#") or n != n.strip() for n in found)


def test_pinned_commits_are_full_hashes():
    for name in ("poplibs_vertices.txt", "pytorch_operators.txt", "cuda_api.txt"):
        commit = vocabulary.provenance(name)["commit"][0]
        assert re.search(r"\b[0-9a-f]{40}\b", commit), (name, commit)


@pytest.mark.parametrize(
    ("name", "present", "absent"),
    [
        (
            "poplibs_vertices.txt",
            ["popops::Fill", "poplin::ConvPartial1x1Out", "poprand::SetSeedSupervisor"],
            [],
        ),
        ("poplibs_template_values.txt", ["popops::expr::BinaryOpType::ADD", "popops::Operation::ADD"], []),
        ("poplar_runtime_vertices.txt", ["poplar_rt::ShortMemcpy", "poplar_rt::DstStridedCopyDA32"], []),
        ("pytorch_operators.txt", ["aten::mm", "aten::add.Tensor", "aten::convolution"], ["aten::QzvSecret"]),
        ("pytorch_autograd_nodes.txt", ["MmBackward0", "MmBackward", "AddBackward1"], ["MyFunctionBackward"]),
        (
            "cuda_api.txt",
            ["cudaLaunchKernel", "cuLaunchKernel", "hipLaunchKernel"],
            ["cudaX", "cuCanaryKernel"],
        ),
        ("text_summary_labels.txt", ["Total cycles", "Tile # <n> memory usage", "Number of vertices"], []),
        (
            "gpu_kernel_identifiers.txt",
            ["vectorized_elementwise_kernel", "gemmSN_TN_kernel"],
            ["user_kernel"],
        ),
    ],
)
def test_files_hold_the_public_names(name, present, absent):
    found = vocabulary.names(name)
    for n in present:
        assert n in found, (name, n)
    for n in absent:
        assert n not in found, (name, n)


def test_json_files():
    nccl = vocabulary.data("nccl_kernels.json")
    assert "AllReduce" in nccl["current"]["collectives"] and "RING" in nccl["legacy"]["algorithms"]
    assert "float" in nccl["legacy"]["types"] and "f32" in nccl["current"]["types"]
    kineto = vocabulary.data("kineto.json")
    assert {"cpu_op", "kernel", "cuda_runtime"} <= set(kineto["categories"])
    assert {"External id", "deviceProperties"} <= set(kineto["arg_keys"]) | set(kineto["trace_keys"])


def test_unknown_file_is_refused():
    with pytest.raises(KeyError):
        vocabulary.names("nope.txt")


def test_cxx_declarations_find_namespaced_classes_and_enums():
    text = """
    // class NotThis : public Vertex {
    #define X(a) { a }
    namespace popops {
    namespace expr { enum class BinaryOpType { ADD, SUBTRACT = 2, };}
    template <typename T> class Fill : public MultiVertex {
      struct Inner { int x; };
    };
    }
    class Outside : public Vertex {};
    """
    classes, enums = regenerate.cxx_declarations(text)
    assert classes == {"popops::Fill"}
    assert enums == {"popops::expr::BinaryOpType::ADD", "popops::expr::BinaryOpType::SUBTRACT"}


def test_autograd_prefix_follows_pytorch_rule():
    assert regenerate.autograd_prefix("mm") == "MmBackward"
    assert regenerate.autograd_prefix("native_layer_norm") == "NativeLayerNormBackward"
    assert regenerate.autograd_prefix("_thnn_fused_forward") == "ThnnFusedBackward"


def test_summary_labels_of_a_real_sample_leave_out_names():
    text = (REAL_POPLAR / "tutorials_tut6_execution_hw_sdk3.txt").read_text()
    labels = regenerate.summary_labels(text + "\nProgram: my_secret_program\nTile # 17 memory usage:\n")
    assert "Total cycles" in labels and "Programs executed" in labels
    assert "Tile # <n> memory usage" in labels
    assert not any("secret" in label for label in labels)


def test_regenerate_poplibs_from_a_small_checkout(tmp_path, monkeypatch):
    checkout = tmp_path / "poplibs"
    (checkout / "lib" / "popops" / "codelets").mkdir(parents=True)
    (checkout / "include" / "popops").mkdir(parents=True)
    (checkout / "lib" / "popops" / "codelets" / "Fill.cpp").write_text(
        "namespace popops {\ntemplate <class T> class Fill : public Vertex { bool compute(); };\n}\n"
    )
    (checkout / "include" / "popops" / "Op.hpp").write_text(
        "namespace popops { enum class Operation { ADD }; }\n"
    )
    (checkout / "lib" / "popops" / "Zero.cpp").write_text('auto v = templateVertex("popops::Zero2d", t);\n')
    out = tmp_path / "out"
    out.mkdir()
    monkeypatch.setattr(regenerate, "HERE", out)
    assert regenerate.main(["poplibs", str(checkout)]) == 0
    text = (out / "poplibs_vertices.txt").read_text()
    assert "# repository: graphcore/poplibs" in text
    body = [line for line in text.splitlines() if not line.startswith("#")]
    assert body == ["popops::Fill", "popops::Zero2d"]
    assert "popops::Operation::ADD" in (out / "poplibs_template_values.txt").read_text()


def test_script_runs_as_a_command():
    out = subprocess.run(
        [sys.executable, str(Path(regenerate.__file__)), "--help"], capture_output=True, text=True, check=True
    )
    assert "poplibs" in out.stdout and "kernels" in out.stdout
