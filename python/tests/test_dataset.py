"""Datasets: schema, reads equal what was written, versions, refs, and errors."""

import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

import tessera
from conftest import SCHEMA


def assert_column_equal(name, got, want, rows=None):
    """`got` (as `read` returns it) equals the written values `want` (at `rows`)."""
    idx = list(range(len(got))) if rows is None else list(rows)
    if isinstance(want, np.ma.MaskedArray):
        assert isinstance(got, np.ma.MaskedArray), name
        np.testing.assert_array_equal(np.ma.getmaskarray(got), np.ma.getmaskarray(want)[idx])
        np.testing.assert_array_equal(got.filled(0), want.filled(0)[idx])
    elif isinstance(want, np.ndarray):
        w = want[idx]
        if name == "bf":
            w = w.astype(np.float32)
        assert got.dtype == w.dtype, (name, got.dtype, w.dtype)
        np.testing.assert_array_equal(got, w)
    else:
        w = [want[i] for i in idx]
        assert len(got) == len(w), name
        for g, x in zip(got, w):
            if isinstance(x, np.ndarray):
                assert g.dtype == x.dtype and g.shape == x.shape, (name, g.shape, x.shape)
                np.testing.assert_array_equal(g, x)
            else:
                assert type(g) is type(x) and g == x, (name, g, x)


def test_schema_len_version(ds):
    assert len(ds) == 100
    assert ds.version == 4
    assert ds.branch_name == "main"
    names = [c["name"] for c in ds.schema]
    assert names == [c["name"] for c in SCHEMA]
    by = {c["name"]: c for c in ds.schema}
    assert by["img"]["shape"] == [4, 5] and by["img"]["dtype"] == "u8" and by["img"]["compression"] == "lz4"
    assert by["tokens"]["shape"] == [None] and by["tokens"]["kind"] == "tokens"
    assert by["mat"]["shape"] == [None, 2]
    assert by["caption"]["kind"] == "text" and by["caption"]["shape"] == []
    assert by["opt"]["nullable"] and not by["x"]["nullable"]


def test_read_everything_equals_what_was_written(ds, written):
    _, want = written
    got = ds.read()
    assert list(got) == [c["name"] for c in SCHEMA]
    for name in got:
        assert_column_equal(name, got[name], want[name])


def test_read_rows_and_projection(ds, written):
    _, want = written
    rows = [99, 0, 41, 40, 39, 41, 75]
    got = ds.read(rows, columns=["caption", "tokens", "opt", "img"])
    assert list(got) == ["caption", "tokens", "opt", "img"]
    for name in got:
        assert_column_equal(name, got[name], want[name], rows)
    assert ds.read(slice(10, 13))["id"].tolist() == [10, 11, 12]
    assert ds.read(range(5, 8), columns=["id"])["id"].tolist() == [5, 6, 7]
    empty = ds.read([], columns=["id", "caption"])
    assert empty["id"].shape == (0,) and empty["id"].dtype == np.int64 and empty["caption"] == []


def test_getitem(ds, written):
    _, want = written
    row = ds[-1]
    assert row["id"] == 99
    assert row["caption"] == want["caption"][99]
    np.testing.assert_array_equal(row["tokens"], want["tokens"][99])
    assert ds[5]["opt"] is None  # 5 % 5 == 0: null
    assert ds[6]["opt"] == 9.0
    with pytest.raises(IndexError):
        ds[100]


def test_versions_tags_branches_log_diff(written, tmp_path):
    src, _ = written
    path = tmp_path / "copy"
    shutil.copytree(src, path)
    ds = tessera.open(str(path))
    assert [e["version"] for e in ds.log()] == [4, 3, 2, 1]
    assert ds.log()[0]["message"] == "chunk 2"
    assert len(tessera.open(str(path), version=2)) == 40
    ds.tag("v-first", "the first three chunks")
    assert ds.tags() == ["v-first"]
    assert len(tessera.open(str(path), tag="v-first")) == 100
    b = ds.branch("exp")
    assert b.branch_name == "exp" and "exp" in ds.branches()
    more = {k: v[:2] for k, v in tessera.open(str(path)).read([0, 1]).items()}
    v = b.append(more, message="two more on exp")
    assert len(b) == 102 and b.version == v
    assert len(tessera.open(str(path))) == 100, "main is unchanged"
    assert len(tessera.open(str(path), branch="exp")) == 102
    d = b.diff(ds)
    assert d["rows_added"] == 2 and d["rows_deleted"] == 0
    d = ds.diff(2)
    assert d["rows_added"] == 60 and d["from_version"] == 2 and d["to_version"] == 4
    report = ds.verify()
    assert report["rows"] >= 100 and report["files"] >= 3


