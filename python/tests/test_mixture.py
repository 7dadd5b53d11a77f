"""Mixtures from Python: ``tessera.mix`` over datasets and a view, each source's share of an
epoch, disjoint shards, and a change of the mix at a resume point that continues exactly."""

import json

import numpy as np
import pytest

import tessera


@pytest.fixture()
def sources(tmp_path):
    """Three sources: 60 rows (ids 0..), 30 rows (ids 1000..), and a view of 20 of 50 rows
    (ids 2000..)."""
    out = []
    for k, n in enumerate([60, 30, 50]):
        ds = tessera.create(str(tmp_path / f"s{k}"), [{"name": "id", "dtype": "i64"}, {"name": "x", "dtype": "f32", "shape": [2]}])
        ids = np.arange(n) + 1000 * k
        ds.append({"id": ids, "x": np.stack([ids, -ids], axis=1).astype(np.float32)})
        out.append(ds)
    out[2].save_view("even", list(range(0, 40, 2)), "even rows")
    return out


def read(loader, epoch=None):
    """(ids, sources) per batch of one epoch."""
    if epoch is not None:
        loader.set_epoch(epoch)
    it = iter(loader)
    got = []
    for batch in it:
        ids = batch["id"].tolist()
        assert (batch["x"][:, 0] == batch["id"]).all()
        assert (it.last_sources.astype(np.int64) * 1000 + it.last_rows.astype(np.int64)).tolist() == ids
        got.append(ids)
    return got


def test_each_source_takes_its_share(sources):
    a, b, c = sources
    mix = tessera.mix([a, b, (c, "even")], weights=[0.5, 0.3, 0.2])
    loader = mix.numpy(batch_size=10, seed=1)
    assert loader.mixture_counts(0) == [55, 33, 22]  # 60 + 30 + 20 samples, split by weight
    ids = [i for batch in read(loader) for i in batch][:110]
    per = [sum(1 for i in ids if i // 1000 == k) for k in range(3)]
    assert per == [55, 33, 22]
    assert all(i - 2000 in range(0, 40, 2) for i in ids if i >= 2000), "only the view's rows"
    counts = tessera.mix([a, b], samples=[10, 60]).numpy(batch_size=7).mixture_counts(0)
    assert counts == [10, 60]  # "choose n": the 30-row source twice
    with pytest.raises(tessera.UsageError):
        tessera.mix([a, b], weights=[1.0], samples=[1, 2])
    with pytest.raises(tessera.UsageError):
        tessera.mix([a, b], weights=[0.0, 0.0]).numpy()


def test_ranks_split_a_mixture_and_a_change_resumes_exactly(sources):
    a, b, c = sources
    mix = tessera.mix([a, b], weights=[0.7, 0.3])
    whole = read(mix.numpy(batch_size=12, seed=4))
    shards = [read(mix.numpy(batch_size=4, seed=4, rank=r, world_size=3)) for r in range(3)]
    assert [sum((s[i] for s in shards), []) for i in range(len(whole))] == whole

    loader = mix.numpy(batch_size=12, seed=4)
    it = iter(loader)
    head = [next(it)["id"].tolist() for _ in range(2)]
    state = loader.state_dict()
    it.close()
    assert tessera.Mixture.from_state(state).to_json() == mix.to_json()
    assert json.loads(state["state"])["samples_consumed_global"] == "24"

    # From the resume point on, the view joins and takes most of the samples.
    changed = tessera.Mixture.from_state(state).change(state, weights=[0.2, 0.2, 0.6], add=[(c, "even")])
    resumed = changed.numpy(batch_size=12, seed=4)
    resumed.load_state_dict(state)
    tail = read(resumed)
    assert sum(1 for batch in tail for i in batch if i >= 2000) > 30
    replay = read(changed.numpy(batch_size=12, seed=4))
    assert replay == head + tail
    # The old mixture refuses a state taken after the change.
    later = changed.numpy(batch_size=12, seed=4)
    later.load_state_dict(state)
    it = iter(later)
    next(it)
    after = later.state_dict()
    it.close()
    old = mix.numpy(batch_size=12, seed=4)
    old.load_state_dict(after)
    with pytest.raises(tessera.TesseraError):
        iter(old)


def test_a_lineage_record_names_each_steps_rows(sources, tmp_path):
    import subprocess, shutil, os

    a, b, _ = sources
    record = tmp_path / "run.lineage"
    loader = tessera.mix([a, b], weights=[0.5, 0.5]).numpy(batch_size=9, seed=2, lineage=str(record))
    it = iter(loader)
    steps = []
    for batch in it:
        steps.append(list(zip(it.last_sources.tolist(), it.last_rows.tolist())))
    lines = record.read_text().splitlines()
    assert json.loads(lines[0])["format"] == "tessera-lineage/1"
    assert json.loads(lines[1])["kind"] == "start"
    from pathlib import Path

    built = Path(__file__).parents[2] / "target" / os.environ.get("TESSERA_BUILD_PROFILE", "debug") / "tessera"
    exe = os.environ.get("TESSERA_BIN") or shutil.which("tessera") or (str(built) if built.exists() else None)
    if exe is None:
        pytest.skip("the tessera CLI is not on PATH")
    out = json.loads(subprocess.run([exe, "--json", "lineage", str(record), "--step", "2"], check=True, capture_output=True, text=True).stdout)
    assert [(r["source"], r["row"]) for r in out["rows"]] == steps[2]


def test_sources_map_and_fill_columns(sources, tmp_path):
    a, _, _ = sources
    other = tessera.create(str(tmp_path / "other"), [{"name": "ident", "dtype": "i64"}])
    other.append({"ident": np.arange(5) + 5000})
    mix = tessera.mix(
        [a, {"source": other, "columns": {"id": "ident"}, "fill": {"x": np.array([9.0, -9.0], np.float32)}}],
        samples=[6, 5],
    )
    it = iter(mix.numpy(batch_size=11, seed=0))
    batch = next(it)
    from_other = it.last_sources == 1
    assert sorted(batch["id"][from_other].tolist()) == [5000, 5001, 5002, 5003, 5004]
    assert (batch["x"][from_other] == [9.0, -9.0]).all()
    assert (batch["x"][~from_other][:, 0] == batch["id"][~from_other]).all()
    again = tessera.Mixture.from_json(mix.to_json())
    assert again.sources == mix.sources
    with pytest.raises(tessera.UsageError):
        tessera.mix([a, other], weights=[1, 1]).numpy()
