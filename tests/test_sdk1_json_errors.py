"""SDK 1.x JSON: every key optional; bad input gives one clear InputError."""

from __future__ import annotations

import hashlib
import json

import pytest

from popprof.model.errors import InputError
from popprof.readers import detect, open_profile
from popprof.readers import sdk1_json as reader


def write(tmp_path, document, name="profile.json") -> object:
    path = tmp_path / name
    path.write_text(json.dumps(document) if not isinstance(document, str) else document)
    return path


@pytest.mark.parametrize(
    "document",
    [
        {"graphProfile": {}},
        {"executionProfile": {}},
        {"graphProfile": {}, "executionProfile": {"simulation": {}}},
    ],
)
def test_empty_halves_are_not_usable(tmp_path, document):
    with pytest.raises(InputError, match="not an SDK 1.x profile"):
        open_profile(write(tmp_path, document))


def test_only_a_target(tmp_path):
    p = open_profile(
        write(
            tmp_path,
            {
                "graphProfile": {
                    "target": {
                        "numIPUs": 4,
                        "tilesPerIPU": 1472,
                        "bytesPerTile": 638976,
                        "clockFrequency": 1330000000,
                    }
                }
            },
        )
    )
    assert p.target_value("num_tiles") == 4 * 1472  # derived
    assert p.target_value("tiles_per_ipu") == 1472  # other spelling of the key
    assert p.target_value("ipu_arch") == "ipu2"
    assert p.table_names == ["target", "metadata"]


def test_only_graph_counts_and_names(tmp_path):
    doc = {
        "graphProfile": {
            "graph": {"numVertices": 10, "numEdges": 20},
            "computeSets": {"names": ["a", "b"]},
            "vertexTypes": {"names": ["v"]},
            "profilerMode": "NONE",
        }
    }
    p = open_profile(write(tmp_path, doc))
    meta = p.meta
    assert meta["graph.num_vertices"] == "10" and meta["graph.num_edges"] == "20"
    assert meta["graph.num_compute_sets"] == "2"
    assert meta["sdk1_json.vertexTypes.count"] == "1"
    assert meta["profiler_mode"] == "NONE"
    assert p.target_value("num_tiles") is None


@pytest.mark.parametrize("threshold", [reader.STREAM_THRESHOLD_BYTES, 0], ids=["whole", "streamed"])
def test_partial_memory_and_odd_steps(tmp_path, threshold):
    doc = {
        "graphProfile": {
            "memory": {
                "byTile": {"totalIncludingGaps": [10, 20, 30]},
                "byCategory": {
                    "controlCode": {"overflowed": {"nonOverlapped": [0, 5, 0]}},
                    "vertexCode": {"nonInterleaved": {"nonOverlapped": [1, 0, 3]}},
                    "junk": "not a dict",
                },
            },
            "programs": [{"name": "p0"}, {"type": "MysteryType", "name": "p1"}, "bare-name"],
        },
        "executionProfile": {
            "simulation": {"steps": [{"type": "DoExchange", "name": "x"}, {"cycles": 7}, 3]}
        },
    }
    p = reader.read(write(tmp_path, doc), stream_threshold_bytes=threshold)
    assert p.tiles["bytes_incl_gaps"].tolist() == [10, 20, 30]
    assert p.tiles["bytes_excl_gaps"].isna().all()
    assert p.tiles["overflowed_bytes"].tolist() == [0, 5, 0]
    assert set(
        zip(p.tile_memory["tile"], p.tile_memory["category"].astype(str), p.tile_memory["bytes"], strict=True)
    ) == {(1, "controlCode", 5), (0, "vertexCode", 1), (2, "vertexCode", 3)}
    assert p.programs["category"].astype(str).tolist() == ["other", "other", "other"]
    assert p.programs["name"].tolist() == ["p0", "p1", "bare-name"]
    steps = p.steps
    assert steps["category"].astype(str).tolist() == ["exchange", "other", "other"]
    assert steps["cycles"].tolist()[1] == 7 and steps["cycles"].isna().sum() == 2


def test_not_a_profile_json(tmp_path):
    path = write(tmp_path, {"name": "my app", "settings": {"lr": 0.1}})
    assert not reader.sniff(path, path.read_bytes())
    with pytest.raises(InputError, match="not a recognised profile format"):
        open_profile(path)
    with pytest.raises(InputError, match="not an SDK 1.x profile") as info:
        reader.read(path)
    assert str(path) in str(info.value)


def test_json_array_is_not_a_profile(tmp_path):
    path = write(tmp_path, [1, 2, 3])
    with pytest.raises(InputError, match="not an object"):
        reader.read(path)


