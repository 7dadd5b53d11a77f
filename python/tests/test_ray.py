"""Ray Data: parallel ingest with one commit (``tessera.ray.Sink``), nothing visible after a
failed job, concurrent jobs, and parallel reads (``tessera.ray.Source``). One local Ray
instance (2 CPUs) serves the whole module."""

import json
import os
import pathlib
import subprocess
import sys
import threading
import time

import numpy as np
import pytest

import tessera

if os.environ.get("CI") in (None, "", "0", "false"):
    ray = pytest.importorskip("ray")
else:  # in CI a missing Ray is a failure, not a skip (scripts/setup.d/40-ray.sh installs it)
    import ray

import tessera.ray  # noqa: E402  (needs ray)

ROOT = pathlib.Path(__file__).resolve().parents[2]
SCHEMA = [
    {"name": "id", "dtype": "i64"},
    {"name": "vec", "dtype": "f32", "shape": [4]},
    {"name": "tokens", "dtype": "i32", "shape": [None]},
    {"name": "text", "dtype": "utf8"},
]
ROWS = 10_000


@pytest.fixture(scope="module", autouse=True)
def ray_instance():
    ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False, configure_logging=False)
    # Classes defined here (BarrierSink) travel to the workers by value: the workers cannot
    # import this test module.
    ray.cloudpickle.register_pickle_by_value(sys.modules[__name__])
    ctx = ray.data.DataContext.get_current()
    ctx.enable_progress_bars = False
    yield
    ray.shutdown()


def columns(batch, offset=0):
    """Ray `map_batches`: every row's values are a function of its id."""
    ids = batch["id"].astype(np.int64) + offset
    tokens = np.empty(len(ids), dtype=object)
    tokens[:] = [np.arange(int(i) % 9, dtype=np.int32) * int(i) for i in ids]
    return {
        "id": ids,
        "vec": np.stack([ids, -ids, ids * 2, ids % 7], axis=1).astype(np.float32),
        "tokens": tokens,
        "text": np.array([f"row {int(i)}" for i in ids], dtype=object),
    }


def check_rows(ds, ids):
    """The dataset's rows are exactly `ids` (in some order), each with its own values."""
    got = ds.read(columns=["id", "vec", "tokens", "text"])
    assert sorted(got["id"].tolist()) == sorted(ids), "every row exactly once"
    for k in range(0, len(ds), 997):
        i = int(got["id"][k])
        np.testing.assert_array_equal(got["vec"][k], np.array([i, -i, i * 2, i % 7], dtype=np.float32))
        np.testing.assert_array_equal(got["tokens"][k], np.arange(i % 9, dtype=np.int32) * i)
        assert got["text"][k] == f"row {i}"


def test_eight_tasks_ingest_one_version(tmp_path):
    url = str(tmp_path / "ds")
    sink = tessera.ray.Sink(url, schema=SCHEMA, message="ray ingest")
    ray.data.range(ROWS, override_num_blocks=8).map_batches(columns).write_datasink(sink)
    assert (sink.base_version, sink.version, sink.tasks) == (1, 2, 8)
    ds = tessera.open(url)
    assert ds.version == 2 and len(ds) == ROWS
    assert [e["version"] for e in ds.log()] == [2, 1], "one new version"
    assert ds.log()[0]["message"] == "ray ingest"
    check_rows(ds, list(range(ROWS)))
    assert ds.verify()["rows"] == ROWS


class Boom(RuntimeError):
    pass


def failing_columns(batch, data_dir):
    """`columns`, except that the block holding row 9000 fails, once another task's data file
    exists (so the failed job leaves orphans behind for certain)."""
    if 9000 in batch["id"]:
        deadline = time.monotonic() + 60
        while not any(pathlib.Path(data_dir).glob("*.tsd")) and time.monotonic() < deadline:
            time.sleep(0.05)
        raise Boom("task failed on purpose")
    return columns(batch)


