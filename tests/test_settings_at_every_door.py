"""One list of settings, every door: each entry point that takes settings as keywords spells out every
field of CalibrationSettings (or says here why it does not), so a setting added to the dataclass and
forgotten at a door fails this test instead of being silently unavailable there. Every door also takes
``settings=``, defaults its keywords to the settings' own defaults (no literal copy anywhere), refuses a
keyword given with ``settings``, and documents each keyword with the dataclass's default."""

import ast
import inspect
import re
from pathlib import Path

import numpy as np
import pytest

import calibkit
from calibkit.callbacks import CalibrationCallback
from calibkit.io.dask import calibration_report as dask_report
from calibkit.io.shards import stream_report
from calibkit.metrics import functional
from calibkit.metrics.accumulator import CalibrationAccumulator
from calibkit.metrics.bootstrap import bootstrap_intervals
from calibkit.metrics.decomposition import score_decomposition
from calibkit.metrics.settings import DEFAULTS, CalibrationSettings, is_unset, names, resolve_settings

try:  # torchmetrics is a test extra
    from calibkit.plugins.torchmetrics import CalibrationMetrics
except ImportError:  # pragma: no cover
    CalibrationMetrics = None

REPO = Path(calibkit.__file__).resolve().parent.parent

ABSTENTION = dict.fromkeys(  # a decision on held answers (calibkit.lm.generations), no metric of these doors
    ("abstention_alpha", "abstention_delta"), "the abstention threshold is computed by the generations report"
)
# door -> the settings it leaves out on purpose, with the reason
DOORS = {
    "calibration_report": (calibkit.calibration_report, ABSTENTION),
    "CalibrationAccumulator": (CalibrationAccumulator, ABSTENTION),
    "bootstrap_intervals": (bootstrap_intervals, ABSTENTION),
    "CalibrationCallback": (CalibrationCallback, {"from_logits": "the Trainer always hands over logits", **ABSTENTION}),
    "stream_report": (stream_report, {"from_logits": "each shard says it by its column name", **ABSTENTION}),
    "dask.calibration_report": (dask_report, ABSTENTION),
}
if CalibrationMetrics is not None:
    DOORS["torchmetrics.CalibrationMetrics"] = (CalibrationMetrics, ABSTENTION)

FUNCTIONAL = {name: getattr(functional, name) for name in functional.__all__ if callable(getattr(functional, name))}
"""The functional API: each function takes the settings it reads, and ``settings=``."""

EVALUATE_EXCUSED = {  # the evaluate scripts' doors leave these out: the configuration says them
    "multilabel": 'the "multilabel" configuration',
    "next_token": 'the "next_token" configuration',
}


def evaluate_scripts() -> dict:
    """Every calibration module script's ``_compute`` (imports ``evaluate``)."""
    pytest.importorskip("evaluate")
    from calibkit.evaluate_modules import MODULE_NAMES
    from calibkit.evaluate_modules.cards import load_script
    from calibkit.evaluate_modules.metric import CalibrationMetric

    out = {}
    for name in MODULE_NAMES:
        script = load_script(name)
        own = [c for c in vars(script).values() if isinstance(c, type) and c.__module__ == script.__name__]
        (metric,) = [c for c in own if issubclass(c, CalibrationMetric)]
        out[name] = (metric._compute, script)
    return out


BOOLS = ("from_logits", "multilabel", "next_token")
OWN_DEFAULTS = {  # (door, keyword) -> the setting whose default it takes, and why
    ("functional.ecd", "n_bins"): ("esce_bins", "the breakdown of the entropic paper's ECD: its 10 bins"),
}


def settings_keywords(door) -> dict[str, inspect.Parameter]:
    """The door's settings keywords, without the old names (``sce(n_bins=None)``: ``sce_bins``)."""
    parameters = inspect.signature(door).parameters
    old = {name for name, p in parameters.items() if p.default is None and name not in BOOLS}  # bools: None is unset
    return {name: p for name, p in parameters.items() if name in names() and name not in old}


def default_of(door: str, keyword: str):
    return getattr(DEFAULTS, OWN_DEFAULTS.get((door, keyword), (keyword,))[0])


def missing_settings(door, setting_names, excused) -> list[str]:
    parameters = inspect.signature(door).parameters
    return [name for name in setting_names if name not in parameters and name not in excused]


@pytest.mark.parametrize("door", sorted(DOORS))
def test_every_setting_is_a_keyword_of_the_door(door):
    function, excused = DOORS[door]
    assert missing_settings(function, names(), excused) == []
    assert set(excused) <= set(names())  # an excuse for a setting that no longer exists is stale


def test_every_setting_is_a_keyword_of_the_calibration_report_module():
    compute, _ = evaluate_scripts()["calibration_report"]
    excused = {
        **EVALUATE_EXCUSED,
        **ABSTENTION,
        "coverage": "the module reports METRICS, without the selective accuracy",
    }
    assert missing_settings(compute, names(), excused) == []


