"""calibkit.plugins.torchmetrics: a torchmetrics Metric on the accumulator's sums, equal to
calibration_report on the concatenated data, in one process and in a two-process Lightning run."""

import json

import numpy as np
import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("torchmetrics")

import calibkit  # noqa: E402
from calibkit.metrics.settings import CalibrationSettings  # noqa: E402
from calibkit.plugins.torchmetrics import CalibrationMetrics  # noqa: E402


def close(report: dict, expected: dict, skip=("ace", "ace_error_bound")) -> None:
    """Every key of ``expected`` (but streamed ACE) equal in ``report`` to 1e-12."""
    for key, value in expected.items():
        if key in skip:
            continue
        got = report[key].numpy() if isinstance(report[key], torch.Tensor) else report[key]
        np.testing.assert_allclose(got, np.asarray(value, dtype=float), rtol=1e-12, atol=1e-12, err_msg=key)


def logits_and_labels(n: int, k: int, seed: int = 0):
    rng = np.random.default_rng(seed)
    z = rng.normal(size=(n, k)) * 2
    z[np.arange(n), rng.integers(0, k, n)] += 1.5
    return z, rng.integers(0, k, n)


def test_several_updates_equal_calibration_report_on_the_concatenated_data():
    z, y = logits_and_labels(3_000, 5)
    metric = CalibrationMetrics(from_logits=True)
    for part in np.array_split(np.arange(len(y)), 4):
        metric.update(torch.from_numpy(z[part]), torch.from_numpy(y[part]))
    report = metric.compute()
    expected = calibkit.calibration_report(z, y, from_logits=True, metrics=metric.metrics)
    assert set(report) == set(expected) | {"ace_error_bound"}
    assert all(v.dtype == torch.float64 and v.ndim == 0 for v in report.values())  # what self.log_dict takes
    close(report, expected)
    # ACE streams as the accumulator's: within its bound of the exact value
    assert abs(float(report["ace"]) - expected["ace"]) <= float(report["ace_error_bound"])
    assert metric.sums.dtype == torch.float64


def test_probabilities_tokens_and_ignore_index():
    rng = np.random.default_rng(1)
    p = rng.dirichlet(np.ones(4), size=(6, 9))  # token classification: (N, L, K)
    y = rng.integers(0, 4, size=(6, 9))
    y[:, 6:] = -100  # padding
    metric = CalibrationMetrics(metrics=["ece", "cece", "sce", "brier", "nll", "subset_ece"])
    metric.update(torch.from_numpy(p[:2]), torch.from_numpy(y[:2]))
    metric.update(p[2:], y[2:])  # numpy too
    report = metric.compute()
    expected = calibkit.calibration_report(p, y, metrics=metric.metrics)
    assert float(report["n"]) == 36
    assert report["subset_ece"].shape == (4,)  # asked for by name: one value per class
    close(report, expected)


def test_settings_by_keyword_or_settings_and_binary_input():
    rng = np.random.default_rng(2)
    p, y = rng.random(500), rng.integers(0, 2, 500)
    by_keywords = CalibrationMetrics(metrics=["ece", "rbece"], n_bins=7, rbece_bins=5, theta=0)
    by_settings = CalibrationMetrics(
        metrics=["ece", "rbece"], settings=CalibrationSettings(n_bins=7, rbece_bins=5, theta=0)
    )
    for metric in (by_keywords, by_settings):
        metric.update(torch.from_numpy(p[:200]), torch.from_numpy(y[:200]))
        metric.update(torch.from_numpy(p[200:]), torch.from_numpy(y[200:]))
        close(
            metric.compute(),
            calibkit.calibration_report(p, y, metrics=["ece", "rbece"], n_bins=7, rbece_bins=5, theta=0),
        )
    with pytest.raises(ValueError, match=r"`n_bins=7` and `settings\.n_bins="):
        CalibrationMetrics(n_bins=7, settings=CalibrationSettings())


