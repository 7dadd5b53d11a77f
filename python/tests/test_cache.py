"""The node-local disk cache from Python (``cache_dir=``, ``cache_bytes=``): on an object store
the cached epochs equal uncached ones and the second reads nothing from the store; a local
directory does not use it; half a setting or an unusable directory is a ``UsageError``."""

import os

import numpy as np
import pytest

import tessera

SCHEMA = [{"name": "id", "dtype": "i64"}, {"name": "img", "dtype": "u8", "shape": [3000]}]


def rows(start, n):
    ids = np.arange(start, start + n, dtype=np.int64)
    img = ((ids[:, None] * 31 + np.arange(3000)[None, :]) % 251).astype(np.uint8)
    return {"id": ids, "img": img}


def fill(ds):
    for i in range(3):
        ds.append(rows(100 * i, 100), message=f"part {i}")


def epoch(loader):
    """One epoch's batches, copied (the loader reuses its buffers)."""
    return [{k: np.array(v) for k, v in b.items()} for b in loader]


def same(a, b):
    assert len(a) == len(b)
    for x, y in zip(a, b):
        assert x.keys() == y.keys()
        for k in x:
            np.testing.assert_array_equal(x[k], y[k], err_msg=k)


def entries(cache):
    return [f for _, _, files in os.walk(cache) for f in files if f.endswith(".tc")]


def test_object_store_epochs_are_cached(tmp_path):
    ds = tessera.create(f"memory://py-cache-{os.getpid()}", SCHEMA)
    fill(ds)
    ds = tessera.open(ds.location)
    plain = ds.numpy(batch_size=16, seed=3)
    want = [epoch(plain), epoch(plain)]
    assert plain.io_stats()["cache_misses"] == 0
    # The filling threads of the last epoch: at least one, at most one per batch.
    assert 1 <= plain.io_stats()["threads"] <= len(want[1])

    cache = tmp_path / "cache"
    loader = ds.numpy(batch_size=16, seed=3, cache_dir=str(cache), cache_bytes=64 << 20)
    same(epoch(loader), want[0])
    first = loader.io_stats()
    assert first["cache_misses"] > 0 and first["cache_written_bytes"] > 0, first
    assert len(entries(cache)) == first["cache_misses"]
    same(epoch(loader), want[1])
    second = loader.io_stats()
    assert second["requests"] == first["requests"], "epoch 1 asked the store"
    assert second["cache_misses"] == first["cache_misses"]
    # (Epoch 1 may be served from the loader's in-memory page cache without a cache read.)
    assert second["cache_hits"] >= first["cache_hits"]
    assert second["cache_corrupt"] == second["cache_errors"] == second["cache_evictions"] == 0

    # A second loader (another rank of the node, say) reads everything from the cache.
    other = ds.numpy(batch_size=16, seed=3, cache_dir=str(cache), cache_bytes=64 << 20)
    same(epoch(other), want[0])
    s = other.io_stats()
    assert s["cache_misses"] == 0 and s["cache_hits"] > 0 and s["cache_read_bytes"] > 0, s


def test_local_directories_skip_the_cache_and_bad_settings_are_refused(tmp_path):
    ds = tessera.create(str(tmp_path / "ds"), SCHEMA)
    fill(ds)
    ds = tessera.open(str(tmp_path / "ds"))
    cache = tmp_path / "cache"
    loader = ds.numpy(batch_size=16, cache_dir=str(cache), cache_bytes=64 << 20)
    assert len(epoch(loader)) == 19
    assert loader.io_stats()["cache_hits"] == loader.io_stats()["cache_misses"] == 0
    assert not cache.exists()

    with pytest.raises(tessera.UsageError, match="cache_bytes"):
        ds.numpy(cache_dir=str(cache))
    mem = tessera.create(f"memory://py-cache-bad-{os.getpid()}", SCHEMA)
    fill(mem)
    mem = tessera.open(mem.location)
    (tmp_path / "a-file").write_bytes(b"x")
    with pytest.raises(tessera.UsageError, match="cache_dir"):
        mem.numpy(cache_dir=str(tmp_path / "a-file" / "cache"), cache_bytes=64 << 20)
    with pytest.raises(tessera.UsageError, match="at least"):
        mem.numpy(cache_dir=str(cache), cache_bytes=1 << 20)
