"""calibkit's `evaluate` modules: loading, equality with the functional core, batches, errors, doctests."""

import doctest
import math
import re
import sys

import numpy as np
import pytest

import calibkit
from calibkit.evaluate_modules import CORE_METRICS, MODULE_NAMES, SET_MODULE_NAMES, evaluate_module_path, modules_root

EVERY_FOLDER = (*MODULE_NAMES, *SET_MODULE_NAMES)  # the calibration modules and those reading prediction sets

SETTINGS = {  # a non-default value of every setting, to check that each is passed on to the core
    "ece": {"n_bins": 7},
    "ece_l2": {"n_bins": 6},
    "ace": {"ace_ranges": 6},
    "sce": {"sce_bins": 9},
    "cece": {"n_bins": 8},
    "rbece": {"rbece_bins": 10, "theta": 3},
    "fce": {"fce_bins": 11, "fce_variant": "authors"},
    "overconfidence": {},
    "ecd": {"eps": 1e-6},
    "esce": {"esce_bins": 12},
    "brier": {},
    "nll": {"eps": 1e-6},
    "selective": {"coverage": 0.55},
    "smece": {},
    "score_decomposition": {"score": "log"},
    "calibration_report": {"n_bins": 7, "ace_ranges": 6, "sce_bins": 9, "theta": 3, "fce_bins": 11, "esce_bins": 12},
}


def expected(name, probs, labels, **kwargs):
    """What the functional core says, in the module's output format."""
    if name == "ece":
        return {"ece": calibkit.ece(probs, labels, **kwargs), "mce": calibkit.mce(probs, labels, **kwargs)}
    if name == "ece_l2":
        return {key: getattr(calibkit, key)(probs, labels, **kwargs) for key in ("ece_l2", "ece_l2_debiased")}
    if name == "cece":
        out = {
            key: getattr(calibkit, key)(probs, labels, **kwargs) for key in ("cece", "msece", "wsece", "ece_variance")
        }
        return {**out, "per_class_ece": calibkit.subset_ece(probs, labels, **kwargs)}
    if name == "selective":
        others = {k: v for k, v in kwargs.items() if k != "coverage"}  # AURC has no coverage
        return {
            "aurc": calibkit.aurc(probs, labels, **others),
            "selective_accuracy": calibkit.selective_accuracy(probs, labels, **kwargs),
        }
    if name == "smece":
        value, sigma = calibkit.smece(probs, labels, return_bandwidth=True, **kwargs)
        return {"smece": value, "smece_bandwidth": sigma}
    if name == "score_decomposition":
        return calibkit.score_decomposition(probs, labels, **kwargs)["top_label"]
    if name == "calibration_report":
        return calibkit.calibration_report(probs, labels, **kwargs)
    return {name: getattr(calibkit, name)(probs, labels, **kwargs)}


def assert_same(result, reference, tol=1e-9):
    assert list(result) == list(reference)
    for key, value in reference.items():
        got = np.asarray(result[key], dtype=float)
        want = np.asarray(value, dtype=float)
        assert got.shape == want.shape, key
        assert np.allclose(got, want, rtol=0, atol=tol, equal_nan=True), (key, got, want)


# ------------------------------------------------------------------------------------------
# Folders


@pytest.mark.parametrize("name", EVERY_FOLDER)
def test_folder_has_script_card_app_and_requirements(name):
    folder = modules_root() / name
    card = (folder / "README.md").read_text()
    front = re.match(r"---\n(.*?)\n---\n", card, re.S).group(1)
    for field in ("title:", "sdk: gradio", "app_file: app.py", "tags:"):
        assert field in front, field
    sections = re.findall(r"^## (.+)$", card, re.M)
    required = ["Metric Description", "How to Use", "Inputs", "Output Values", "Examples", "Limitations and Bias"]
    assert sections[: len(required) + 1] == [*required, "Citation"]
    assert "launch_gradio_widget" in (folder / "app.py").read_text()
    assert "calibkit" in (folder / "requirements.txt").read_text()
    script = (folder / f"{name}.py").read_text()
    for constant in ("_DESCRIPTION", "_KWARGS_DESCRIPTION", "_CITATION"):
        assert f"\n{constant} = " in script
    assert "**kwargs" not in script


def test_every_core_metric_has_a_module_and_every_module_a_folder():
    covered = {metric for metrics in CORE_METRICS.values() for metric in metrics}
    assert set(calibkit.METRICS) <= covered
    assert set(CORE_METRICS) | {"calibration_report"} == set(MODULE_NAMES)
    assert sorted(p.name for p in modules_root().iterdir() if p.is_dir() and p.name != "__pycache__") == sorted(
        EVERY_FOLDER
    )


