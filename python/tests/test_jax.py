"""`ds.jax()`: the loader's batches as JAX arrays through DLPack, equal to the numpy batches;
an array kept past later batches keeps its values (its buffer is not refilled under it)."""

import numpy as np
import pytest

jax = pytest.importorskip("jax")


@pytest.fixture(autouse=True)
def x64():
    """i64/f64 columns stay 64-bit only with jax_enable_x64 (else JAX narrows them)."""
    before = jax.config.jax_enable_x64
    jax.config.update("jax_enable_x64", True)
    yield
    jax.config.update("jax_enable_x64", before)


def test_jax_batches_equal_the_numpy_batches(ds):
    cols = ["id", "x", "img", "bf", "half", "flag", "tokens", "caption", "opt"]
    opts = dict(batch_size=8, shuffle="global", seed=3, columns=cols)
    want = [{k: (v.copy() if isinstance(v, np.ndarray) else v) for k, v in b.items()} for b in ds.numpy(**opts)]
    got = list(ds.jax(**opts))
    assert len(got) == len(want) == 13
    for g, w in zip(got, want):
        assert set(g) == set(w)
        for name, wv in w.items():
            gv = g[name]
            if name == "caption":
                assert gv == wv
                continue
            assert isinstance(gv, jax.Array), name
            if name == "bf":
                assert gv.dtype == jax.numpy.bfloat16
                gv = gv.astype(jax.numpy.float32)
            else:
                assert gv.dtype == wv.dtype, name
            np.testing.assert_array_equal(np.asarray(gv), wv, err_msg=name)


def test_a_kept_jax_array_keeps_its_values(ds):
    loader = ds.jax(batch_size=4, shuffle=None, columns=["id", "img"], workers=2, prefetch_batches=2)
    it = iter(loader)
    first = next(it)
    kept = np.asarray(first["img"]).copy()
    ids = np.asarray(first["id"]).tolist()
    for _ in it:  # every later batch; the pool would reuse the first buffer if it were free
        pass
    assert np.asarray(first["id"]).tolist() == ids == [0, 1, 2, 3]
    np.testing.assert_array_equal(np.asarray(first["img"]), kept)
