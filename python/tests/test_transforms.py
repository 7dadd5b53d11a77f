"""Augmentation in the loader (tessera.transforms): each op against torch/numpy on random
inputs and edge sizes, determinism across workers and resume, new draws per epoch, refusal
of ops that cannot apply, and the per-batch Python hook."""

import numpy as np
import pytest

import tessera
from tessera import transforms as T

torch = pytest.importorskip("torch")


def image(i, h, w):
    rng = np.random.default_rng(i)
    return rng.integers(0, 256, (h, w, 3), dtype=np.uint8)


SIZES = [(1, 1), (1, 7), (9, 1), (5, 6), (17, 31), (64, 48), (101, 77)]


@pytest.fixture(scope="module")
def images(tmp_path_factory):
    """`(path, list of HWC uint8 images)`: ragged RGB images of awkward sizes, two commits."""
    path = str(tmp_path_factory.mktemp("tr") / "ds")
    ds = tessera.create(path, [{"name": "image", "dtype": "u8", "shape": [None, None, 3]}, {"name": "id", "dtype": "i64"}])
    imgs = [image(i, *SIZES[i % len(SIZES)]) for i in range(28)]
    for part in (range(0, 15), range(15, 28)):
        ds.append({"image": [imgs[i] for i in part], "id": np.array(list(part), dtype=np.int64)})
    return path, imgs


def rows_of(path, ops, batch_size=7, **kw):
    """{id: transformed image} over one epoch."""
    ds = tessera.open(path)
    out = {}
    for b in ds.numpy(batch_size=batch_size, shuffle=None, transforms={"image": ops}, **kw):
        for j, i in enumerate(b["id"]):
            out[int(i)] = np.array(b["image"][j])
    return out


def torch_resize(img, h, w):
    x = torch.from_numpy(img).permute(2, 0, 1)[None].double()
    y = torch.nn.functional.interpolate(x, size=(h, w), mode="bilinear", antialias=True, align_corners=False)
    return y[0].permute(1, 2, 0).numpy()


@pytest.mark.parametrize("size", [(1, 1), (3, 5), (13, 8), (40, 40), (120, 90)])
def test_resize_matches_torch_antialiased_bilinear(images, size):
    path, imgs = images
    got = rows_of(path, [T.Resize(size), T.ToDtype("float32")])
    for i, img in enumerate(imgs):
        want = torch_resize(img, *size)
        assert got[i].shape == (*size, 3)
        np.testing.assert_allclose(got[i], want, atol=0.02, err_msg=f"{img.shape} -> {size}")
    # Rounded back to uint8 (no ToDtype): within one level of torch's float result.
    as_u8 = rows_of(path, [T.Resize(size)])
    for i, img in enumerate(imgs):
        assert np.abs(as_u8[i].astype(np.float64) - torch_resize(img, *size)).max() <= 0.5 + 1e-3