def test_generated_files_are_up_to_date(modules_cache):
    from calibkit.evaluate_modules import cards

    for name in EVERY_FOLDER:
        for filename, text in cards.render(name).items():
            on_disk = (modules_root() / name / filename).read_text(encoding="utf-8")
            assert on_disk == text, f"{name}/{filename} is stale: python -m calibkit.evaluate_modules.cards"


def test_evaluate_sees_the_calibkit_import():
    from evaluate.loading import get_imports

    for name in EVERY_FOLDER:
        libraries = {imp[1] for imp in get_imports(evaluate_module_path(name)) if imp[0] == "library"}
        assert libraries == {"evaluate", "calibkit"}, name


def test_missing_dependency_fails_at_load_with_evaluates_message(modules_cache, monkeypatch):
    import evaluate

    path = evaluate_module_path("cece")
    monkeypatch.setitem(sys.modules, "calibkit", None)  # as if calibkit were not installed
    with pytest.raises(ImportError, match=r"you need to install the following dependencies\['calibkit'\]"):
        evaluate.load(path)


# ------------------------------------------------------------------------------------------
# Loading and computing


@pytest.mark.parametrize("name", MODULE_NAMES)
def test_load_by_path_bare_name_and_namespace(load, name, data):
    import evaluate

    probs, labels = data(0, "multiclass", n=120)
    by_path = evaluate.load(str(modules_root() / name))
    results = [
        m.compute(predictions=probs, references=labels, **SETTINGS[name])
        for m in (by_path, load(name), load(f"calibkit/{name}"))
    ]
    assert {type(m).__name__ for m in (by_path, load(name), load(f"calibkit/{name}"))} == {type(by_path).__name__}
    for result in results[1:]:
        assert_same(result, results[0], tol=0)


@pytest.mark.parametrize("kind", ["multiclass", "binary", "logits"])
@pytest.mark.parametrize("name", MODULE_NAMES)
def test_compute_equals_functional_core(load, data, name, kind):
    from_logits = kind == "logits"
    probs, labels = data(1, "multiclass" if from_logits else kind, n=300, from_logits=from_logits)
    settings = {**SETTINGS[name], "from_logits": from_logits}
    result = load(name).compute(predictions=probs, references=labels, **settings)
    assert_same(result, expected(name, probs, labels, **settings))


@pytest.mark.parametrize("name", MODULE_NAMES)
def test_token_configuration_equals_functional_core(load, data, name):
    logits, labels = data(2, "token", n=40, length=9, from_logits=True)  # -100 on padded labels and logits
    want = expected(name, logits, labels, from_logits=True, **SETTINGS[name])
    metric = load(name, "token")
    assert_same(metric.compute(predictions=logits, references=labels, from_logits=True, **SETTINGS[name]), want)
    # Per-sequence lists of different lengths, padding cut off, as a custom loop would give them.
    lengths = [int(np.flatnonzero(row != -100).max() + 1) if (row != -100).any() else 0 for row in labels]
    seq_logits = [z[:n].tolist() for z, n in zip(logits, lengths)]
    seq_labels = [y[:n].tolist() for y, n in zip(labels, lengths)]
    assert_same(metric.compute(predictions=seq_logits, references=seq_labels, from_logits=True, **SETTINGS[name]), want)


@pytest.mark.parametrize("name", MODULE_NAMES)
def test_add_batch_over_uneven_batches_equals_one_compute(load, data, name):
    probs, labels = data(3, "multiclass", n=257)
    metric = load(name)
    whole = metric.compute(predictions=probs, references=labels, **SETTINGS[name])
    edges = [0, 1, 8, 8, 100, 201, 257]  # includes an empty batch
    for start, stop in zip(edges[:-1], edges[1:]):
        metric.add_batch(predictions=probs[start:stop], references=labels[start:stop])
    assert len(metric) == 257
    assert_same(metric.compute(**SETTINGS[name]), whole, tol=1e-12)
    assert len(metric) == 0  # compute() consumes the batches, as evaluate does


def test_add_then_compute_with_more_data_and_token_add(load, data):
    probs, labels = data(4, "multiclass", n=30)
    metric = load("ece")
    for p, y in zip(probs[:3], labels[:3]):
        metric.add(prediction=p, reference=y)
    assert_same(metric.compute(predictions=probs[3:], references=labels[3:]), expected("ece", probs, labels))
    logits, token_labels = data(5, "token", n=5, from_logits=True)
    token = load("ece", "token")
    for z, y in zip(logits, token_labels):
        token.add(prediction=z, reference=y)  # one sequence
    assert_same(token.compute(from_logits=True), expected("ece", logits, token_labels, from_logits=True))


def test_combine_compute_and_add_batch(load, data):
    import evaluate

    probs, labels = data(6, "multiclass", n=200)
    combined = evaluate.combine([load("ece"), load("cece"), load("brier")])
    want = {**expected("ece", probs, labels), **expected("cece", probs, labels), **expected("brier", probs, labels)}
    assert_same(combined.compute(predictions=probs, references=labels), want)
    for start in range(0, 200, 64):
        combined.add_batch(predictions=probs[start : start + 64], references=labels[start : start + 64])
    assert_same(combined.compute(), want)