@pytest.mark.filterwarnings("ignore:The ``compute`` method:UserWarning")  # torchmetrics' own, before ours
def test_forward_reset_and_merge_state():
    z, y = logits_and_labels(800, 3, seed=3)
    metric = CalibrationMetrics(metrics=["ece", "nll"], from_logits=True)
    batch = metric(torch.from_numpy(z[:300]), torch.from_numpy(y[:300]))  # forward: the batch's value
    close(batch, calibkit.calibration_report(z[:300], y[:300], metrics=["ece", "nll"], from_logits=True))
    metric(torch.from_numpy(z[300:]), torch.from_numpy(y[300:]))
    close(metric.compute(), calibkit.calibration_report(z, y, metrics=["ece", "nll"], from_logits=True))
    other = CalibrationMetrics(metrics=["ece", "nll"], from_logits=True)
    other.update(torch.from_numpy(z[:100]), torch.from_numpy(y[:100]))
    metric.merge_state(other)  # another process's sums, added
    both = np.concatenate([z, z[:100]]), np.concatenate([y, y[:100]])
    close(metric.compute(), calibkit.calibration_report(*both, metrics=["ece", "nll"], from_logits=True))
    fresh = CalibrationMetrics(metrics=["ece", "nll"], from_logits=True)
    fresh.merge_state(other)  # into a metric that saw no batch: it takes the layout too
    close(fresh.compute(), calibkit.calibration_report(z[:100], y[:100], metrics=["ece", "nll"], from_logits=True))
    metric.reset()
    with pytest.raises(ValueError, match="no batch since the metric was built or reset"):
        metric.compute()


def test_refusals_name_the_argument():
    with pytest.raises(ValueError, match="`metrics`: smece needs every row"):
        CalibrationMetrics(metrics=["ece", "smece"])
    with pytest.raises(ValueError, match="`metrics` has unknown names"):
        CalibrationMetrics(metrics=["ecee"])
    metric = CalibrationMetrics(metrics=["ece"])
    metric.update(torch.tensor([[0.9, 0.1], [0.2, 0.8]]), torch.tensor([0, 1]))
    with pytest.raises(ValueError, match="3 classes but earlier batches had 2"):
        metric.update(torch.tensor([[0.8, 0.1, 0.1]]), torch.tensor([0]))
    with pytest.raises(ValueError, match="`labels`"):
        metric.update(torch.tensor([[0.9, 0.1]]), torch.tensor([5]))
    with pytest.raises(ValueError, match="2,048 classes"):
        CalibrationMetrics(metrics=["ece"]).update(torch.full((2, 3000), 1 / 3000), torch.tensor([0, 1]))


def test_the_sync_is_the_sums_not_the_rows():
    """The state is O(bins x classes): the same bytes after 100 and after 10,000 rows."""
    small, large = (
        CalibrationMetrics(metrics=["ece", "brier", "nll"]),
        CalibrationMetrics(metrics=["ece", "brier", "nll"]),
    )
    for metric, n in ((small, 100), (large, 10_000)):
        z, y = logits_and_labels(n, 10)
        metric.update(torch.softmax(torch.from_numpy(z), 1), torch.from_numpy(y))
    assert small.sums.nbytes == large.sums.nbytes < 8_000


# ------------------------------------------------------------------------------------------
# Two processes (gloo) in a Lightning Trainer: the logged values equal the report on the
# concatenated validation data of both.

N_VAL, K = 96, 4
LOGGED = ["ece", "cece", "rbece", "brier", "nll"]
SETTINGS = CalibrationSettings(from_logits=True, theta=5)  # RBECE counts bins of more than 5 of the 96 rows

try:  # the module's class must be importable by the spawned processes: defined here, not in the test
    import lightning.pytorch as pl
except ImportError:  # pragma: no cover - lightning is a test extra
    pl = None

