"""Views from Python: save one, train on it with ``view=`` (exactly its rows of its pinned
version, disjoint shards), and a loader state bound to the view."""

import pytest

import tessera


@pytest.fixture()
def viewed(tmp_path):
    """A dataset of 40 `id` rows in 4 appends, a view of 15 of them, and a later commit."""
    ds = tessera.create(str(tmp_path / "ds"), [{"name": "id", "dtype": "i64"}])
    for f in range(4):
        ds.append({"id": list(range(10 * f, 10 * f + 10))})
    rows = [37, 2, 19, 5, 30, 11, 8, 25, 0, 14, 33, 21, 6, 28, 17]
    ds.save_view("pick", rows, "a test selection")
    ds.save_view("other", list(reversed(rows)), "")
    ds.append({"id": [100, 101]})
    return ds, rows


def test_a_view_yields_its_rows_in_order_and_pins_its_version(viewed):
    ds, rows = viewed
    assert ds.views() == ["other", "pick"]
    loader = ds.numpy(view="pick", shuffle=None, batch_size=5, columns=["id"])
    assert loader.version == 5 and len(loader) == 3
    it = iter(loader)
    got = []
    for batch in it:
        assert batch["id"].tolist() == it.last_rows.tolist()
        got.extend(batch["id"].tolist())
    assert got == rows
    assert [r for b in loader.plan_rows(0) for r in b] == rows
    shuffled = [r for b in ds.numpy(view="pick", batch_size=5, columns=["id"]).plan_rows(0) for r in b]
    assert sorted(shuffled) == sorted(rows) and shuffled != rows


def test_shards_of_a_view_are_disjoint(viewed):
    ds, rows = viewed
    shards = [
        [r for b in ds.numpy(view="pick", batch_size=3, world_size=2, rank=k, drop_last=True).plan_rows(1) for r in b]
        for k in (0, 1)
    ]
    assert len(shards[0]) == len(shards[1]) == 6
    assert not set(shards[0]) & set(shards[1]) and set(shards[0] + shards[1]) <= set(rows)


def test_a_state_of_another_view_is_refused(viewed):
    ds, rows = viewed
    loader = ds.numpy(view="pick", batch_size=5, columns=["id"])
    it = iter(loader)
    next(it)
    state = loader.state_dict()
    other = ds.numpy(view="other", batch_size=5, columns=["id"])
    other.load_state_dict(state)
    with pytest.raises(tessera.UsageError):
        iter(other)
    with pytest.raises(tessera.NotFoundError):
        ds.numpy(view="missing")
    with pytest.raises(tessera.ConflictError):
        ds.save_view("pick", [1], "")
