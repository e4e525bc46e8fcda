"""CalibrationCallback on bad input (issue 14): settings refused at construction, naming the
argument; ``attach`` refuses what is not a Trainer; and what the end of training says when the
last evaluation's logits were unusable is what happened."""

import warnings

import pytest

from calibkit.callbacks import CalibrationCallback
from tests.callbacks.test_callback import make_trainer


@pytest.mark.parametrize(
    "settings, pattern",
    [
        ({"n_bins": 0}, r"`n_bins` must be an integer"),
        ({"n_bins": "15"}, r"`n_bins` must be an integer"),
        ({"theta": -1}, r"`theta` must be a number >= 0"),
        ({"ignore_index": 2**70}, r"`ignore_index` must fit in int64"),
        ({"ignore_index": "x"}, r"`ignore_index` must be an integer"),
        ({"ace_ranges": 0}, r"`ace_ranges` must be an integer"),
        ({"fce_bins": 1.5}, r"`fce_bins` must be an integer"),
        ({"rbece_bins": 10**7}, r"`rbece_bins` must be an integer in \[1, 1000000\]"),
        ({"esce_bins": -2}, r"`esce_bins` must be an integer"),
        ({"sce_bins": True}, r"`sce_bins` must be an integer"),
        ({"metrics": ["nope"]}, r"`metrics` must be names from"),
        ({"metrics": []}, r"`metrics` must be names from"),
        ({"metrics": "nope"}, r"`metrics` must be names from"),
        ({"metrics": 3}, r"`metrics` must be names from"),
        ({"fit": ["nope"]}, r"`method` must be one of"),
        ({"fit": "nope"}, r"`method` must be one of"),
        ({"max_fit_rows": 0}, r"`max_fit_rows` must be an integer >= 1"),
        ({"per_class": "yes"}, r"`per_class` must be True or False"),
    ],
)
def test_settings_are_refused_at_construction(settings, pattern):
    with pytest.raises(ValueError, match=pattern):
        CalibrationCallback(**settings)


def test_a_string_names_one_metric_or_method():
    """``metrics="ece"`` was read as the letters e, c, e."""
    cb = CalibrationCallback(metrics="ece", fit="ts")
    assert cb.metric_names == ("ece",) and cb.fit_methods == ("ts",)
    assert len(CalibrationCallback(metrics="all").metric_names) > 10


def test_attach_refuses_what_is_not_a_trainer(tmp_path):
    with pytest.raises(ValueError, match=r"`trainer` must be a transformers Trainer, got dict"):
        CalibrationCallback().attach({})
    trainer, cb = make_trainer(tmp_path)
    other, _ = make_trainer(tmp_path / "other")
    assert cb.attach(trainer) is cb  # idempotent
    with pytest.raises(ValueError, match=r"already attached to another Trainer"):
        cb.attach(other)


def test_nan_logits_with_batch_eval_metrics_say_what_happened(tmp_path):
    """The end-of-training warning said "no evaluation with labels ran", which was not what happened."""
    trainer, _ = make_trainer(tmp_path, max_steps=4, batch_eval_metrics=True, compute_metrics=None)

    def poison(module, args, output):
        return output if module.training else output * float("nan")

    trainer.model.classifier.register_forward_hook(poison)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        trainer.train()
    messages = [str(w.message) for w in caught]
    end = [m for m in messages if "no calibrator fitted" in m]
    assert end, messages
    assert "the last evaluation's logits could not be used" in end[0] and "NaN or inf" in end[0]
    assert not any("no evaluation with labels ran" in m for m in messages)


def test_a_nan_evaluation_does_not_fit_on_an_earlier_epochs_logits(tmp_path):
    """A good evaluation, then a NaN one (batch_eval_metrics): the fit must not silently use the
    first evaluation's logits, which came from an earlier state of the model."""
    trainer, cb = make_trainer(tmp_path, max_steps=4, batch_eval_metrics=True, compute_metrics=None)
    calls = {"n": 0}

    def poison_second(module, args, output):
        if module.training:
            return output
        calls["n"] += 1
        return output * float("nan") if calls["n"] > 3 else output  # 3 eval batches of 16: first eval clean

    trainer.model.classifier.register_forward_hook(poison_second)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        trainer.train()
    assert cb.last_predictions is None and not cb.fitted
    assert any("the last evaluation's logits could not be used" in str(w.message) for w in caught)