def test_errors_are_mapped(written, tmp_path):
    src, _ = written
    ds = tessera.open(src)
    with pytest.raises(tessera.NotFoundError) as e:
        tessera.open(src, version=99)
    assert e.value.error_class == "not_found"
    assert isinstance(e.value, tessera.TesseraError)
    with pytest.raises(tessera.NotFoundError):
        tessera.open(str(tmp_path / "nothing-here"))
    with pytest.raises(tessera.NotFoundError):
        tessera.open(src, tag="no-such-tag")
    with pytest.raises(tessera.UsageError):
        ds.read([0], columns=["nope"])
    with pytest.raises(tessera.UsageError):
        ds.numpy(columns=["nope"])
    with pytest.raises(tessera.ConflictError):
        tessera.create(src, SCHEMA)
    with pytest.raises(tessera.UsageError):
        tessera.create(str(tmp_path / "bad"), [{"name": "a", "dtype": "f33"}])
    copy = tmp_path / "copy"
    shutil.copytree(src, copy)
    w = tessera.open(str(copy))
    with pytest.raises(tessera.UsageError):
        w.append({"nope": [1]})
    bad = w.read([0, 1])
    bad["x"] = np.zeros((2, 4), np.float32)  # wrong fixed dim
    with pytest.raises(tessera.UsageError):
        w.append(bad)
    bad["x"] = [["a", "b", "c"]] * 2  # not numbers
    with pytest.raises(tessera.UsageError):
        w.append(bad)
    with pytest.raises(tessera.UsageError):
        w.append({"id": [1]})  # the other columns are missing
    w.tag("t")
    with pytest.raises(tessera.UsageError):
        w.tag("no/slashes")
    with pytest.raises(tessera.ConflictError):
        w.branch("main")
    with pytest.raises(tessera.ConflictError):
        w.tag("t")