def every_door() -> dict:
    doors = {name: function for name, (function, _) in DOORS.items()}
    doors.update({f"functional.{name}": function for name, function in FUNCTIONAL.items()})
    doors["score_decomposition"] = score_decomposition
    return doors


@pytest.mark.parametrize("door", sorted(every_door()))
def test_the_doors_defaults_are_the_settings_defaults_marked_as_not_given(door):
    """A default equal to the dataclass's, and marked (UNSET, or None for a bool): a conflict with settings= is seen."""
    function = every_door()[door]
    assert "settings" in inspect.signature(function).parameters, f"{door} takes no settings="
    for name, parameter in settings_keywords(function).items():
        assert parameter.default is None or is_unset(parameter.default), f"{door}: {name}={parameter.default!r}"
        if parameter.default is not None:
            assert parameter.default == default_of(door, name), f"{door}: {name}={parameter.default!r}"


def test_the_evaluate_scripts_take_settings_and_the_settings_defaults():
    for name, (compute, _) in evaluate_scripts().items():
        parameters = inspect.signature(compute).parameters
        assert "settings" in parameters, name
        for setting, parameter in parameters.items():
            if setting in names() and parameter.default is not None:  # None: an old name (rbece's n_bins)
                assert is_unset(parameter.default), f"{name}: {setting}={parameter.default!r}"
                assert parameter.default == getattr(DEFAULTS, setting), f"{name}: {setting}"


def test_a_setting_added_to_the_dataclass_and_not_to_a_door_is_seen():
    planted = (*names(), "smoothing_bandwidth")
    assert missing_settings(calibkit.calibration_report, planted, ABSTENTION) == ["smoothing_bandwidth"]


# ------------------------------------------------------------------------------------------
# settings= at every door: the same numbers as the keywords, and never both


P = np.array([[0.9, 0.1], [0.2, 0.8], [0.6, 0.4], [0.3, 0.7], [0.55, 0.45], [0.1, 0.9]])
Y = np.array([0, 1, 1, 1, 0, 0])
CHANGED = {  # a value other than the default for every setting a function may read
    "n_bins": 7,
    "ace_ranges": 3,
    "sce_bins": 4,
    "rbece_bins": 5,
    "theta": 0.0,
    "fce_bins": 6,
    "fce_variant": "authors",
    "esce_bins": 8,
    "eps": 1e-3,
    "coverage": 0.5,
    "ignore_index": -1,
}


def same(a, b) -> bool:
    if isinstance(a, dict):
        return a.keys() == b.keys() and all(same(a[k], b[k]) for k in a)
    if isinstance(a, tuple):
        return len(a) == len(b) and all(same(x, z) for x, z in zip(a, b))
    return bool(np.array_equal(np.asarray(a, dtype=float), np.asarray(b, dtype=float), equal_nan=True))


@pytest.mark.parametrize("name", sorted(set(FUNCTIONAL) - {"multilabel_report"}))
def test_a_function_given_settings_computes_as_given_the_keywords(name):
    function = FUNCTIONAL[name]
    own = {k: v for k, v in CHANGED.items() if k in settings_keywords(function)}
    with np.errstate(all="ignore"):
        by_keywords = function(P, Y, **own)
        by_settings = function(P, Y, settings=CalibrationSettings(**own))
    assert same(by_keywords, by_settings)


def test_multilabel_report_given_settings_computes_as_given_the_keywords():
    p, y = np.array([[0.9, 0.2], [0.8, 0.6], [0.3, 0.1], [0.6, 0.7]]), np.array([[1, 0], [1, 1], [0, 0], [0, 1]])
    by_keywords = calibkit.multilabel_report(p, y, metrics=["ece", "brier"], n_bins=4)
    by_settings = calibkit.multilabel_report(p, y, metrics=["ece", "brier"], settings=CalibrationSettings(n_bins=4))
    assert same(by_keywords, by_settings)


def door_call(door: str, tmp_path):
    """The door, its first settings keyword, a value other than the default, and its positional arguments."""
    function = every_door()[door]
    keyword = next(name for name in ("n_bins", "ignore_index", "eps") if name in settings_keywords(function))
    args = {
        "CalibrationAccumulator": (),
        "CalibrationCallback": (),
        "torchmetrics.CalibrationMetrics": (),
        "stream_report": (str(tmp_path),),
        "dask.calibration_report": (str(tmp_path),),
    }.get(door, (P, Y))
    return function, keyword, CHANGED[keyword], args


