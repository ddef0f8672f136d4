"""Worker results handed over through a file in RAM (popprof.io.handoff): the same objects back, writable
arrays, no file left, and the pipe when the folder cannot take them."""

from __future__ import annotations

import numpy as np
import pyarrow as pa

from popprof.io import handoff


def test_a_parcel_gives_back_the_same_arrays_and_leaves_no_file() -> None:
    folder = handoff.make_folder()
    assert folder is not None and folder.is_dir()
    try:
        result = (
            3,
            {"ts": np.arange(5, dtype=np.float64), "name": np.array([2, 0, 1], dtype=np.int32)},
            pa.array(["7", None, "12"], type=pa.string()),
            ["labels", None],
        )
        parcel = handoff.put(result, folder, "piece-3")
        assert isinstance(parcel, handoff.Parcel)
        assert sum(parcel.sizes) > 5 * 8 + 3 * 4  # the buffers went to the file, out of band
        back = handoff.take(parcel)
        assert list(folder.iterdir()) == []  # taken: removed
        assert back[0] == 3 and back[3] == ["labels", None]
        np.testing.assert_array_equal(back[1]["ts"], result[1]["ts"])
        assert back[1]["name"].dtype == np.int32 and back[1]["name"].tolist() == [2, 0, 1]
        assert back[2].equals(result[2])
        back[1]["ts"][0] = 9.0  # the reader may change them in place
        assert back[1]["ts"][0] == 9.0
    finally:
        handoff.remove_folder(folder)
    assert not folder.exists()


def test_without_a_folder_the_result_goes_as_it_is(tmp_path) -> None:
    result = {"x": np.zeros(3)}
    assert handoff.put(result, None, "piece-0") is result
    assert handoff.take(result) is result
    gone = tmp_path / "removed"  # a folder that cannot be written: the pipe, as before
    assert handoff.put(result, gone, "piece-0") is result


def test_the_folder_is_in_ram_where_there_is_one(monkeypatch, tmp_path) -> None:
    monkeypatch.setattr(handoff, "RAM_FOLDER", tmp_path)
    folder = handoff.make_folder()
    assert folder is not None and folder.parent == tmp_path
    handoff.remove_folder(folder)
    monkeypatch.setattr(handoff, "RAM_FOLDER", tmp_path / "absent")
    folder = handoff.make_folder()  # the system's temporary folder instead
    assert folder is not None and folder.parent != tmp_path
    handoff.remove_folder(folder)