def test_a_failed_job_commits_nothing_and_leaves_orphans_for_gc(tmp_path):
    url = str(tmp_path / "ds")
    ds = tessera.create(url, SCHEMA)
    ds.append(columns({"id": np.arange(5)}), message="before")
    sink = tessera.ray.Sink(url, schema=SCHEMA)
    job = ray.data.range(ROWS, override_num_blocks=8).map_batches(
        failing_columns, fn_kwargs={"data_dir": str(tmp_path / "ds" / "data")}
    )
    with pytest.raises(Exception) as info:
        job.write_datasink(sink)
    assert "task failed on purpose" in str(info.value)
    assert sink.version is None
    after = tessera.open(url)
    assert (after.version, len(after)) == (2, 5), "the dataset opens at the previous version"
    check_rows(after, list(range(5)))
    gc = subprocess.run(
        [tessera_bin(), "gc", url, "--dry-run", "--retention", "0s", "--json"],
        capture_output=True,
        text=True,
        check=True,
    )
    report = json.loads(gc.stdout)
    orphans = [g["path"] for g in report["garbage"]]
    assert report["dry_run"] is True
    assert orphans and all(p.startswith("data/") for p in orphans), report
    assert all((tmp_path / "ds" / p).exists() for p in orphans), "a dry run deletes nothing"
    # The version before the job still reads and verifies: gc's list holds none of its files.
    assert tessera.open(url).verify()["rows"] == 5


class BarrierSink(tessera.ray.Sink):
    """A Sink whose commit waits until the other job's sink is about to commit too, so that
    both jobs commit on top of the same pinned version and one of them must rebase."""

    def __init__(self, *args, marker_dir, name, other, **kwargs):
        super().__init__(*args, **kwargs)
        self.marker_dir, self.name, self.other = marker_dir, name, other

    def on_write_complete(self, write_result):
        pathlib.Path(self.marker_dir, self.name).touch()
        deadline = time.monotonic() + 120
        while not pathlib.Path(self.marker_dir, self.other).exists() and time.monotonic() < deadline:
            time.sleep(0.02)
        super().on_write_complete(write_result)


def test_two_jobs_appending_at_once_both_land(tmp_path):
    url = str(tmp_path / "ds")
    tessera.create(url, SCHEMA)
    sinks = {
        name: BarrierSink(url, schema=SCHEMA, marker_dir=str(tmp_path), name=name, other=other)
        for name, other in (("a", "b"), ("b", "a"))
    }
    offsets = {"a": 0, "b": 1_000_000}
    errors = {}

    def job(name):
        try:
            ray.data.range(2_000, override_num_blocks=2).map_batches(
                columns, fn_kwargs={"offset": offsets[name]}
            ).write_datasink(sinks[name])
        except Exception as e:  # noqa: BLE001  (recorded and checked below)
            errors[name] = e

    threads = [threading.Thread(target=job, args=(n,)) for n in sinks]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=300)
    assert not any(t.is_alive() for t in threads)
    landed = [n for n in sinks if n not in errors]
    for n, e in errors.items():  # an append may only fail with the typed conflict
        assert isinstance(e, tessera.ConflictError), (n, e)
    assert landed, errors
    assert {sinks[n].base_version for n in sinks} == {1}, "both jobs pinned the same version"
    assert sorted(sinks[n].version for n in landed) == list(range(2, 2 + len(landed)))
    ds = tessera.open(url)
    want = [i + offsets[n] for n in landed for i in range(2_000)]
    check_rows(ds, want)  # no row lost, none twice
    assert ds.verify()["rows"] == len(want)


def schema_of(ds):
    return [(c["name"], c["dtype"], c["shape"], c["nullable"]) for c in ds.schema]


