"""tessera.ingest: the decoders and the one row assembler of `tessera ingest`, from Python."""

import json
import os
import wave

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from PIL import Image

import tessera


def _png(path, h, w, value):
    Image.fromarray(np.full((h, w, 3), value, dtype=np.uint8)).save(path)


def _wav(path, samples, rate=16000):
    with wave.open(str(path), "wb") as f:
        f.setnchannels(1)
        f.setsampwidth(2)
        f.setframerate(rate)
        f.writeframes(np.asarray(samples, dtype="<i2").tobytes())


def test_an_image_folder_ingests_resized_with_class_labels(tmp_path):
    root = tmp_path / "images"
    for cls, value in [("cat", 10), ("dog", 200)]:
        (root / cls).mkdir(parents=True)
        for i in range(3):
            _png(root / cls / f"{i}.png", 20 + i, 30, value + i)
    report = tessera.ingest(tmp_path / "ds", root, size=(8, 8), jobs=2)
    assert report["created"] and report["rows"] == 6 and report["images"] == 6
    assert report["format"] == "imagefolder" and report["version"] == 2
    ds = tessera.open(tmp_path / "ds")
    schema = {c["name"]: c for c in ds.schema}
    assert schema["image"]["shape"] == [8, 8, 3] and schema["image"]["dtype"] == "u8"
    assert schema["label"]["kind_params"]["names"] == ["cat", "dog"]
    rows = ds.read()
    assert rows["label"].tolist() == [0, 0, 0, 1, 1, 1]
    # Flat colours stay flat through the resize: each image is its file's value.
    assert [int(img[4, 4, 0]) for img in rows["image"]] == [10, 11, 12, 200, 201, 202]


def test_class_folders_of_audio_give_clips_and_labels(tmp_path):
    # The Speech Commands layout: ROOT/yes/*.wav, ROOT/no/*.wav.
    root = tmp_path / "speech"
    clips = {}
    for cls in ["no", "yes"]:
        (root / cls).mkdir(parents=True)
        for i in range(2):
            samples = np.arange(100 * (i + 1), dtype=np.int16) * (3 if cls == "yes" else -3)
            _wav(root / cls / f"{i}.wav", samples)
            clips[(cls, i)] = samples
    report = tessera.ingest(tmp_path / "ds", root, audio_dtype="i16", mono=True)
    assert report["rows"] == 4 and report["format"] == "audiofolder"
    ds = tessera.open(tmp_path / "ds")
    rows = ds.read()
    schema = {c["name"]: c for c in ds.schema}
    assert schema["label"]["kind_params"]["names"] == ["no", "yes"]
    assert schema["audio"]["dtype"] == "i16"
    got = sorted(zip(rows["label"].tolist(), [a.tolist() for a in rows["audio"]]), key=lambda t: (t[0], len(t[1])))
    want = [(0, clips[("no", 0)].tolist()), (0, clips[("no", 1)].tolist()),
            (1, clips[("yes", 0)].tolist()), (1, clips[("yes", 1)].tolist())]
    assert got == want


def test_parquet_lists_become_ragged_columns_and_options_apply(tmp_path):
    table = pa.table({
        "id": pa.array([1, 2, 3], pa.int64()),
        "tokens": pa.array([[1, 2], [3], [4, 5, 6]], pa.list_(pa.int32())),
        "text": ["a", "bb", "ccc"],
    })
    pq.write_table(table, tmp_path / "t.parquet")
    report = tessera.ingest(tmp_path / "ds", [tmp_path / "t.parquet"], rename={"text": "caption"},
                            kinds={"caption": "text"}, compress={"*": "zstd:5"}, message="from parquet")
    assert report["rows"] == 3
    ds = tessera.open(tmp_path / "ds")
    schema = {c["name"]: c for c in ds.schema}
    assert schema["tokens"]["shape"] == [None] and schema["caption"]["dtype"] == "utf8"
    assert schema["id"]["compression"] == "zstd:5"
    rows = ds.read()
    assert [t.tolist() for t in rows["tokens"]] == [[1, 2], [3], [4, 5, 6]]
    assert rows["caption"] == ["a", "bb", "ccc"]
    assert ds.log()[0]["message"] == "from parquet"


def test_a_value_that_does_not_fit_its_column_commits_nothing(tmp_path):
    ds = tessera.create(tmp_path / "ds", [{"name": "x", "dtype": "u8"}, {"name": "y", "dtype": "i32"}])
    before = ds.version
    lines = [{"x": 1, "y": 2}, {"x": 300, "y": 3}]
    (tmp_path / "rows.jsonl").write_text("\n".join(json.dumps(r) for r in lines))
    with pytest.raises(tessera.MalformedError, match="300 does not fit u8"):
        tessera.ingest(tmp_path / "ds", tmp_path / "rows.jsonl")
    assert tessera.open(tmp_path / "ds").version == before
    # Floats for an integer column: a schema question, before any row is read.
    (tmp_path / "frac.jsonl").write_text(json.dumps({"x": 1, "y": 2.5}))
    with pytest.raises(tessera.UsageError, match="input is f64 .*, the dataset has i32"):
        tessera.ingest(tmp_path / "ds", tmp_path / "frac.jsonl")
    assert tessera.open(tmp_path / "ds").version == before
    # With skip_bad the bad row is listed and the rest lands.
    report = tessera.ingest(tmp_path / "ds", tmp_path / "rows.jsonl", skip_bad=True)
    assert report["rows"] == 1 and len(report["skipped"]) == 1
    assert "300" in report["skipped"][0]["error"]
    assert tessera.open(tmp_path / "ds").read()["x"].tolist() == [1]


def test_a_failed_ingest_into_a_new_dataset_leaves_nothing(tmp_path):
    root = tmp_path / "images"
    (root / "a").mkdir(parents=True)
    _png(root / "a" / "0.png", 4, 4, 1)
    (root / "a" / "1.png").write_bytes(b"not a png")
    with pytest.raises(tessera.MalformedError, match="1.png"):
        tessera.ingest(tmp_path / "ds", root)
    assert not os.path.exists(tmp_path / "ds")


def test_options_are_checked_and_ragged_specs_parse(tmp_path):
    (tmp_path / "rows.jsonl").write_text(json.dumps({"x": 1}))
    with pytest.raises(tessera.UsageError, match="channels must be 1, 3 or 4"):
        tessera.ingest(tmp_path / "ds", tmp_path / "rows.jsonl", channels=2)
    with pytest.raises(tessera.UsageError, match="unknown input format"):
        tessera.ingest(tmp_path / "ds", tmp_path / "rows.jsonl", format="csv")
    with pytest.raises(tessera.UsageError, match="give fps or every"):
        tessera.ingest(tmp_path / "ds", tmp_path / "rows.jsonl", fps=2, every=3)
    with pytest.raises(tessera.UsageError, match="ragged"):
        tessera.ingest(tmp_path / "ds", tmp_path / "rows.jsonl", ragged={"x": ["a"]})
    assert tessera._ingest._ragged_entries({"tokens": None, "img": [None, -1, 3], "b": "?,4"}) == [
        "tokens", "img=?,?,3", "b=?,4"]
    assert not os.path.exists(tmp_path / "ds")
