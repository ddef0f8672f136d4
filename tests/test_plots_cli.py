"""``popprof plot``: every kind to PNG / SVG, atomic output, one-line errors with exit 2."""

from __future__ import annotations

import pytest

matplotlib = pytest.importorskip("matplotlib")

import popprof  # noqa: E402
from popprof.cli import main  # noqa: E402
from popprof.testing import synth  # noqa: E402


@pytest.fixture(scope="module")
def bundle(tmp_path_factory):
    out = tmp_path_factory.mktemp("bundle") / "p.popprof"
    popprof.export(synth.make_profile(num_steps=800, num_liveness_steps=200, seed=1), str(out))
    return out


@pytest.mark.parametrize(
    "kind", ["memory", "histogram", "tilemap", "liveness", "execution", "timeline", "account"]
)
def test_every_kind_to_png(bundle, tmp_path, kind):
    out = tmp_path / f"{kind}.png"
    assert main(["plot", str(bundle), "--kind", kind, "-o", str(out), "--dpi", "40"]) == 0
    assert out.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert [p.name for p in tmp_path.iterdir()] == [out.name]


def test_config_sets_the_thresholds_drawn(bundle, tmp_path):
    config = tmp_path / "popprof.toml"
    config.write_text('[rules]\n"memory.headroom.warning" = 0.6\n')
    out = tmp_path / "memory.svg"
    assert main(["plot", str(bundle), "--kind", "memory", "-o", str(out), "--config", str(config)]) == 0
    text = out.read_text(encoding="utf-8")
    assert "warning (60 % of capacity)" in text and "warning (85 % of capacity)" not in text


def test_svg_output(bundle, tmp_path):
    out = tmp_path / "liveness.svg"
    assert main(["plot", str(bundle), "--kind", "liveness", "-o", str(out)]) == 0
    text = out.read_text(encoding="utf-8")
    assert "<svg" in text and "Liveness" in text


@pytest.mark.parametrize(
    ("args", "needle"),
    [
        (["--kind", "memory", "-o", "{tmp}/x.gif"], "unknown image type"),
        (["--kind", "execution", "-o", "{tmp}/x.png"], "execution profile"),
    ],
)
def test_errors_are_one_line(tmp_path, capsys, args, needle):
    no_exec = tmp_path / "noexec.popprof"
    popprof.export(synth.make_profile(execution=False, debug=False), str(no_exec))
    code = main(["plot", str(no_exec), *[a.format(tmp=tmp_path) for a in args]])
    err = capsys.readouterr().err
    assert code == 2
    assert needle in err and len(err.strip().splitlines()) == 1 and "Traceback" not in err
    assert sorted(p.name for p in tmp_path.iterdir()) == ["noexec.popprof"]


def test_missing_input(tmp_path, capsys):
    assert main(["plot", str(tmp_path / "nope.pop"), "-o", str(tmp_path / "a.png")]) == 2
    assert "nope.pop" in capsys.readouterr().err


@pytest.mark.parametrize(
    ("name", "kind"),
    [
        ("text_summary/pod4_pipeline.txt", "histogram"),
        ("traces/training_loop.json", "timeline"),
        ("mk2_training.popprof", "memory"),
    ],
)
def test_without_kind_the_most_useful_plot_the_profile_can_draw(tmp_path, capsys, fixtures_dir, name, kind):
    out = tmp_path / "plot.png"
    assert main(["plot", str(fixtures_dir / name), "-o", str(out), "--dpi", "40"]) == 0
    assert out.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert f"({kind} plot)" in capsys.readouterr().err


def test_a_kind_the_profile_cannot_draw_lists_the_kinds_it_can(tmp_path, capsys, fixtures_dir):
    code = main(
        [
            "plot",
            str(fixtures_dir / "traces" / "training_loop.json"),
            "--kind",
            "liveness",
            "-o",
            str(tmp_path / "x.png"),
        ]
    )
    err = capsys.readouterr().err
    assert code == 2 and len(err.strip().splitlines()) == 1
    assert "cannot draw --kind liveness" in err and "liveness information" in err
    assert err.strip().endswith("it can draw: timeline, account, roofline")
    assert list(tmp_path.iterdir()) == []