def test_widget_input_types_and_json_lists(load):
    from evaluate.utils.gradio import infer_gradio_input_types

    metric = load("ece")
    assert infer_gradio_input_types(metric.features[0].values()) == ["json", "number"]
    result = metric.compute(predictions=[[0.9, 0.1], [0.2, 0.8]], references=[0, 0])
    assert math.isclose(result["ece"], calibkit.ece([[0.9, 0.1], [0.2, 0.8]], [0, 0]))


@pytest.mark.parametrize("name", MODULE_NAMES)
def test_doctest_examples(load, name):
    script = sys.modules[type(load(name)).__module__]
    result = doctest.testmod(script, optionflags=doctest.ELLIPSIS)
    assert result.attempted >= 8 and result.failed == 0


# ------------------------------------------------------------------------------------------
# Bad input


GOOD = [[0.9, 0.1], [0.2, 0.8], [0.6, 0.4]]


@pytest.mark.parametrize(
    ("predictions", "references", "message"),
    [
        (GOOD, [0, 1], r"Mismatch in the number of predictions \(3\) and references \(2\)"),
        ([[0.9, 0.1], [np.nan, 0.5], [0.6, 0.4]], [0, 1, 1], r"`predictions` contains NaN or inf at position 1"),
        (GOOD, [0, 2, 1], r"`references` must lie in \[0, 2\) or equal ignore_index=-100; got 2 at position 1"),
        ([[0.9, 0.9], [0.2, 0.8], [0.6, 0.4]], [0, 1, 1], r"`predictions` rows must sum to 1.*from_logits=True"),
        ([[[0.5, 0.5]] * 2] * 3, [[0, 1]] * 3, r"look like token classification.*evaluate.load\(\"cece\", \"token\"\)"),
        (GOOD, [[0], [1], [1]], r"look like token classification"),
        ([[0.5] * 2] * 3, [0.5, 1, 1], r"`references` must be integers, got the value 0.5"),
    ],
)
def test_bad_input_raises_a_clear_value_error(load, predictions, references, message):
    with pytest.raises(ValueError, match=message):
        load("cece").compute(predictions=predictions, references=references)


def test_bad_token_input_and_state_errors(load):
    import evaluate

    token = load("cece", "token")
    with pytest.raises(ValueError, match=r"token configuration needs predictions \(sequences, tokens, classes\)"):
        token.compute(predictions=np.full((2, 3, 2), 0.5), references=np.zeros((2, 4), dtype=int))
    with pytest.raises(ValueError, match=r"`predictions` sequence 1 has shape \(2, 2\) but `references` sequence 1"):
        token.compute(predictions=[[[0.5, 0.5]], [[0.5, 0.5], [0.5, 0.5]]], references=[[0], [0]])
    metric = load("cece")
    metric.add_batch(predictions=GOOD, references=[0, 1, 1])
    with pytest.raises(ValueError, match=r"rows have shape \(3,\) in this batch but \(2,\) in earlier ones"):
        metric.add_batch(predictions=[[0.2, 0.3, 0.5]], references=[2])
    with pytest.raises(ValueError, match=r"Bad inputs for evaluation module: \['labels'\]"):
        metric.add_batch(predictions=GOOD, references=[0, 1, 1], labels=[0])
    with pytest.raises(ValueError, match=r"inputs are missing: \['references'\]"):
        metric.compute(predictions=GOOD)
    metric.compute()
    with pytest.raises(ValueError, match="Nothing to compute"):
        metric.compute()
    with pytest.raises(TypeError):
        metric.compute(predictions=GOOD, references=[0, 1, 1], n_bin=3)  # a misspelt setting is not ignored
    with pytest.raises(ValueError, match="`n_bins` must be an integer >= 1"):
        metric.compute(predictions=GOOD, references=[0, 1, 1], n_bins=0)
    with pytest.raises(
        ValueError, match=r"`config_name` must be one of \['default', 'token', 'multilabel', 'next_token'\]"
    ):
        evaluate.load(evaluate_module_path("cece"), "tokens")


@pytest.mark.parametrize("name", EVERY_FOLDER)
def test_card_links_resolve_inside_the_folder_pushed_to_the_hub(name):
    # A Space is the module folder alone: a relative link must name a file of that folder.
    folder = modules_root() / name
    links = re.findall(r"\]\(([^)]+)\)", (folder / "README.md").read_text())
    relative = [link for link in links if "://" not in link and not link.startswith("#")]
    assert "SPEC.md" in relative
    for link in relative:
        assert (folder / link.split("#")[0]).is_file(), link
    assert (folder / "SPEC.md").read_text() == (modules_root().parent / "SPEC.md").read_text()