@pytest.mark.parametrize("door", sorted(every_door()))
def test_a_keyword_given_with_settings_is_refused_naming_both(door, tmp_path):
    function, keyword, value, args = door_call(door, tmp_path)
    both = rf"`{keyword}={value!r}` and `settings\.{keyword}="
    with pytest.raises(ValueError, match=both):
        function(*args, settings=CalibrationSettings(), **{keyword: value})


@pytest.mark.parametrize("door", sorted(every_door()))
@pytest.mark.parametrize("value", ["changed", "default"])
def test_a_keyword_given_with_settings_of_the_same_value_is_refused_too(door, value, tmp_path):
    """Every door says "not both": a keyword given with ``settings`` is refused, whether the two agree or not."""
    function, keyword, changed, args = door_call(door, tmp_path)
    given = changed if value == "changed" else default_of(door, keyword)
    agreeing = CalibrationSettings(**{keyword: given})
    with pytest.raises(ValueError, match=rf"`{keyword}={given!r}` and `settings\.{keyword}={given!r}`"):
        function(*args, settings=agreeing, **{keyword: given})


def test_a_keyword_equal_to_the_default_given_with_settings_is_refused_too():
    with pytest.raises(ValueError, match=r"`n_bins=15` and `settings\.n_bins=7`"):
        calibkit.ece(P, Y, n_bins=15, settings=CalibrationSettings(n_bins=7))
    with pytest.raises(ValueError, match=r"`from_logits=False` and `settings\.from_logits=True`"):
        calibkit.brier(P, Y, from_logits=False, settings=CalibrationSettings(from_logits=True))


def test_resolve_settings_is_the_one_place():
    assert resolve_settings() == DEFAULTS
    assert resolve_settings(n_bins=7).n_bins == 7
    with pytest.raises(ValueError, match="unknown settings"):
        resolve_settings(n_bin=7)
    with pytest.raises(ValueError, match="`settings` must be a CalibrationSettings"):
        resolve_settings({"n_bins": 7})
    with pytest.raises(ValueError, match="`theta`"):
        calibkit.rbece(P, Y, theta=-1)  # the dataclass's check, at a door that builds no settings itself


def test_the_streaming_doors_take_settings(tmp_path):
    p = np.array([[1.0, 0.0], [0.6, 0.4], [0.2, 0.8]])
    y = np.array([1, 0, 1])
    np.savez(tmp_path / "a.npz", probs=p, labels=y)
    settings = CalibrationSettings(n_bins=4, eps=1e-3)
    streamed = stream_report(tmp_path, metrics=["nll", "ece"], settings=settings, progress=False)
    assert streamed["nll"] == pytest.approx(calibkit.nll(p, y, eps=1e-3), rel=1e-12)
    assert streamed["ece"] == pytest.approx(calibkit.ece(p, y, n_bins=4), rel=1e-12)
    da = pytest.importorskip("dask.array")
    reported = dask_report(da.from_array(p, chunks=2), da.from_array(y, chunks=2), metrics=["ece"], settings=settings)
    assert reported["ece"] == pytest.approx(calibkit.ece(p, y, n_bins=4), rel=1e-12)


def test_the_streaming_doors_take_eps(tmp_path):
    """eps (the clip of NLL and ECD's logs) was missing at the shards and Dask doors."""
    p = np.array([[1.0, 0.0], [0.6, 0.4], [0.2, 0.8]])
    y = np.array([1, 0, 1])
    np.savez(tmp_path / "a.npz", probs=p, labels=y)
    for eps in (1e-12, 1e-3):
        streamed = stream_report(tmp_path, metrics=["nll"], eps=eps, progress=False)["nll"]
        assert streamed == pytest.approx(calibkit.nll(p, y, eps=eps), rel=1e-12)
    assert calibkit.nll(p, y, eps=1e-3) != calibkit.nll(p, y, eps=1e-12)


def test_the_callback_takes_settings():
    callback = CalibrationCallback(metrics=("ece",), fit=(), settings=CalibrationSettings(n_bins=9))
    assert callback.settings.n_bins == 9 and callback.settings.from_logits


# ------------------------------------------------------------------------------------------
# No literal copy of a default: the dataclass holds them


def literal_setting_defaults(path: Path, root: Path = REPO) -> list[str]:
    """``name=<literal>`` defaults of parameters named as a setting, in the functions of ``path``."""
    found = []
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if not isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda)):
            continue
        positional = node.args.posonlyargs + node.args.args
        pairs = list(zip(positional[len(positional) - len(node.args.defaults) :], node.args.defaults))
        pairs += [(a, d) for a, d in zip(node.args.kwonlyargs, node.args.kw_defaults) if d is not None]
        for argument, default in pairs:
            literal = isinstance(default, ast.UnaryOp) or (
                isinstance(default, ast.Constant) and default.value is not None
            )
            if argument.arg in names() and literal:
                found.append(f"{path.relative_to(root)}:{default.lineno} {argument.arg}={ast.unparse(default)}")
    return found


