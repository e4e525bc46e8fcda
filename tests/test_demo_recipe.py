"""The demo's class-weighted loss: weights from the training labels, and the loss a plain loop gives."""

import math

import numpy as np
import pytest
import torch

from calibkit.demos import class_weights, weighted_loss


def test_class_weights_lift_rare_classes_and_average_one():
    labels = [[0, 0, 0, 0, 1, -100], [2, 0, 0, 0, 0, 1]]
    w = class_weights(labels, 4, 0.5)
    counts = np.array([8, 2, 1, 0])
    raw = (8 / np.maximum(counts, 1)) ** 0.5
    np.testing.assert_allclose(w, raw * 11 / (raw * counts).sum())
    assert (w * counts).sum() / counts.sum() == pytest.approx(1.0)
    np.testing.assert_allclose(class_weights(labels, 4, 0.0), np.ones(4))


def test_weighted_loss_is_the_weighted_mean_cross_entropy():
    torch.manual_seed(0)
    logits = torch.randn(2, 3, 4)
    labels = torch.tensor([[0, 3, -100], [1, 1, 2]])
    weights = np.array([0.5, 1.0, 2.0, 4.0])
    got = weighted_loss(weights)({"logits": logits}, labels).item()
    num = den = 0.0
    for z, y in zip(logits.reshape(-1, 4).tolist(), labels.reshape(-1).tolist()):
        if y == -100:
            continue
        log_p = z[y] - math.log(sum(math.exp(v) for v in z))
        num += -weights[y] * log_p
        den += weights[y]
    assert got == pytest.approx(num / den, rel=1e-6)