def corrupt_copy(src, dst):
    """A copy of the dataset with bytes flipped in the middle of every data file."""
    shutil.copytree(src, dst)
    files = sorted(Path(dst, "data").glob("*.tsd"))
    assert files
    for f in files:
        b = bytearray(f.read_bytes())
        for k in range(len(b) // 3, len(b) // 3 + 8):
            b[k] ^= 0x5A
        f.write_bytes(bytes(b))


def test_corrupt_data_raises_the_mapped_exception(written, tmp_path):
    src, _ = written
    dst = tmp_path / "corrupt"
    corrupt_copy(src, dst)
    ds = tessera.open(str(dst))  # manifests and index segments are intact
    with pytest.raises((tessera.MalformedError, tessera.InvalidError)) as e:
        ds.read()
    assert e.value.error_class in ("malformed", "invalid")
    with pytest.raises((tessera.MalformedError, tessera.InvalidError)):
        ds.verify()
    with pytest.raises((tessera.MalformedError, tessera.InvalidError)):
        for _ in ds.numpy(batch_size=10, shuffle=None):
            pass


def test_import_does_not_import_torch():
    code = "import sys, tessera; assert 'torch' not in sys.modules; print('ok')"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert out.returncode == 0 and out.stdout.strip() == "ok", out.stderr


def test_nulls_round_trip(tmp_path):
    ds = tessera.create(
        str(tmp_path / "nulls"),
        [
            {"name": "s", "dtype": "utf8", "nullable": True},
            {"name": "b", "dtype": "bytes", "nullable": True},
            {"name": "seq", "dtype": "f32", "shape": [None], "nullable": True},
            {"name": "pair", "dtype": "i32", "shape": [2], "nullable": True},
        ],
    )
    ds.append(
        {
            "s": ["a", None, "ccc", ""],
            "b": [None, b"\x00\x01", b"", b"z"],
            "seq": [np.ones(3, np.float32), None, np.zeros(0, np.float32), None],
            "pair": [[1, 2], None, [5, 6], None],
        }
    )
    got = ds.read()
    assert got["s"] == ["a", None, "ccc", ""]
    assert got["b"] == [None, b"\x00\x01", b"", b"z"]
    assert got["seq"][1] is None and got["seq"][3] is None and got["seq"][0].tolist() == [1, 1, 1]
    assert got["pair"].mask.tolist() == [[False, False], [True, True], [False, False], [True, True]]
    assert got["pair"].data[2].tolist() == [5, 6]
    assert ds[1]["pair"] is None and ds[2]["pair"].tolist() == [5, 6] and ds[1]["s"] is None
    batch = next(iter(ds.numpy(batch_size=4, shuffle=None)))
    assert batch["s"] == ["a", None, "ccc", ""] and batch["b"] == [None, b"\x00\x01", b"", b"z"]
    assert batch["pair.valid"].tolist() == [True, False, True, False]
    assert batch["seq.valid"].tolist() == [True, False, True, False]
    assert batch["seq.lengths"].tolist() == [3, 0, 0, 0]


def test_values_that_do_not_fit_commit_nothing(tmp_path):
    """Issue 27's reproduction: numpy's unsafe casting stored [0, 255, 44, 255], [inf, 0.1,
    65504, inf] and [-2147483648, 1, -3, 7]. Every one of these is now a UsageError naming
    the value, and the version does not move."""
    ds = tessera.create(
        str(tmp_path / "casts"),
        [{"name": "u", "dtype": "u8"}, {"name": "h", "dtype": "f16"}, {"name": "i", "dtype": "i32"}],
    )
    good = {"u": [0, 255, 44, 255], "h": [1.0, 0.1, 65504, -2.0], "i": [2**30, 1, -3, 7]}
    bad = {
        "u": ([0.5, 255.9, 300.7, -1.0], "0.5 at index 0 does not fit u8: not an integer"),
        "h": ([1e6, 0.1, 65504, 70000], "1000000.0 at index 0 does not fit f16: would become infinite"),
        "i": ([2**40, 1.5, -3, 7], "1099511627776.0 at index 0 does not fit i32: out of range"),
    }
    for column, (values, message) in bad.items():
        with pytest.raises(tessera.UsageError, match=f"column '{column}': value {message}"):
            ds.append({**good, column: values})
        assert ds.version == 1 and len(tessera.open(str(tmp_path / "casts"))) == 0
    more = [
        ("u", [256]), ("u", [-1]), ("u", np.array([np.nan])), ("i", np.array([np.inf])),
        ("i", np.array([2**31], dtype=np.int64)), ("h", np.array([1e300])),
        ("u", np.array([2**64 - 1], dtype=np.uint64)),
    ]
    for column, values in more:
        with pytest.raises(tessera.UsageError, match=f"column '{column}'"):
            ds.append({**{k: v[:1] for k, v in good.items()}, column: values})
    assert ds.version == 1

    # What fits goes in, exactly; floats hold the nearest value.
    ds.append(good)
    got = ds.read()
    assert got["u"].tolist() == [0, 255, 44, 255]
    assert got["i"].tolist() == [2**30, 1, -3, 7]
    assert got["h"].tolist() == np.array([1.0, 0.1, 65504, -2.0], dtype=np.float16).tolist()

    # The opt-out: numpy's casting, as before.
    ds.append({"u": [300], "h": [70000.0], "i": [7]}, cast="unsafe")
    assert ds.read(rows=[4])["u"].tolist() == [300 % 256]
    with pytest.raises(tessera.UsageError, match="cast must be one of"):
        ds.append(good, cast="same_kind")


def test_bf16_and_bool_columns_check_values(tmp_path):
    ds = tessera.create(
        str(tmp_path / "bf"), [{"name": "b", "dtype": "bf16"}, {"name": "flag", "dtype": "bool"}]
    )
    with pytest.raises(tessera.UsageError, match="does not fit bf16: would become infinite"):
        ds.append({"b": [1e39], "flag": [True]})
    with pytest.raises(tessera.UsageError, match="does not fit bool: neither 0 nor 1"):
        ds.append({"b": [1.0], "flag": [2]})
    # 1 + 2^-8 + 2^-40 rounds up once (it would be a tie, to even, after dropping low bits).
    ds.append({"b": [1.0 + 2**-8 + 2**-40, np.nan, -np.inf], "flag": [1, 0, True]})
    got = ds.read()
    assert got["b"][0] == np.float32(1.0 + 2**-7)
    assert np.isnan(got["b"][1]) and got["b"][2] == -np.inf
    assert got["flag"].tolist() == [True, False, True]


def test_a_fragment_tree_reads_like_a_log(tmp_path):
    """index="tree" (SPEC.md §8.3): every version keeps it, rows and loaders read the same."""
    schema = [{"name": "x", "dtype": "i64"}]
    tree = tessera.create(str(tmp_path / "tree"), schema, index="tree")
    log = tessera.create(str(tmp_path / "log"), schema)
    assert (tree.index, log.index) == ("tree", "log")
    for i in range(5):
        rows = {"x": np.arange(10 * i, 10 * i + 10, dtype=np.int64)}
        tree.append(rows)
        log.append(rows)
    assert tree.index == "tree" and len(tree) == len(log) == 50
    assert np.array_equal(tree.read()["x"], log.read()["x"])
    got = np.concatenate([b["x"] for b in tree.numpy(batch_size=7, shuffle="global", seed=3)])
    want = np.concatenate([b["x"] for b in log.numpy(batch_size=7, shuffle="global", seed=3)])
    assert set(got.tolist()) == set(range(50)) and got.shape == want.shape == (56,)
    with pytest.raises(tessera.UsageError):
        tessera.create(str(tmp_path / "bad"), schema, index="btree")