def test_no_literal_default_of_a_setting_outside_the_settings_module():
    files = [*sorted((REPO / "calibkit").rglob("*.py")), *sorted((REPO / "metrics").glob("*/*.py"))]
    assert len(files) > 100
    skipped = {"calibkit/metrics/settings.py"}
    found = [hit for f in files if f.relative_to(REPO).as_posix() not in skipped for hit in literal_setting_defaults(f)]
    assert found == []


def test_the_literal_scan_sees_a_literal_default(tmp_path):
    planted = tmp_path / "planted.py"
    planted.write_text("def f(p, *, n_bins: int = 15, theta=DEFAULTS.theta, eps=None):\n    pass\n")
    assert literal_setting_defaults(planted, tmp_path) == ["planted.py:1 n_bins=15"]


# ------------------------------------------------------------------------------------------
# The documentation of each keyword, checked against the one list


def parameters_section(doc: str) -> str:
    return re.split(r"\n(?:Returns|Yields|Raises|Examples|Notes)\n-+\n", doc.split("Parameters\n", 1)[1])[0]


def documented_defaults(section: str) -> dict[str, str]:
    """``name : type, default X`` entries of a numpydoc Parameters section."""
    return dict(re.findall(r"^(\w+) : [^\n]*?default (\S+?)\s*$", section, re.M))


def documented_names(section: str) -> set[str]:
    heads = re.findall(r"^(\w[\w, *]*?)(?: :|$)", section, re.M)
    return {name.strip() for head in heads for name in head.split(",")}


def python_default(text: str):
    return {"False": False, "True": True}.get(text, text.strip('"'))


@pytest.mark.parametrize("door", sorted(every_door()))
def test_each_settings_keyword_is_documented_with_the_settings_default(door):
    function = every_door()[door]
    doc = inspect.getdoc(function.__init__ if inspect.isclass(function) else function)
    if inspect.isclass(function) and "Parameters\n" not in doc:
        doc = inspect.getdoc(function)
    section = parameters_section(doc)
    keywords = list(settings_keywords(function))
    undocumented = [n for n in (*keywords, "settings") if n not in documented_names(section)]
    assert undocumented == [], door
    for name, text in documented_defaults(section).items():
        if name in keywords:
            want = default_of(door, name)
            got = python_default(text.rstrip(".,"))
            assert str(got) == str(want) or float(got) == float(want), f"{door}: {name} documented default {text}"


def test_each_evaluate_keyword_is_documented_with_the_settings_default():
    from calibkit.evaluate_modules import ARGS_DOC

    for name, (compute, script) in evaluate_scripts().items():
        text = script._KWARGS_DESCRIPTION
        assert text.startswith(ARGS_DOC), name
        keywords = [*settings_keywords(compute), "settings"]
        documented = dict(re.findall(r"^    (\w+) \((?:`[^`]+`|deprecated)(?:, defaults to `?([^`)]+)`?)?", text, re.M))
        assert [k for k in keywords if k not in documented] == [], name
        for key, default in documented.items():
            if key in names() and default and key in keywords:
                want = getattr(DEFAULTS, key)
                assert str(python_default(default)) == str(want) or float(default) == float(want), (name, key)


# ------------------------------------------------------------------------------------------
# Library errors name Python arguments; the command line names its options


def test_the_readers_errors_name_the_python_argument(tmp_path):
    from calibkit.io.prediction_files import for_option, load_predictions

    with pytest.raises(ValueError, match=r"^`location`: no such file, folder or glob match") as shards:
        stream_report(str(tmp_path / "gone"), progress=False)
    with pytest.raises(ValueError, match=r"^`path`: no such file") as file:
        load_predictions(tmp_path / "gone.npz")
    for error in (shards.value, file.value):
        assert "--" not in str(error)
        assert for_option(str(error), "--predictions").startswith("--predictions: ")
    assert for_option("`probs` has NaN", "--predictions") == "`probs` has NaN"  # another argument: left as is


def test_the_command_line_names_its_option(tmp_path, capsys):
    from calibkit.cli import main

    assert main(["report", "--predictions", str(tmp_path / "gone.npz"), "--quiet"]) == 2
    err = capsys.readouterr().err
    assert "--predictions: " in err and "`path`" not in err and "`location`" not in err, err


def test_score_decomposition_reads_next_token_as_the_other_doors():
    rng = np.random.default_rng(0)
    logits, labels = rng.normal(size=(3, 5, 4)), rng.integers(0, 4, size=(3, 5))
    labels[0, 3:] = -100
    shifted = score_decomposition(logits[:, :-1].reshape(-1, 4), labels[:, 1:].reshape(-1), from_logits=True)
    settings = CalibrationSettings(from_logits=True, next_token=True)
    assert same(score_decomposition(logits, labels, settings=settings), shifted)