def test_chrome_trace_is_not_sniffed(tmp_path):
    path = write(tmp_path, {"traceEvents": [{"name": "memory", "ph": "X", "ts": 1, "dur": 2}]}, "trace.json")
    assert not reader.sniff(path, path.read_bytes())


@pytest.mark.parametrize("streamed", [False, True])
def test_truncated_json(tmp_path, streamed):
    doc = {
        "graphProfile": {"memory": {"byTile": {"total": list(range(5000))}}},
        "executionProfile": {"simulation": {"steps": [{"type": "Sync", "name": "s", "cycles": 1}] * 100}},
    }
    text = json.dumps(doc)
    path = write(tmp_path, text[: len(text) // 2])
    assert detect(path) is reader
    before = hashlib.sha256(path.read_bytes()).hexdigest()
    with pytest.raises(InputError, match="truncated JSON: the file ends inside its JSON value") as cut:
        reader.read(path, stream_threshold_bytes=0 if streamed else reader.STREAM_THRESHOLD_BYTES)
    assert cut.value.hint.startswith("the file is cut off")
    with pytest.raises(InputError, match="truncated JSON: the file ends inside its JSON value"):
        open_profile(path)
    assert hashlib.sha256(path.read_bytes()).hexdigest() == before


@pytest.mark.parametrize("streamed", [False, True])
def test_json_malformed_inside_is_damage_not_a_cut(tmp_path, streamed):
    """JSON invalid before its end (a byte flipped) is malformed, and its hint says damage: the file is not said
    to be cut off unless the parser met its end."""
    doc = {"graphProfile": {"memory": {"byTile": {"total": list(range(5000))}}}}
    text = json.dumps(doc)
    middle = len(text) // 2
    path = write(tmp_path, text[:middle] + "}{" + text[middle + 2 :])
    with pytest.raises(InputError, match="malformed JSON") as damaged:
        reader.read(path, stream_threshold_bytes=0 if streamed else reader.STREAM_THRESHOLD_BYTES)
    assert (
        "truncated" not in str(damaged.value)
        and damaged.value.hint == "the file may be damaged; write it again"
    )


def test_per_tile_arrays_of_different_lengths(tmp_path):
    doc = {"graphProfile": {"target": {"numTiles": 4}, "memory": {"byTile": {"total": [1, 2, 3]}}}}
    with pytest.raises(InputError, match=r"byTile.total has 3 entries but the profile has 4 tiles"):
        open_profile(write(tmp_path, doc))


def test_per_tile_array_of_strings(tmp_path):
    doc = {"graphProfile": {"memory": {"byTile": {"total": ["a", "b"]}}}}
    with pytest.raises(InputError, match="not numbers"):
        open_profile(write(tmp_path, doc))
    doc = {"graphProfile": {"memory": {"byTile": {"total": "lots"}}}}
    with pytest.raises(InputError, match="not a list"):
        open_profile(write(tmp_path, doc, "b.json"))


def test_half_that_is_not_an_object(tmp_path):
    with pytest.raises(InputError, match="graphProfile is a list"):
        open_profile(write(tmp_path, {"graphProfile": [1, 2]}))


def test_missing_explicit_execution_file(tmp_path):
    path = write(tmp_path, {"graphProfile": {"graph": {"numVertices": 1}}})
    with pytest.raises(InputError, match="no such file"):
        reader.read(path, execution=tmp_path / "nope.json")


def test_unreadable_sibling_is_noted_not_fatal(tmp_path):
    graph = write(tmp_path, {"graphProfile": {"graph": {"numVertices": 5}}}, "run.graph.json")
    (tmp_path / "run.execution.json").write_text('{"executionProfile": {"simulation": {"steps": [')
    p = open_profile(graph)
    assert p.meta["graph.num_vertices"] == "5"
    assert "ignored run.execution.json" in p.meta["sdk1_json.notes"]
    assert not p.has("steps")
    with pytest.raises(InputError, match="truncated"):
        reader.read(graph, execution=tmp_path / "run.execution.json")


@pytest.mark.parametrize("split", [False, True])
def test_writer_refuses_to_write_over_its_input(tmp_path, split):
    from popprof.model.errors import UsageError
    from popprof.testing.writers.sdk1_json import write_sdk1_json

    source = tmp_path / "p.json"
    source.write_text(
        json.dumps(
            {
                "graphProfile": {
                    "target": {"numTiles": 4, "tilesPerIpu": 4},
                    "memory": {"byTile": {"total": [1, 2, 3, 4]}},
                }
            }
        )
    )
    before = source.read_bytes()
    profile = open_profile(source)
    if split:  # the graph half would land on the input
        source = source.rename(tmp_path / "p.graph.json")
        profile.source = str(source)
    with pytest.raises(UsageError, match="overwrite the input"):
        write_sdk1_json(profile, tmp_path / "p.json", split=split)
    assert source.read_bytes() == before
