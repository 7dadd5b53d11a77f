"""The loader: batches equal the reader's values (numpy and torch), resume, ranks, buffer
reuse that never changes what the user keeps, the GIL released while waiting."""

import json
import random
import sys
import threading
import time

import numpy as np
import pytest

import tessera

torch = pytest.importorskip("torch")


def check_batch(batch, rows, ref, to_np):
    """Every column of a loader batch equals the reader's rows `rows` (`ref` = ds.read())."""
    n = len(rows)
    for name, want in ref.items():
        got = batch[name]
        if name in ("caption", "blob"):
            assert got == [want[r] for r in rows], name
            continue
        if isinstance(want, list):  # ragged: zero padded + lengths
            values, lengths = to_np(got), to_np(batch[name + ".lengths"])
            assert values.shape[0] == n
            for i, r in enumerate(rows):
                w = want[r]
                if values.ndim == 2:
                    assert lengths[i] == len(w)
                    np.testing.assert_array_equal(values[i, : len(w)], w)
                    assert not values[i, len(w) :].any(), "padding is zero"
                else:
                    assert lengths[i] == w.shape[0]
                    np.testing.assert_array_equal(values[i, : w.shape[0]], w)
            continue
        g = to_np(got)
        if isinstance(want, np.ma.MaskedArray):
            valid = to_np(batch[name + ".valid"])
            np.testing.assert_array_equal(valid, ~np.ma.getmaskarray(want)[rows])
            np.testing.assert_array_equal(g, want.filled(0)[rows])
            continue
        w = want[rows]
        if name == "u":  # u16: as stored in numpy, widened to i32 for torch (no uint16 arithmetic)
            assert g.dtype == (np.uint16 if isinstance(got, np.ndarray) else np.int32), g.dtype
        np.testing.assert_array_equal(g, w.astype(g.dtype), err_msg=name)


def test_numpy_batches_equal_the_reader(ds):
    ref = ds.read()
    loader = ds.numpy(batch_size=8, shuffle=None, workers=2)
    assert len(loader) == 13  # 100 rows, the last batch padded from the start
    seen = []
    it = iter(loader)
    for batch in it:
        rows = it.last_rows.tolist()
        assert batch["img"].dtype == np.uint8 and batch["img"].shape == (8, 4, 5)
        assert batch["bf"].dtype == np.float32
        check_batch(batch, rows, ref, np.asarray)
        seen.extend(rows)
    assert seen[:100] == list(range(100)) and seen[100:] == list(range(4))


def test_torch_batches_equal_the_reader(ds):
    ref = ds.read()
    loader = ds.pytorch(batch_size=16, shuffle="global", seed=5, drop_last=True)
    seen = []
    it = iter(loader)

    def to_np(t):
        if t.dtype == torch.bfloat16:
            t = t.float()
        return t.numpy()

    for batch in it:
        assert isinstance(batch["x"], torch.Tensor) and batch["x"].shape == (16, 3)
        assert batch["bf"].dtype == torch.bfloat16 and batch["half"].dtype == torch.float16
        assert batch["flag"].dtype == torch.bool
        check_batch(batch, it.last_rows.tolist(), ref, to_np)
        seen.extend(it.last_rows.tolist())
    assert len(seen) == 96 and len(set(seen)) == 96
    assert seen != sorted(seen), "shuffled"


def test_block_shuffle_and_projection(ds):
    ref = ds.read(columns=["id", "tokens"])
    it = iter(ds.numpy(batch_size=10, columns=["tokens", "id"], shuffle="block", window_fragments=2, seed=1))
    rows = []
    for batch in it:
        assert list(batch) == ["tokens", "tokens.lengths", "id"]
        check_batch(batch, it.last_rows.tolist(), ref, np.asarray)
        rows.extend(it.last_rows.tolist())
    assert sorted(rows) == list(range(100))