def test_sink_without_schema_infers_the_columns_of_a_new_dataset(tmp_path):
    url = str(tmp_path / "ds")
    items = [
        {
            "i": k,
            "f": k / 4,
            "s": f"row {k}",
            "img": np.full((2, 3), k, dtype=np.uint8),
            "vec": np.arange(4, dtype=np.float32) * k,
        }
        for k in range(10)
    ]
    sink = tessera.ray.Sink(url)
    ray.data.from_items(items, override_num_blocks=2).write_datasink(sink)
    assert (sink.base_version, sink.version, sink.tasks) == (1, 2, 2)
    ds = tessera.open(url)
    assert schema_of(ds) == [
        ("i", "i64", [], False),
        ("f", "f64", [], False),
        ("s", "utf8", [], False),
        ("img", "u8", [2, 3], False),
        ("vec", "f32", [4], False),
    ]
    got = ds.read()
    order = np.argsort(got["i"])
    assert got["i"][order].tolist() == list(range(10))
    np.testing.assert_array_equal(got["f"][order], np.arange(10) / 4)
    assert [got["s"][j] for j in order] == [f"row {k}" for k in range(10)]
    np.testing.assert_array_equal(got["img"][order], np.stack([it["img"] for it in items]))
    np.testing.assert_array_equal(got["vec"][order], np.stack([it["vec"] for it in items]))


def test_sink_infers_from_the_rows_written_not_from_the_job_input(tmp_path):
    # Fused into one task, Ray hands on_write_start the schema of `range` (None): the columns
    # come from the blocks `columns` makes. A tensor column whose rows differ is ragged.
    url = str(tmp_path / "ds")
    ray.data.range(40, override_num_blocks=2).map_batches(columns).write_datasink(tessera.ray.Sink(url))
    ds = tessera.open(url)
    assert schema_of(ds) == [
        ("id", "i64", [], False),
        ("vec", "f32", [4], False),
        ("tokens", "i32", [None], False),
        ("text", "utf8", [], False),
    ]
    check_rows(ds, list(range(40)))


def test_sink_infers_ragged_dims(tmp_path):
    url = str(tmp_path / "ds")
    items = [
        {"id": k, "mat": np.full((k % 4, 2), k, dtype=np.int16), "seq": [k] * (k % 3)} for k in range(8)
    ]  # lengths differ inside each block of 4 rows
    ray.data.from_items(items, override_num_blocks=2).write_datasink(tessera.ray.Sink(url))
    ds = tessera.open(url)
    assert schema_of(ds) == [
        ("id", "i64", [], False),
        ("mat", "i16", [None, None], False),
        ("seq", "i64", [None], False),
    ]
    got = ds.read()
    for j, k in enumerate(got["id"].tolist()):
        np.testing.assert_array_equal(got["mat"][j], items[k]["mat"])
        np.testing.assert_array_equal(got["seq"][j], np.array(items[k]["seq"], dtype=np.int64).reshape(-1))
    assert sorted(got["id"].tolist()) == list(range(8))


def test_sink_cannot_infer_a_struct_column_and_says_what_to_pass(tmp_path):
    url = str(tmp_path / "ds")
    job = ray.data.from_items([{"meta": {"a": 1}, "x": 1}, {"meta": {"a": 2}, "x": 2}], override_num_blocks=1)
    with pytest.raises(tessera.UsageError) as info:
        job.write_datasink(tessera.ray.Sink(url))
    message = str(info.value)
    assert "'meta' (Arrow type struct<a: int64>)" in message
    assert 'schema=[{"name": "meta", "dtype": ..., "shape": [...]}, {"name": "x", "dtype": "i64"}]' in message
    with pytest.raises(tessera.NotFoundError):  # no dataset was created
        tessera.open(url)


def test_sink_stops_when_a_later_block_does_not_fit_the_inferred_shape(tmp_path):
    # One row per block: the first block written looks fixed-shape.
    url = str(tmp_path / "ds")
    job = ray.data.from_items([{"r": np.arange(n, dtype=np.int32)} for n in (3, 3, 5)], override_num_blocks=3)
    with pytest.raises(tessera.UsageError) as info:
        job.write_datasink(tessera.ray.Sink(url))
    assert 'schema=[{"name": "r", "dtype": "i32", "shape": [None]}]' in str(info.value)
    ds = tessera.open(url)
    assert (ds.version, len(ds)) == (1, 0), "nothing committed"


