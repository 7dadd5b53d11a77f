"""ds.tensorflow(): the same batches as ds.numpy() for the same seed, as tf.Tensors (values
shared with the loader's buffers), with resume and transforms."""

import numpy as np
import pytest

import tessera
from tessera import transforms as T

tf = pytest.importorskip("tensorflow")


def test_tensorflow_batches_equal_numpy(ds):
    kw = dict(batch_size=16, seed=5, columns=["id", "x", "img", "bf", "tokens", "opt", "caption"])
    got = list(ds.tensorflow(**kw))
    want = list(ds.numpy(**kw))
    assert len(got) == len(want) > 1
    for g, w in zip(got, want):
        assert set(g) == set(w)
        for name, value in w.items():
            if name == "caption":
                assert g[name] == value
                continue
            assert isinstance(g[name], tf.Tensor), name
            if name == "bf":
                assert g[name].dtype == tf.bfloat16
                np.testing.assert_array_equal(tf.cast(g[name], tf.float32).numpy(), value)
            else:
                np.testing.assert_array_equal(g[name].numpy(), value, err_msg=name)


def test_tensorflow_values_share_the_loaders_buffer(ds):
    loader = ds.tensorflow(batch_size=8, shuffle=None, columns=["x"])
    batch = next(iter(loader))
    again = next(iter(ds.numpy(batch_size=8, shuffle=None, columns=["x"])))
    np.testing.assert_array_equal(batch["x"].numpy(), again["x"])
    # The tensor outlives the iterator and keeps its values while the loader runs on.
    kept = batch["x"].numpy().copy()
    for _ in ds.tensorflow(batch_size=8, shuffle=None, columns=["x"]):
        pass
    np.testing.assert_array_equal(batch["x"].numpy(), kept)


def test_tensorflow_resume_and_transforms(ds):
    ops = {"img": [T.CropPad([3, 3]), T.ToDtype("float32", scale=True)]}
    full = [b["img"].numpy() for b in ds.tensorflow(batch_size=10, seed=2, transforms=ops)]
    assert full[0].shape == (10, 3, 3) and full[0].dtype == np.float32
    loader = ds.tensorflow(batch_size=10, seed=2, transforms=ops)
    it = iter(loader)
    next(it), next(it), next(it)
    state = loader.state_dict()
    again = ds.tensorflow(batch_size=10, seed=2, transforms=ops)
    again.load_state_dict(state)
    rest = [b["img"].numpy() for b in again]
    assert len(rest) == len(full) - 3
    for a, b in zip(rest, full[3:]):
        np.testing.assert_array_equal(a, b)
    ds_tf = tf.data.Dataset.from_generator(
        lambda: (b["img"] for b in ds.tensorflow(batch_size=10, seed=2, transforms=ops)),
        output_signature=tf.TensorSpec(shape=(None, 3, 3), dtype=tf.float32),
    )
    assert sum(int(t.shape[0]) for t in ds_tf) == 100