if pl is not None:

    class Tiny(pl.LightningModule):
        """A linear layer whose validation logs calibkit's metrics, and writes what each process saw."""

        def __init__(self, out: str):
            super().__init__()
            self.out = out
            self.layer = torch.nn.Linear(3, K, dtype=torch.float64)
            self.calibration = CalibrationMetrics(metrics=LOGGED, settings=SETTINGS)
            self.seen = []

        def validation_step(self, batch, _):
            x, y = batch
            logits = self.layer(x)
            self.calibration.update(logits, y)
            self.seen.append((logits.detach().numpy(), y.numpy()))

        def on_validation_epoch_end(self):
            self.log_dict(self.calibration.compute())  # synced: the same values on both processes
            self.calibration.reset()
            z, y = (np.concatenate(part) for part in zip(*self.seen))
            np.savez(f"{self.out}/rank{self.global_rank}.npz", logits=z, labels=y)
            if self.global_rank == 0:
                logged = {k: float(v) for k, v in self.trainer.callback_metrics.items()}
                with open(f"{self.out}/logged.json", "w") as f:
                    json.dump(logged, f)


@pytest.mark.slow  # processes of their own, each importing torch: the default run's time, in .ci/run's slow pass
def test_two_processes_in_a_lightning_trainer_log_the_report_of_all_their_data(tmp_path):
    if pl is None:
        pytest.skip("lightning is not installed")
    rng = np.random.default_rng(4)
    x = torch.from_numpy(rng.normal(size=(N_VAL, 3)))
    y = torch.from_numpy(rng.integers(0, K, N_VAL))
    loader = torch.utils.data.DataLoader(torch.utils.data.TensorDataset(x, y), batch_size=16)
    trainer = pl.Trainer(
        accelerator="cpu",
        devices=2,
        strategy="ddp_spawn",
        logger=False,
        enable_checkpointing=False,
        enable_progress_bar=False,
        enable_model_summary=False,
    )
    trainer.validate(Tiny(str(tmp_path)), loader, verbose=False)
    parts = [np.load(tmp_path / f"rank{r}.npz") for r in (0, 1)]
    z = np.concatenate([p["logits"] for p in parts])
    labels = np.concatenate([p["labels"] for p in parts])
    assert len(labels) == N_VAL  # each process saw its half
    logged = json.loads((tmp_path / "logged.json").read_text())
    expected = calibkit.calibration_report(z, labels, metrics=LOGGED, settings=SETTINGS)
    assert not np.isnan(list(expected.values())).any()
    close(logged, expected)
    assert logged["n"] == N_VAL


def test_multilabel_equals_multilabel_report():
    rng = np.random.default_rng(5)
    p = rng.random((400, 3))
    y = (rng.random((400, 3)) < p**1.5).astype(int)
    metric = CalibrationMetrics(metrics=["ece", "brier", "nll"], multilabel=True)
    metric.update(torch.from_numpy(p[:150]), torch.from_numpy(y[:150]))
    metric.update(torch.from_numpy(p[150:]), torch.from_numpy(y[150:]))
    report = metric.compute()
    expected = calibkit.multilabel_report(p, y, metrics=["ece", "brier", "nll"])
    assert set(report) == set(expected)
    for key, value in expected.items():  # per_label, macro, weighted, micro: dicts of tensors
        if isinstance(value, dict):
            close(report[key], value)
        else:
            close(report, {key: value})


def test_next_token_logits_as_the_accumulator_reads_them():
    rng = np.random.default_rng(6)
    logits, ids = rng.normal(size=(4, 7, 30)), rng.integers(0, 30, size=(4, 7))
    ids[0, :3] = -100  # a prompt left out of the loss
    metric = CalibrationMetrics(metrics=["ece", "nll", "brier"], next_token=True, from_logits=True)
    metric.update(torch.from_numpy(logits[:2]), torch.from_numpy(ids[:2]))
    metric.update(torch.from_numpy(logits[2:]), torch.from_numpy(ids[2:]))
    # position t scored against the label at t + 1, as the model's loss shifts them
    shifted = logits[:, :-1].reshape(-1, 30), ids[:, 1:].reshape(-1)
    expected = calibkit.calibration_report(*shifted, metrics=["ece", "nll", "brier"], from_logits=True)
    assert float(metric.compute()["n"]) == 4 * 6 - 2
    close(metric.compute(), expected)