def test_center_crop_flip_and_normalize_match_numpy(images):
    path, imgs = images
    mean, std = (0.5, 0.4, 0.3), (0.25, 0.5, 2.0)
    got = rows_of(
        path, [T.CenterCrop((6, 5)), T.HorizontalFlip(p=1.0), T.Normalize(mean, std, dtype="float32", layout="CHW")]
    )
    for i, img in enumerate(imgs):
        h, w, _ = img.shape
        # torchvision's center_crop: pad (crop - size) // 2 before, the rest after; then
        # top = round((size - crop) / 2) (ties to even).
        ph, pw = max(6 - h, 0), max(5 - w, 0)
        padded = np.pad(img, ((ph // 2, ph - ph // 2), (pw // 2, pw - pw // 2), (0, 0)))
        H, W, _ = padded.shape
        top, left = int(round((H - 6) / 2)), int(round((W - 5) / 2))
        crop = padded[top : top + 6, left : left + 5][:, ::-1]
        want = ((crop.astype(np.float32) / 255 - np.float32(mean)) / np.float32(std)).transpose(2, 0, 1)
        np.testing.assert_allclose(got[i], want, rtol=1e-5, atol=1e-5, err_msg=str(img.shape))


def test_random_resized_crop_pipeline_is_deterministic_and_new_each_epoch(images):
    path, imgs = images
    ops = [T.RandomResizedCrop(12), T.HorizontalFlip(), T.Normalize(dtype="float16")]
    ds = tessera.open(path)

    def epoch(workers, e=0):
        loader = ds.pytorch(batch_size=5, seed=9, workers=workers, transforms={"image": ops})
        loader.set_epoch(e)
        return [(b["id"].tolist(), b["image"].clone()) for b in loader]

    one = epoch(1)
    assert one[0][1].shape == (5, 3, 12, 12) and one[0][1].dtype == torch.float16
    for workers in (2, 4):
        other = epoch(workers)
        assert [i for i, _ in other] == [i for i, _ in one]
        assert all(torch.equal(a, b) for (_, a), (_, b) in zip(one, other)), workers
    # Resume after two batches: the same augmented batches follow.
    loader = ds.pytorch(batch_size=5, seed=9, transforms={"image": ops})
    it = iter(loader)
    next(it), next(it)
    state = loader.state_dict()
    again = ds.pytorch(batch_size=5, seed=9, transforms={"image": ops})
    again.load_state_dict(state)
    rest = [b["image"] for b in again]
    assert len(rest) == len(one) - 2
    assert all(torch.equal(a, b) for a, (_, b) in zip(rest, one[2:]))
    # Epoch 1 draws anew (same rows, other crops).
    by_id = lambda batches: {i: img[j] for ids, img in batches for j, i in enumerate(ids)}
    e0, e1 = by_id(one), by_id(epoch(1, e=1))
    assert sum(not torch.equal(e0[i], e1[i]) for i in e0) >= 20


def test_time_crop_and_crop_pad(tmp_path):
    ds = tessera.create(str(tmp_path / "a"), [{"name": "wave", "dtype": "i16", "shape": [None]}, {"name": "id", "dtype": "i64"}])
    waves = [np.arange(n, dtype=np.int16) + 100 * n for n in (3, 10, 40)]
    ds.append({"wave": waves, "id": np.arange(3, dtype=np.int64)})
    for b in ds.numpy(batch_size=3, shuffle=None, transforms={"wave": T.RandomTimeCrop(8, stride=2)}):
        for j, i in enumerate(b["id"]):
            w, got = waves[i], b["wave"][j]
            start = int(np.flatnonzero(w == got[0])[0])
            want = np.zeros(8, np.int16)
            take = w[start::2][:8]
            want[: len(take)] = take
            np.testing.assert_array_equal(got, want)
    b = next(iter(ds.numpy(batch_size=3, shuffle=None, transforms={"wave": [T.CropPad([5])]})))
    np.testing.assert_array_equal(b["wave"][0], [300, 301, 302, 0, 0])
    np.testing.assert_array_equal(b["wave"][2], waves[2][:5])


def test_ops_that_cannot_apply_are_usage_errors(images):
    path, _ = images
    ds = tessera.open(path)
    with pytest.raises(tessera.UsageError, match="depends on the row"):
        ds.numpy(transforms={"image": [T.HorizontalFlip()]})
    with pytest.raises(tessera.UsageError, match="no such projected column"):
        ds.numpy(transforms={"nope": [T.CenterCrop(4)]})
    with pytest.raises(tessera.UsageError, match="rank 2"):
        ds.numpy(transforms={"id": [T.CenterCrop(4)]})
    with pytest.raises(tessera.UsageError, match="dtype"):
        ds.numpy(transforms={"image": [T.CenterCrop(4), T.ToDtype("complex64")]})
    with pytest.raises(TypeError, match="not a tessera.transforms op"):
        ds.numpy(transforms={"image": [lambda x: x]})


def test_batch_transform_runs_on_each_batch(images):
    path, _ = images
    seen = []

    def hook(batch):
        seen.append(len(batch["id"]))
        batch["twice"] = batch["id"] * 2
        return batch

    loader = tessera.open(path).numpy(batch_size=10, shuffle=None, transforms={"image": [T.CenterCrop(4)]}, batch_transform=hook)
    batches = list(loader)
    assert seen == [10, 10, 10] and all((b["twice"] == 2 * b["id"]).all() for b in batches)