def test_sink_writes_nulls_as_nulls_and_refuses_them_where_not_nullable(tmp_path):
    schema = [
        {"name": "id", "dtype": "i64"},
        {"name": "x", "dtype": "f32", "nullable": True},
        {"name": "n", "dtype": "i64", "nullable": True},
        {"name": "s", "dtype": "utf8", "nullable": True},
    ]
    items = [
        {"id": k, "x": None if k % 2 else k / 2, "n": None if k % 3 == 0 else k, "s": None if k == 4 else str(k)}
        for k in range(6)
    ]
    url = str(tmp_path / "ds")
    ray.data.from_items(items, override_num_blocks=2).write_datasink(tessera.ray.Sink(url, schema=schema))
    got = tessera.open(url).read()
    order = np.argsort(got["id"])
    x, n = got["x"][order], got["n"][order]
    assert np.ma.getmaskarray(x).tolist() == [bool(k % 2) for k in range(6)], "a null float is no NaN"
    assert np.ma.getmaskarray(n).tolist() == [k % 3 == 0 for k in range(6)]
    assert n.compressed().tolist() == [1, 2, 4, 5] and x.compressed().tolist() == [0.0, 1.0, 2.0]
    assert [got["s"][j] for j in order] == ["0", "1", "2", "3", None, "5"]
    # Inferred from a first block without nulls, a column is not nullable.
    url = str(tmp_path / "inferred")
    job = ray.data.from_items([{"x": 1.5}, {"x": None}], override_num_blocks=2)
    with pytest.raises(tessera.UsageError) as info:
        job.write_datasink(tessera.ray.Sink(url))
    assert 'schema=[{"name": "x", "dtype": "f64", "nullable": True}]' in str(info.value)
    assert len(tessera.open(url)) == 0


def test_source_reads_the_exact_rows_with_projection(written):
    path, _ = written
    ds = tessera.open(path)
    names = ["id", "x", "img", "tokens", "mat", "caption", "blob", "opt", "half", "bf"]
    source = tessera.ray.Source(path, version=ds.version, columns=names)
    assert len(source.get_read_tasks(3)) == 3  # three fragments, one per task
    batch = ray.data.read_datasource(source).take_batch(10 * len(ds), batch_format="numpy")
    assert set(batch) == set(names)  # `opt` is a nullable scalar: Arrow nulls, no ".valid"
    order = np.argsort(batch["id"])
    got = {k: v[order] for k, v in batch.items()}
    ref = ds.read(columns=names)  # the Rust reader's values
    for name in ("id", "x", "img", "half", "bf"):
        assert got[name].dtype == ref[name].dtype, name
        np.testing.assert_array_equal(got[name], ref[name], err_msg=name)
    for name in ("tokens", "mat"):
        assert len(got[name]) == len(ref[name])
        for g, w in zip(got[name], ref[name]):
            assert g.dtype == w.dtype and g.shape == w.shape, name
            np.testing.assert_array_equal(g, w, err_msg=name)
    assert list(got["caption"]) == ref["caption"] and list(got["blob"]) == ref["blob"]
    null = np.ma.getmaskarray(ref["opt"])
    assert null.any() and np.isnan(got["opt"][null]).all()
    np.testing.assert_array_equal(got["opt"][~null], ref["opt"].data[~null])
    # Projection: only the named columns travel.
    only = ray.data.read_datasource(tessera.ray.Source(path, columns=["caption"])).take(2)
    assert [set(r) for r in only] == [{"caption"}, {"caption"}]
    with pytest.raises(tessera.UsageError):
        tessera.ray.Source(path, columns=["nope"])


NULLABLE = [
    {"name": "id", "dtype": "i64"},
    {"name": "tok", "dtype": "i32", "shape": [None], "nullable": True},
    {"name": "vec", "dtype": "f32", "shape": [2], "nullable": True},
    {"name": "opt", "dtype": "i64", "nullable": True},
]