@pytest.mark.parametrize("name", ["ece", "nll", "cece", "calibration_report"])
def test_next_token_configuration_equals_the_report_with_next_token(load, name):
    rng = np.random.default_rng(6)
    z = rng.normal(size=(5, 9, 7)) * 2
    y = rng.integers(0, 7, size=(5, 9))
    y[0, :4] = -100  # a prompt
    metric = load(name, "next_token")
    metric.add_batch(predictions=z[:2], references=y[:2])  # arrays, as the Trainer gives them
    metric.add_batch(predictions=list(z[2:4, :6]), references=list(y[2:4, :6]))  # sequences of their own length
    got = metric.compute(predictions=z[4:], references=y[4:], from_logits=True)
    cut = y.copy()
    cut[2:4, 6:] = -100  # what the per-sequence lists leave out
    want = calibkit.calibration_report(z, cut, from_logits=True, next_token=True)
    keys = ("ece", "nll", "cece", "n") if name == "calibration_report" else (name,)
    for key in keys:
        assert got[key] == pytest.approx(want[key], rel=1e-12), key
    unshifted = load(name, "token").compute(predictions=z, references=cut, from_logits=True)
    assert unshifted[keys[0]] != pytest.approx(want[keys[0]])  # the configuration is what shifts


@pytest.mark.parametrize("name", [n for n in MODULE_NAMES if n != "score_decomposition"])  # no next_token there
def test_next_token_configuration_is_the_functions_vocabulary_reading(load, name):
    """Issue 55: every module's next-token numbers are the functions' with next_token=True, SCE and ACE
    averaged over the tokens that occur and ACE out of the default report (SPEC.md); the configuration
    divided by V and reported ACE (SCE 0.2453 where the function says 0.2600)."""
    rng = np.random.default_rng(0)
    z = rng.normal(size=(4, 7, 6)) * 2
    y = rng.integers(0, 5, size=(4, 7))  # token 5 never occurs as a label
    y[:, :2] = -100  # a two-token prompt
    metric = load(name, "next_token")
    metric.add_batch(predictions=z[:3], references=y[:3])
    got = metric.compute(predictions=z[3:], references=y[3:], from_logits=True)
    assert_same(got, expected(name, z, y, from_logits=True, next_token=True), tol=1e-12)
    if name == "calibration_report":
        assert "ace" not in got  # asked for by name only (the ace module)
    if "sce" in got:  # the data tell the readings apart: over all V classes SCE is another number
        shifted = np.c_[y[:, 1:], np.full((4, 1), -100)].reshape(-1)
        assert got["sce"] != pytest.approx(calibkit.sce(z.reshape(-1, 6), shifted, from_logits=True), rel=1e-3)


@pytest.mark.parametrize("name", MODULE_NAMES)
def test_multilabel_configuration_equals_the_multilabel_report(load, name):
    from calibkit.metrics.multilabel import LABEL_METRICS

    rng = np.random.default_rng(5)
    z = rng.normal(size=(200, 4)) * 2
    y = (rng.uniform(size=(200, 4)) < 0.35).astype(np.float32)  # multi-hot floats, as BCEWithLogitsLoss takes them
    metric = load(name, "multilabel")
    own = [m for m in CORE_METRICS.get(name, ()) if m in LABEL_METRICS]
    summaries = [m for m in CORE_METRICS.get(name, ()) if m in CORE_METRICS["cece"] and m != "subset_ece"]
    if name != "calibration_report" and not own and not summaries:
        with pytest.raises(ValueError, match=f"the {name} module has no multilabel configuration"):
            metric.compute(predictions=z, references=y, from_logits=True)
        return
    metric.add_batch(predictions=z[:120], references=y[:120])
    got = metric.compute(predictions=z[120:], references=y[120:], from_logits=True)
    want = calibkit.multilabel_report(z, y, from_logits=True)
    if name == "calibration_report":
        assert set(got) == set(want)
        for avg in ("macro", "weighted", "micro"):
            assert got[avg] == pytest.approx(want[avg], rel=1e-12, nan_ok=True)
        assert got["support"] == want["support"].tolist()
        return
    for m in own:
        np.testing.assert_allclose(got[f"{m}_per_label"], want["per_label"][m], rtol=1e-12)
        assert got[f"{m}_macro"] == pytest.approx(want["macro"][m], rel=1e-12, nan_ok=True)
        assert got[f"{m}_micro"] == pytest.approx(want["micro"][m], rel=1e-12, nan_ok=True)
    for m in summaries:
        assert got[m] == pytest.approx(want[m], rel=1e-12)
    with pytest.raises(ValueError, match="the multilabel configuration needs both"):
        metric.compute(predictions=z, references=y[:, 0])
