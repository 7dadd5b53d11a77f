"""Parallel writers without Ray: fragment records written by several openers of a dataset,
committed once; records are validated (the spec's error classes) before anything is committed."""

import json
import os

import numpy as np
import pytest

import tessera

SCHEMA = [{"name": "id", "dtype": "i64"}, {"name": "tokens", "dtype": "i32", "shape": [None]}]


def rows(start, n):
    ids = np.arange(start, start + n, dtype=np.int64)
    return {"id": ids, "tokens": [np.arange(int(i) % 4, dtype=np.int32) for i in ids]}


@pytest.fixture()
def url(tmp_path):
    url = str(tmp_path / "ds")
    tessera.create(url, SCHEMA)
    return url


def test_records_from_several_writers_commit_as_one_version(url):
    records = []
    for w in range(3):  # three "workers", each with its own handle on version 1
        records += tessera.open(url).write_fragments(rows(w * 100, 100), target_file_bytes=512)
    assert len(records) > 3 and all(json.loads(r)["format"] == "tessera-fragment/1" for r in records)
    assert tessera.open(url).version == 1, "nothing visible before the commit"
    ds = tessera.open(url)
    assert ds.commit_fragments(records, message="parallel") == 2
    assert len(ds) == 300 and ds.read(columns=["id"])["id"].tolist() == list(range(300))
    assert ds.verify()["rows"] == 300
    # An overwrite keeps exactly the records' rows.
    again = ds.write_fragments(rows(1000, 5))
    assert ds.commit_fragments(again, mode="overwrite") == 3
    assert ds.read(columns=["id"])["id"].tolist() == list(range(1000, 1005))


def test_bad_records_raise_the_mapped_exception_and_commit_nothing(url):
    ds = tessera.open(url)
    good = ds.write_fragments(rows(0, 10))[0]
    rec = json.loads(good)
    missing = dict(rec, files=[dict(rec["files"][0], path="data/" + "0" * 32 + ".tsd")])
    wrong_size = dict(rec, files=[dict(rec["files"][0], size=rec["files"][0]["size"] + 1)])
    with pytest.raises(tessera.InvalidError):
        ds.commit_fragments([good, json.dumps(missing)])
    with pytest.raises(tessera.InvalidError):
        ds.commit_fragments([json.dumps(wrong_size)])
    with pytest.raises(tessera.UsageError):
        ds.commit_fragments(["{not json"])
    with pytest.raises(tessera.UsageError):
        ds.commit_fragments([good], mode="upsert")
    path = os.path.join(url, rec["files"][0]["path"])
    data = bytearray(open(path, "rb").read())
    data[-25] ^= 0xFF  # the footer's last byte: its CRC no longer matches the trailer's
    os.remove(path)
    open(path, "wb").write(bytes(data))
    with pytest.raises(tessera.MalformedError):  # checked again, though `ds` read it before
        ds.commit_fragments([good])
    assert tessera.open(url).version == 1 and ds.version == 1


def test_an_overwrite_conflicts_with_a_concurrent_commit(url):
    a, b = tessera.open(url), tessera.open(url)
    recs = a.write_fragments(rows(0, 10))
    b.append(rows(50, 1))
    with pytest.raises(tessera.ConflictError):
        a.commit_fragments(recs, mode="overwrite")
    assert a.commit_fragments(recs) == 3, "an append rebases over it"
    assert a.read(columns=["id"])["id"].tolist() == [50] + list(range(10))