def nullable_rows(ids):
    """Rows with nulls in every nullable column: `tok` where id % 4 == 0, `vec` where
    id % 3 == 0, `opt` where id % 5 == 0."""
    vec = np.stack([ids, -ids], axis=1).astype(np.float32)
    return {
        "id": ids,
        "tok": [None if i % 4 == 0 else np.arange(i % 5, dtype=np.int32) + i for i in ids],
        "vec": np.ma.MaskedArray(vec, mask=np.repeat((ids % 3 == 0)[:, None], 2, axis=1)),
        "opt": np.ma.MaskedArray(ids * 10, mask=ids % 5 == 0),
    }


def test_source_reads_a_view_in_its_order_with_arrow_nulls(tmp_path):
    url = str(tmp_path / "ds")
    ds = tessera.create(url, NULLABLE)
    ds.append(nullable_rows(np.arange(60)))
    rows = [int(r) for r in np.random.default_rng(3).permutation(60)[:25]]
    ds.save_view("hard", rows)
    ds.append(nullable_rows(np.arange(60, 80)))  # a later commit does not change the view
    source = tessera.ray.Source(url, view="hard", columns=["id", "tok", "vec", "opt"])
    assert (source.version, source.estimate_inmemory_data_size() > 0) == (2, True)
    # The read tasks, in order, hold the view's rows in the view's order.
    tasks = source.get_read_tasks(3)
    assert [t.metadata.num_rows for t in tasks] == [9, 8, 8]
    blocks = [b for t in tasks for b in t()]
    assert sum((b.column("id").to_pylist() for b in blocks), []) == rows
    # Nulls are Arrow nulls in every column kind, with no extra columns.
    ids = np.array(rows)
    for name, nulls in (("tok", ids % 4 == 0), ("vec", ids % 3 == 0), ("opt", ids % 5 == 0)):
        got = np.concatenate([b.column(name).is_null().to_numpy(zero_copy_only=False) for b in blocks])
        np.testing.assert_array_equal(got, nulls, err_msg=name)
    # Through Ray: rows show None for nulls and the values otherwise.
    got = {r["id"]: r for r in ray.data.read_datasource(source).take_all()}
    assert sorted(got) == sorted(rows) and set(got[rows[0]]) == {"id", "tok", "vec", "opt"}
    for i in rows:
        r = got[i]
        if i % 4 == 0:
            assert r["tok"] is None
        else:
            np.testing.assert_array_equal(r["tok"], np.arange(i % 5, dtype=np.int32) + i)
        if i % 3 == 0:
            assert r["vec"] is None
        else:
            np.testing.assert_array_equal(r["vec"], np.array([i, -i], dtype=np.float32))
        assert (r["opt"] is None) if i % 5 == 0 else r["opt"] == i * 10
    with pytest.raises(tessera.UsageError):
        tessera.ray.Source(url, view="hard", version=2)
    with pytest.raises(tessera.NotFoundError):
        tessera.ray.Source(url, view="nope")


def tessera_bin():
    """The `tessera` CLI built by cargo (scripts/test.sh builds it before the Python tests)."""
    explicit = os.environ.get("TESSERA_BIN")
    if explicit:
        return explicit
    meta = subprocess.run(
        ["cargo", "metadata", "--format-version", "1", "--no-deps"], cwd=ROOT, capture_output=True, text=True
    )
    target = json.loads(meta.stdout)["target_directory"] if meta.returncode == 0 else str(ROOT / "target")
    # scripts/test.sh builds everything with one profile (scripts/test-profile.sh).
    profile = os.environ.get("TESSERA_BUILD_PROFILE", "debug")
    exe = pathlib.Path(target, profile, "tessera")
    if not exe.exists():
        flags = ["--release"] if profile == "release" else []
        subprocess.run(["cargo", "build", *flags, "-p", "tessera-cli"], cwd=ROOT, check=True)
    return str(exe)
