"""
calibkit's metrics logged from a LightningModule
================================================

``calibkit.plugins.torchmetrics.CalibrationMetrics`` is a ``torchmetrics.Metric`` whose state
is the per-bin sums of :class:`calibkit.CalibrationAccumulator`: a ``LightningModule`` updates it
in ``validation_step`` and logs its ``compute()`` with ``self.log_dict``, and under DDP each
process's sync moves those sums (a few kilobytes), not every row as torchmetrics'
``CalibrationError`` does. This example fits a small classifier for a few epochs on CPU, logs
calibkit's metrics at each validation, and checks that the last logged values equal
:func:`calibkit.calibration_report` on the validation logits.
"""

# %%
# A classifier that becomes over-confident
# ----------------------------------------
# Synthetic 4-class data with overlapping classes, and a linear model on only 64 training rows
# of 32 features: it overfits, its validation accuracy stays flat while its logits keep growing,
# the usual road to over-confidence. The metric takes calibkit's settings as every door does
# (here logits, and 10 bins).
import logging
import warnings

import lightning.pytorch as pl
import matplotlib.pyplot as plt
import numpy as np
import torch

import calibkit
from calibkit.plugins.torchmetrics import CalibrationMetrics

logging.getLogger("lightning.pytorch").setLevel(logging.ERROR)  # no banner in the page
warnings.filterwarnings("ignore", ".*does not have many workers.*")
warnings.filterwarnings("ignore", ".*treespec.*")  # Lightning 2.6 under a newer torch
pl.seed_everything(0, verbose=False)

k = 4
centres = torch.randn(k, 32) * 0.3


def data(n: int, seed: int) -> torch.utils.data.TensorDataset:
    gen = torch.Generator().manual_seed(seed)
    y = torch.randint(0, k, (n,), generator=gen)
    return torch.utils.data.TensorDataset(centres[y] + torch.randn(n, 32, generator=gen), y)


train, val = data(64, 1), data(2_000, 2)
METRICS = ["ece", "cece", "rbece", "fce", "brier", "nll"]


class Classifier(pl.LightningModule):
    def __init__(self):
        super().__init__()
        self.layer = torch.nn.Linear(32, k)
        self.calibration = CalibrationMetrics(metrics=METRICS, from_logits=True, n_bins=10)
        self.history = []

    def training_step(self, batch, _):
        x, y = batch
        return torch.nn.functional.cross_entropy(self.layer(x), y)

    def validation_step(self, batch, _):
        x, y = batch
        self.calibration.update(self.layer(x), y)  # adds the batch's per-bin sums

    def on_validation_epoch_end(self):
        report = self.calibration.compute()  # synced across processes under DDP
        self.log_dict({f"val_{name}": value for name, value in report.items()})
        self.sync_bytes = self.calibration.sums.nbytes  # what each process's sync moved
        self.calibration.reset()
        self.history.append({name: float(value) for name, value in report.items()})

    def configure_optimizers(self):
        return torch.optim.SGD(self.parameters(), lr=2.0)


model = Classifier()
trainer = pl.Trainer(
    accelerator="cpu",
    devices=1,
    max_epochs=20,
    logger=False,
    enable_checkpointing=False,
    enable_progress_bar=False,
    enable_model_summary=False,
    num_sanity_val_steps=0,
)
loader = torch.utils.data.DataLoader
trainer.fit(model, loader(train, batch_size=16, shuffle=True), loader(val, batch_size=256))

# %%
# What Lightning logged
# ---------------------
# ``trainer.callback_metrics`` holds the last validation's values, as float64 tensors (Lightning
# keeps their precision). They equal :func:`calibkit.calibration_report` on the validation
# logits, computed here in one pass over all of them.
logged = {name: float(value) for name, value in trainer.callback_metrics.items()}
with torch.no_grad():
    logits = model.layer(val.tensors[0]).double().numpy()
expected = calibkit.calibration_report(logits, val.tensors[1].numpy(), metrics=METRICS, from_logits=True, n_bins=10)
for name in METRICS:
    print(f"val_{name:6} logged {logged[f'val_{name}']:.6f}   calibration_report {expected[name]:.6f}")
assert all(abs(logged[f"val_{name}"] - expected[name]) < 1e-6 for name in METRICS)
print(f"state synced under DDP: {model.sync_bytes:,} bytes, for {len(val):,} validation rows")

# %%
# The metrics epoch by epoch
# --------------------------
# The validation accuracy stays flat from the first epoch while the model keeps fitting its 64
# training rows: NLL and every calibration error rise together, the over-confidence that
# temperature scaling would undo (:class:`calibkit.calibrators.TemperatureScaling`).
epochs = np.arange(1, len(model.history) + 1)
fig, (left, right) = plt.subplots(1, 2, figsize=(9, 3.4))
for name in ("ece", "cece", "rbece", "fce"):
    left.plot(epochs, [h[name] for h in model.history], marker="o", label=name.upper())
left.set(xlabel="epoch", ylabel="calibration error", title="logged calibration errors")
left.legend()
right.plot(epochs, [h["nll"] for h in model.history], marker="o", label="NLL")
right.plot(epochs, [h["accuracy"] for h in model.history], marker="o", label="accuracy")
right.set(xlabel="epoch", title="NLL and accuracy")
right.legend()
fig.tight_layout()
plt.show()
for epoch, h in zip(epochs, model.history):
    print(f"epoch {epoch}: ECE {h['ece']:.4f}  NLL {h['nll']:.4f}  accuracy {h['accuracy']:.4f}")