def test_torch_dataloader_wrapper(ds):
    from tessera.torch import TesseraIterable

    it = TesseraIterable(ds, batch_size=10, shuffle=None, columns=["id"])
    dl = torch.utils.data.DataLoader(it, batch_size=None, num_workers=0)
    ids = torch.cat([b["id"] for b in dl])
    assert ids.tolist() == list(range(100))
    assert "num_workers=0" in TesseraIterable.__doc__


def epoch_rows(loader):
    it = iter(loader)
    out = []
    for _ in it:
        out.append(it.last_rows.tolist())
    return out


def test_resume_at_a_random_point_yields_the_rest(ds):
    opts = dict(batch_size=7, shuffle="global", seed=11, columns=["id", "caption"])
    full = epoch_rows(ds.numpy(**opts))
    rng = random.Random(3)
    for k in [rng.randrange(1, len(full)) for _ in range(3)] + [0, len(full)]:
        loader = ds.numpy(**opts)
        it = iter(loader)
        got = []
        for _ in range(k):
            batch = next(it)
            got.append(it.last_rows.tolist())
            assert batch["id"].tolist() == got[-1]
        state = json.loads(json.dumps(loader.state_dict()))  # survives a checkpoint file
        assert state["version"] == ds.version
        del it, loader
        resumed = ds.numpy(**opts)
        resumed.load_state_dict(state)
        rest = epoch_rows(resumed)
        if k == len(full):
            # Saved after the last batch: the next iteration is the next epoch.
            nxt = ds.numpy(**opts)
            nxt.set_epoch(1)
            assert rest == epoch_rows(nxt)
        else:
            assert got + rest == full, k


def test_consecutive_resumes_equal_one_run(ds):
    opts = dict(batch_size=6, shuffle="global", seed=2, columns=["id"])
    full = epoch_rows(ds.numpy(**opts))
    state, got = None, []
    while len(got) < len(full):
        loader = ds.numpy(**opts)
        if state is not None:
            loader.load_state_dict(state)
        it = iter(loader)
        for _ in range(3):
            try:
                next(it)
            except StopIteration:
                break
            got.append(it.last_rows.tolist())
        state = loader.state_dict()
        loader.close()
    assert got == full


def test_state_of_another_version_is_refused(ds, written):
    loader = ds.numpy(batch_size=8, columns=["id"])
    it = iter(loader)
    next(it)
    state = loader.state_dict()
    older = tessera.open(written[0], version=3).numpy(batch_size=8, columns=["id"])
    with pytest.raises(tessera.UsageError):
        older.load_state_dict(state)
    # The core checks it too, whatever the dict says.
    forged = dict(state, version=older.version)
    older.load_state_dict(forged)
    with pytest.raises(tessera.UsageError):
        iter(older)


def test_two_ranks_get_disjoint_equal_shards(ds, monkeypatch):
    opts = dict(batch_size=5, shuffle="global", seed=9, columns=["id"])
    shards = []
    for rank in (0, 1):
        loader = ds.numpy(rank=rank, world_size=2, **opts)
        assert (loader.rank, loader.world_size) == (rank, 2)
        it = iter(loader)
        ids = []
        for batch in it:
            assert batch["id"].tolist() == it.last_rows.tolist()
            ids.append(batch["id"].tolist())
        shards.append(ids)
    assert len(shards[0]) == len(shards[1]) == 10
    a = [r for b in shards[0] for r in b]
    b = [r for b in shards[1] for r in b]
    assert not set(a) & set(b)
    assert sorted(a + b) == list(range(100))
    # RANK / WORLD_SIZE from the environment (torchrun) give the same shard.
    monkeypatch.setenv("RANK", "1")
    monkeypatch.setenv("WORLD_SIZE", "2")
    env_loader = ds.numpy(**opts)
    assert env_loader.rank == 1 and epoch_rows(env_loader) == shards[1]


