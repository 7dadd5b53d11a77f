"""Vector indexes from Python: build one, search it (a full probe is the exact top-k), find
near-duplicates, save the rest as a view and train on it."""

import numpy as np
import pytest

import tessera


@pytest.fixture()
def embedded(tmp_path):
    """300 rows of 8-d f32 vectors around 5 centres; rows 50, 150 and 250 repeat the row
    before them."""
    rng = np.random.default_rng(3)
    centres = rng.normal(size=(5, 8)).astype(np.float32)
    emb = centres[np.arange(300) % 5] + 0.2 * rng.normal(size=(300, 8)).astype(np.float32)
    for r in (50, 150, 250):
        emb[r] = emb[r - 1]
    ds = tessera.create(str(tmp_path / "ds"), [{"name": "emb", "dtype": "f32", "shape": [8]}, {"name": "id", "dtype": "i64"}])
    ds.append({"emb": emb, "id": np.arange(300)})
    return ds, emb


def exact(emb, q, k):
    """The exact cosine top-k, ties by row: (row, distance) pairs."""
    e, q = emb.astype(np.float64), np.asarray(q, dtype=np.float32).astype(np.float64)
    d = 1.0 - (e @ q) / (np.linalg.norm(e, axis=1) * np.linalg.norm(q))
    order = np.lexsort((np.arange(len(d)), d))[:k]
    return [int(r) for r in order], d[order]


def test_build_search_and_curate(embedded):
    ds, emb = embedded
    info = ds.create_index("emb-cos", "emb", lists=6)
    assert (info["lists"], info["rows"], info["metric"], info["version"]) == (6, 300, "cosine", ds.version)
    assert ds.indexes() == ["emb-cos"] and ds.index_info("emb-cos")["default_nprobe"] == 6
    q = emb[17] * 1.1
    rows, dists = exact(emb, q, 5)
    hits = ds.search("emb-cos", q.tolist(), k=5, nprobe=6)
    assert [r for r, _ in hits] == rows
    np.testing.assert_allclose([d for _, d in hits], dists, atol=1e-9)
    few = ds.search("emb-cos", q.tolist(), k=5)
    assert len(few) == 5 and [d for _, d in few] == sorted(d for _, d in few)

    dropped = ds.near_duplicates("emb-cos", 1e-6, probe=6)
    assert dropped == [50, 150, 250]
    ds.save_view("unique", [r for r in range(len(ds)) if r not in set(dropped)])
    seen = [int(i) for batch in ds.numpy(view="unique", batch_size=99, columns=["id"]) for i in batch["id"]]
    assert sorted(seen) == sorted(set(range(300)) - {50, 150, 250})

    with pytest.raises(tessera.ConflictError):
        ds.create_index("emb-cos", "emb")
    with pytest.raises(tessera.UsageError):
        ds.create_index("x", "id")
    with pytest.raises(tessera.UsageError):
        ds.create_index("x", "emb", metric="dot")
    ds.drop_index("emb-cos")
    assert ds.indexes() == []
    with pytest.raises(tessera.NotFoundError):
        ds.search("emb-cos", q.tolist())
