"""The harness's own checks catch a misconfigured system: wrong dtypes or shapes, rows that
differ from the workload's, rows repeated or missed in an epoch.

    .venv-peers/bin/python -m pytest benches/peers -q
"""

import os
import sys

import numpy as np
import pytest
import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import workload  # noqa: E402
from workload import BadBatch  # noqa: E402


def batch(ids):
    return workload.collate([workload.row(i) for i in ids])


def test_rows_are_deterministic_distinct_crops_of_the_right_form():
    a, b, c = workload.row(7), workload.row(7), workload.row(8)
    assert a["image"].shape == (224, 224, 3) and a["image"].dtype == np.uint8
    assert np.array_equal(a["image"], b["image"]) and np.array_equal(a["tokens"], b["tokens"])
    assert not np.array_equal(a["image"], c["image"])
    assert 16 <= len(a["tokens"]) <= 256 and a["tokens"].dtype == np.int32
    assert a["embedding"].shape == (512,) and abs(float(np.linalg.norm(a["embedding"])) - 1) < 1e-5
    assert a["image"].std() > 10  # a photograph, not a flat fill


def test_pad_flat_pads_with_zeros_and_keeps_the_rows():
    values = np.arange(1, 7, dtype=np.int32)
    padded, lengths = workload.pad_flat(values, np.array([0, 1, 4, 6]))
    assert lengths.tolist() == [1, 3, 2]
    assert padded.tolist() == [[1, 0, 0], [2, 3, 4], [5, 6, 0]]


def test_a_collated_batch_passes_every_check():
    b = batch([3, 1, 2])
    assert workload.check_batch(b, 64) == 3
    workload.check_values(b, positions=range(3))


@pytest.mark.parametrize(
    "spoil, message",
    [
        (lambda b: b.update(image=b["image"].float()), "dtype"),
        (lambda b: b.update(label=b["label"].to(torch.int32)), "dtype"),
        (lambda b: b.update(image=b["image"][:, :, :, :1].contiguous()), "shape"),
        (lambda b: b.update(tokens=torch.nn.functional.pad(b["tokens"], (0, 1))), "shape"),
        (lambda b: b.update(embedding=b["embedding"].numpy()), "torch.Tensor"),
        (lambda b: b.pop("tokens.lengths"), "tokens.lengths"),
    ],
)
def test_a_batch_of_the_wrong_form_is_rejected(spoil, message):
    b = batch([0, 1])
    spoil(b)
    with pytest.raises(BadBatch, match=message):
        workload.check_batch(b, 64)


def test_a_batch_larger_than_the_batch_size_is_rejected():
    with pytest.raises(BadBatch, match="rows"):
        workload.check_batch(batch([0, 1, 2]), 2)


def test_values_that_differ_from_the_workload_are_rejected():
    b = batch([4, 5])
    b["image"][1, 0, 0, 0] ^= 1
    with pytest.raises(BadBatch, match="image"):
        workload.check_values(b)
    b = batch([4, 5])
    b["label"][0] = 6  # a row delivered under another row's label
    with pytest.raises(BadBatch):
        workload.check_values(b)


def test_an_epoch_must_deliver_each_row_once():
    workload.check_epoch([np.array([2, 0]), np.array([1, 3])], 4, 2)
    with pytest.raises(BadBatch, match="repeated"):
        workload.check_epoch([np.array([0, 1]), np.array([1, 3])], 4, 2)
    with pytest.raises(BadBatch, match="3 rows"):
        workload.check_epoch([np.array([0, 1, 2])], 4, 4)


def test_a_padded_last_batch_is_allowed_only_for_a_padding_loader_and_only_at_the_end():
    epoch = [np.array([4, 0, 2]), np.array([1, 3, 4])]  # 5 rows, the last batch padded with row 4
    workload.check_epoch(epoch, 5, 3, pads=True)
    with pytest.raises(BadBatch, match="repeated"):
        workload.check_epoch(epoch, 5, 3)
    with pytest.raises(BadBatch, match="repeated"):  # the repeat is not in the tail
        workload.check_epoch([np.array([4, 4, 2]), np.array([1, 3, 0])], 5, 3, pads=True)
    with pytest.raises(BadBatch):  # a whole extra batch is not padding
        workload.check_epoch([np.array([0, 1]), np.array([0, 1])], 2, 2, pads=True)