def test_a_kept_tensor_keeps_its_values(ds):
    loader = ds.pytorch(batch_size=4, shuffle="global", seed=4, columns=["img", "x", "tokens", "caption"])
    it = iter(loader)
    first = next(it)
    kept = first["img"]
    kept_view = first["x"][1:]  # a view of a view still holds the buffer
    copies = (kept.clone(), kept_view.clone())
    del first
    ptrs = set()
    for _ in range(20):
        batch = next(it)
        batch["img"].add_(1)  # writing a batch the loop owns must not reach the kept tensor
        ptrs.add(batch["x"].data_ptr())
        del batch
    assert torch.equal(kept, copies[0])
    assert torch.equal(kept_view, copies[1])
    # Buffers nobody holds are refilled rather than reallocated: a handful of addresses only.
    assert len(ptrs) < 20, ptrs


def test_zero_copy(ds):
    # numpy: the arrays are views whose memory belongs to the loader's buffer object.
    batch = next(iter(ds.numpy(batch_size=8, shuffle=None, columns=["img", "x"])))
    for name in ("img", "x"):
        base = batch[name]
        while isinstance(base, np.ndarray):
            base = base.base
        assert type(base).__name__ == "BufferOwner", name
        assert batch[name].ctypes.data % 64 == 0, "buffers are 64-byte aligned"
    # torch: the tensor shares the array's memory (torch.from_numpy).
    loader = ds.pytorch(batch_size=8, shuffle=None, columns=["img"])
    it = iter(loader)
    pieces, *_ = it._epoch.next()
    (_, values, *_rest) = pieces[0]
    t = torch.from_numpy(values)
    assert t.data_ptr() == values.ctypes.data
    t[0, 0, 0] = 7
    assert values[0, 0, 0] == 7


def test_gil_is_released_while_waiting(tmp_path):
    # Rows of 1 MiB, so that fetching a batch takes a while (tens of milliseconds).
    path = str(tmp_path / "big")
    ds = tessera.create(path, [{"name": "blob", "dtype": "u8", "shape": [1024, 1024]}])
    ds.append({"blob": (np.arange(24 * 1024 * 1024) % 251).astype(np.uint8).reshape(24, 1024, 1024)})
    loader = ds.numpy(batch_size=24, shuffle=None, workers=1)
    # A thread counts its own progress per millisecond. While the main thread is inside the
    # native next() holding the GIL, it cannot run at all; with the GIL released it runs
    # while next() waits. A short switch interval bounds how long it may keep the GIL it got
    # just before the call, so that only the call's first couple of milliseconds are unclear.
    start = time.perf_counter()
    ticks = np.zeros(600_000, dtype=np.int64)
    stop = threading.Event()

    def spin():
        while not stop.is_set():
            ticks[int((time.perf_counter() - start) * 1000)] += 1

    interval = sys.getswitchinterval()
    sys.setswitchinterval(0.0002)
    t = threading.Thread(target=spin)
    t.start()
    windows = []
    try:
        for _ in range(4):
            it = iter(loader)
            t0 = time.perf_counter() - start
            got = it._epoch.next()  # starts the epoch's workers and waits for the first batch
            t1 = time.perf_counter() - start
            assert got is not None
            windows.append((t0, t1))
            del got
            loader.close()
    finally:
        stop.set()
        t.join()
        sys.setswitchinterval(interval)
    # The first half of each call after its first 2 ms: the wait for the batch. (The end of
    # the call builds the arrays with the GIL, and numpy may run Python code there.)
    inside = [int(ticks[int(a * 1000) + 2 : int((a + b) * 500)].sum()) for a, b in windows if b - a > 0.01]
    assert inside, f"no call longer than 10 ms to measure: {windows}"
    assert max(inside) > 0, f"the spinning thread never ran while next() waited (GIL held): {windows}"


def test_bad_arguments(ds):
    with pytest.raises(tessera.UsageError):
        ds.numpy(batch_size=0)
    with pytest.raises(tessera.UsageError):
        ds.numpy(shuffle="sideways")
    with pytest.raises(tessera.UsageError):
        ds.numpy(rank=2, world_size=2)
    with pytest.raises(tessera.UsageError):
        ds.numpy().load_state_dict({"format": "something else"})
    if not torch.cuda.is_available():
        with pytest.raises(tessera.UsageError):
            ds.pytorch(device="cuda")
    # device="cpu" is the zero-copy default.
    assert next(iter(ds.pytorch(batch_size=2, device="cpu", columns=["id"])))["id"].device.type == "cpu"


