"""Token packing from Python: every token once per epoch, segments and positions, and an
exact resume inside a document."""

import numpy as np

import tessera


def make(tmp_path):
    ds = tessera.create(str(tmp_path / "docs"), [{"name": "tokens", "dtype": "i32", "shape": [None]}])
    lengths = [(d * 37) % 90 for d in range(60)]
    ds.append({"tokens": [np.arange(n, dtype=np.int32) + 1000 * d for d, n in enumerate(lengths)]})
    return ds, lengths


def tokens_of(batch):
    t, seg = np.asarray(batch["tokens"]), np.asarray(batch["segment_ids"])
    return t[seg > 0].tolist()


def test_packing_covers_every_token_and_resumes(tmp_path):
    ds, lengths = make(tmp_path)
    packed = ds.numpy(batch_size=6, ragged="packed", seed=2).packed("tokens", context=64, windows=2)
    epoch = list(packed)
    got = sorted(t for b in epoch for t in tokens_of(b))
    assert got == sorted(1000 * d + o for d, n in enumerate(lengths) for o in range(n))
    b = epoch[0]
    assert b["tokens"].shape == (2, 64) and b["tokens"].dtype == np.int32
    for window, start, n, row, _source, offset in b["pieces"].tolist():
        assert b["position_ids"][window, start : start + n].tolist() == list(range(n))
        assert b["tokens"][window, start].item() == 1000 * row + offset

    packed.set_epoch(0)  # iter() went on to epoch 1
    it = iter(packed)
    head = [next(it) for _ in range(3)]
    state = packed.state_dict()
    assert [tokens_of(x) for x in head] == [tokens_of(x) for x in epoch[:3]]
    again = ds.numpy(batch_size=6, ragged="packed", seed=2).packed("tokens", context=64, windows=2)
    again.load_state_dict(state)
    rest = list(again)
    assert [x["tokens"].tolist() for x in rest] == [x["tokens"].tolist() for x in epoch[3:]]
    assert [x["segment_ids"].tolist() for x in rest] == [x["segment_ids"].tolist() for x in epoch[3:]]


def test_packing_needs_a_packed_ragged_column(tmp_path):
    ds, _ = make(tmp_path)
    try:
        list(ds.numpy(batch_size=6).packed("tokens", context=64, windows=2))
    except tessera.TesseraError as e:
        assert "packed" in str(e)
    else:
        raise AssertionError("a padded column was packed")


def test_packing_across_epochs_runs_on_and_resumes(tmp_path):
    ds, lengths = make(tmp_path)
    total = sum(lengths)
    stream = ds.numpy(batch_size=6, ragged="packed", seed=2).packed("tokens", context=64, windows=2, across_epochs=True)
    it = iter(stream)
    n = 2 * total // 128 + 3
    got = [next(it) for _ in range(n)]
    assert all((np.asarray(b["segment_ids"]) > 0).all() for b in got), "no padding at epoch ends"
    flat = [t for b in got for t in tokens_of(b)]
    assert sorted(flat[:total]) == sorted(flat[total : 2 * total])
    state = stream.state_dict()
    after = [next(it) for _ in range(2)]
    again = ds.numpy(batch_size=6, ragged="packed", seed=2).packed("tokens", context=64, windows=2, across_epochs=True)
    again.load_state_dict(state)
    it2 = iter(again)
    assert [next(it2)["tokens"].tolist() for _ in range(2)] == [b["tokens"].tolist() for b in after]