def test_keeping_every_batch(ds):
    # More batches kept than the pipeline has buffers: the loader allocates new ones and never
    # refills a kept one.
    ref = ds.read(columns=["id", "x", "tokens"])
    loader = ds.numpy(batch_size=4, shuffle="global", seed=8, columns=["id", "x", "tokens"], prefetch_batches=2)
    it = iter(loader)
    kept = [(it.last_rows.tolist(), b) for b in it]
    assert len(kept) == 25
    for rows, batch in kept:
        check_batch(batch, rows, ref, np.asarray)


def test_skip_bad_samples_reports_replacements(written, tmp_path):
    import shutil
    from pathlib import Path

    dst = tmp_path / "one-bad-file"
    shutil.copytree(written[0], dst)
    f = sorted(Path(dst, "data").glob("*.tsd"))[0]  # one of the three fragments' files
    b = bytearray(f.read_bytes())
    for k in range(len(b) // 3, len(b) // 3 + 8):
        b[k] ^= 0x5A
    f.write_bytes(bytes(b))
    ds = tessera.open(str(dst))
    with pytest.raises((tessera.MalformedError, tessera.InvalidError)):
        list(ds.numpy(batch_size=10, shuffle=None))
    loader = ds.numpy(batch_size=10, shuffle=None, skip_bad_samples=True)
    batches = list(loader)
    assert len(batches) == len(loader)
    skipped = loader.skipped()
    assert skipped and {"row", "replacement", "error"} <= set(skipped[0])
    assert all(s["row"] != s["replacement"] for s in skipped)


def test_ragged_offsets(ds):
    batch = next(iter(ds.numpy(batch_size=5, shuffle=None, columns=["tokens"], ragged_offsets=True)))
    lengths = batch["tokens.lengths"]
    assert batch["tokens.offsets"].tolist() == [0] + np.cumsum(lengths).tolist()


def test_packed_ragged_columns(ds):
    """ragged="packed": rows back to back with offsets and shapes, equal to the reader's
    values, text from the packed bytes, and a jagged nested tensor built without a copy."""
    ref = ds.read()
    cols = ["tokens", "mat", "caption", "blob", "id"]
    loader = ds.pytorch(batch_size=8, shuffle="global", seed=3, columns=cols, ragged="packed")
    it = iter(loader)
    for batch in it:
        rows = it.last_rows.tolist()
        assert batch["caption"] == [ref["caption"][r] for r in rows]
        assert batch["blob"] == [ref["blob"][r] for r in rows]
        for name in ("tokens", "mat"):
            values, offsets, shapes = batch[name], batch[name + ".offsets"], batch[name + ".shapes"]
            assert offsets.tolist() == [0] + np.cumsum([ref[name][r].shape[0] for r in rows]).tolist()
            assert values.shape[0] == offsets[-1], "no padding"
            for i, r in enumerate(rows):
                assert tuple(shapes[i].tolist()) == ref[name][r].shape
                np.testing.assert_array_equal(values[offsets[i] : offsets[i + 1]].numpy(), ref[name][r])
        nested = torch.nested.nested_tensor_from_jagged(batch["tokens"], batch["tokens.offsets"])
        for i, r in enumerate(rows):
            np.testing.assert_array_equal(nested[i].numpy(), ref["tokens"][r])
    with pytest.raises(tessera.UsageError, match="packed"):
        ds.numpy(ragged="jagged")


def test_a_tensor_outlives_its_loader(ds):
    import gc

    ref = ds.read([0, 1, 2], columns=["img"])["img"]
    loader = ds.pytorch(batch_size=3, shuffle=None, columns=["img"])
    t = next(iter(loader))["img"]
    del loader
    gc.collect()
    # The memory belongs to the tensor's buffer owner, not to the (gone) loader.
    np.testing.assert_array_equal(t.numpy(), ref)
