"""One carrier for the sampling settings (calibkit.metrics.sampling): one name each, one check each,
``sampling=`` or the keywords at every door, the command line's flags generated from the dataclass, and no
literal copy of a sampling default anywhere in the package (the scan below)."""

import ast
import inspect
import warnings
from pathlib import Path

import numpy as np
import pytest

import calibkit
from calibkit.metrics.sampling import (
    OFF,
    SAMPLING_DEFAULTS,
    SAMPLING_UNSET,
    SamplingSettings,
    resolve_sampling,
    sampling_names,
)
from calibkit.metrics.settings import is_unset

REPO = Path(calibkit.__file__).resolve().parent.parent

OLD_NAMES = {"n_boot": "bootstrap", "band": "bootstrap", "confidence": "level"}
"""Old keyword names (a literal default of these is a copy too; ``confidence`` as an array has none)."""

CONSTANTS = ("Z95", "BOOTSTRAP", "BAND_DRAWS", "RIGHT")
"""Module constants that restate a sampling default (each must be computed from the carrier)."""

ALLOWED: dict[str, str] = {}
"""``path:line name=value`` -> why the literal stays (shrinks to empty as the doors move; empty now)."""


def _literal(node: ast.AST) -> bool:
    if isinstance(node, ast.UnaryOp):
        return _literal(node.operand)
    return isinstance(node, ast.Constant) and isinstance(node.value, (int, float)) and not isinstance(node.value, bool)


def literal_sampling_defaults(path: Path, root: Path = REPO) -> list[str]:
    """Literal copies of a sampling default in ``path``.

    - a parameter named as a sampling setting (or an old name) with a literal default;
    - a call's keyword named as one, given a literal equal to the carrier's default (``band=1000``,
      ``seed=0``: the default written again), and an argparse ``default=`` of a sampling flag;
    - a module constant of :data:`CONSTANTS` set to a literal.
    """
    names = (*sampling_names(), *OLD_NAMES)
    defaults = {name: getattr(SAMPLING_DEFAULTS, name) for name in sampling_names()}
    defaults.update({old: getattr(SAMPLING_DEFAULTS, new) for old, new in OLD_NAMES.items()})
    where = path.relative_to(root).as_posix()
    found = []
    tree = ast.parse(path.read_text(encoding="utf-8"))
    for node in ast.walk(tree):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda)):
            positional = node.args.posonlyargs + node.args.args
            pairs = list(zip(positional[len(positional) - len(node.args.defaults) :], node.args.defaults))
            pairs += [(a, d) for a, d in zip(node.args.kwonlyargs, node.args.kw_defaults) if d is not None]
            found += [
                f"{where}:{d.lineno} {a.arg}={ast.unparse(d)}" for a, d in pairs if a.arg in names and _literal(d)
            ]
        elif isinstance(node, ast.Call):
            flag = node.args[0].value if node.args and isinstance(node.args[0], ast.Constant) else None
            setting = flag[2:].replace("-", "_") if isinstance(flag, str) and flag.startswith("--") else None
            for keyword in node.keywords:
                if keyword.arg in names and _literal(keyword.value):
                    if ast.literal_eval(keyword.value) == defaults[keyword.arg]:
                        found.append(f"{where}:{keyword.value.lineno} {keyword.arg}={ast.unparse(keyword.value)}")
                if keyword.arg == "default" and setting in defaults and _literal(keyword.value):
                    found.append(f"{where}:{keyword.value.lineno} {flag} default={ast.unparse(keyword.value)}")
        elif isinstance(node, ast.Assign) and _literal(node.value):
            targets = [t.id for t in node.targets if isinstance(t, ast.Name) and t.id in CONSTANTS]
            found += [f"{where}:{node.lineno} {t} = {ast.unparse(node.value)}" for t in targets]
    return found


def package_files() -> list[Path]:
    files = [*sorted((REPO / "calibkit").rglob("*.py")), *sorted((REPO / "metrics").glob("*/*.py"))]
    assert len(files) > 100
    return [f for f in files if f.relative_to(REPO).as_posix() != "calibkit/metrics/sampling.py"]


def test_no_literal_of_a_sampling_default_outside_its_carrier():
    found = [hit for f in package_files() for hit in literal_sampling_defaults(f)]
    assert [hit for hit in found if hit not in ALLOWED] == []
    assert [hit for hit in ALLOWED if hit not in found] == [], "a stale allowance: the place has moved"


@pytest.mark.parametrize(
    "source, want",
    [
        ("def f(p, *, n_boot: int = 1000, seed=SAMPLING_UNSET.seed):\n    pass\n", ["planted.py:1 n_boot=1000"]),
        ("def f(*, resplits=20, threshold=-1):\n    pass\n", ["planted.py:1 resplits=20", "planted.py:1 threshold=-1"]),
        ("d.plot(ax, band=1000)\nd.plot(ax, band=200)\n", ["planted.py:1 band=1000"]),
        ("f(x, seed=0, level=0.95)\n", ["planted.py:1 seed=0", "planted.py:1 level=0.95"]),
        (
            "def f(p, confidence=0.95):\n    g(confidence=0.95)\n",
            ["planted.py:1 confidence=0.95", "planted.py:2 confidence=0.95"],
        ),
        ("p.add_argument('--resplits', type=int, default=20)\n", ["planted.py:1 --resplits default=20"]),
        ("Z95 = 1.959963984540054\nOTHER = 0.95\n", ["planted.py:1 Z95 = 1.959963984540054"]),
    ],
)
def test_the_scan_sees_a_planted_literal(tmp_path, source, want):
    planted = tmp_path / "planted.py"
    planted.write_text(source)
    assert literal_sampling_defaults(planted, tmp_path) == want


# ------------------------------------------------------------------------------------------
# the carrier: one check per setting, resolve_sampling's rules


@pytest.mark.parametrize(
    "name, bad, message",
    [
        ("bootstrap", -1, r"`bootstrap` must be an integer in \[0, 100000\], got -1"),
        ("bootstrap", 2.5, "`bootstrap` must be an integer"),
        ("bootstrap", True, "`bootstrap` must be an integer"),
        ("resplits", 10_001, r"`resplits` must be an integer in \[0, 10000\]"),
        ("level", 1.0, r"`level` must lie in \(0, 1\)"),
        ("level", "0.9", "`level` must be a number"),
        ("seed", -1, "`seed` must be an integer >= 0"),
        ("seed", np.True_, "`seed` must be an integer >= 0"),
        ("threshold", 0, r"`threshold` must be a number in \(0, 1\]"),
        ("threshold", 1.5, r"`threshold` must be a number in \(0, 1\]"),
    ],
)
def test_each_setting_is_checked_once_by_name(name, bad, message):
    with pytest.raises(ValueError, match=message):
        SamplingSettings(**{name: bad})


def test_the_settings_normalise_and_replace():
    s = SamplingSettings(bootstrap=np.int64(200), seed=np.int32(3), level=np.float32(0.5))
    assert (type(s.bootstrap), type(s.seed), type(s.level)) == (int, int, float)
    assert s.replace(resplits=0).resplits == 0 and s.replace(resplits=0).bootstrap == 200
    with pytest.raises(ValueError, match="unknown sampling settings"):
        s.replace(n_boot=3)
    with pytest.raises(ValueError, match=r"`resplits` must be an integer >= 1 here"):
        s.replace(resplits=0).require("resplits")


def test_resolve_sampling_follows_resolve_settings_rules():
    assert resolve_sampling() == SAMPLING_DEFAULTS
    assert resolve_sampling(seed=SAMPLING_UNSET.seed, bootstrap=5).bootstrap == 5
    assert resolve_sampling(bootstrap=OFF).bootstrap == 0  # a door's own default holds without sampling=
    given = SamplingSettings(bootstrap=7)
    assert resolve_sampling(given, bootstrap=OFF, seed=SAMPLING_UNSET.seed) is given  # and never conflicts
    with pytest.raises(ValueError, match=r"`seed=0` and `sampling\.seed=0`"):
        resolve_sampling(SamplingSettings(), seed=0)  # given with sampling=, even at the same value
    with pytest.raises(ValueError, match="unknown sampling settings"):
        resolve_sampling(n_boot=3)
    with pytest.raises(ValueError, match="`sampling` must be a SamplingSettings"):
        resolve_sampling({"seed": 1})


def test_the_unset_defaults_read_as_the_values():
    for name in sampling_names():
        marked = getattr(SAMPLING_UNSET, name)
        assert is_unset(marked) and marked == getattr(SAMPLING_DEFAULTS, name)
        assert repr(marked) == repr(getattr(SAMPLING_DEFAULTS, name))
    assert is_unset(OFF) and OFF == 0 and repr(OFF) == "0"


# ------------------------------------------------------------------------------------------
# the doors


def doors() -> dict:
    from calibkit.lm.generations import abstention_resplits, generations_report, recalibration_resplits
    from calibkit.metrics.bootstrap import bootstrap_intervals
    from calibkit.verdicts.resplits import resplit_comparison

    return {
        "bootstrap_intervals": bootstrap_intervals,
        "generations_report": generations_report,
        "recalibration_resplits": recalibration_resplits,
        "abstention_resplits": abstention_resplits,
        "resplit_comparison": resplit_comparison,
    }


@pytest.mark.parametrize("door", sorted(doors()))
def test_each_door_takes_sampling_and_marks_its_defaults(door):
    parameters = inspect.signature(doors()[door]).parameters
    assert "sampling" in parameters, door
    for name in sampling_names():
        if name in parameters:
            default = parameters[name].default
            assert is_unset(default), f"{door}: {name}={default!r} is not marked as not given"
            assert default == getattr(SAMPLING_DEFAULTS, name) or default is OFF, f"{door}: {name}={default!r}"


def test_the_abstention_levels_keep_one_name_and_one_check():
    from calibkit.metrics.abstention import abstention_threshold

    parameters = inspect.signature(abstention_threshold).parameters
    assert "abstention_alpha" in parameters and "abstention_delta" in parameters
    with pytest.raises(ValueError, match="`abstention_alpha` must lie in"):
        abstention_threshold([0.5, 0.9], [1, 0], abstention_alpha=1.0)
    with pytest.raises(ValueError, match=r"`abstention_delta` must lie in"):
        calibkit.CalibrationSettings(abstention_delta=0.0)


def test_the_reliability_diagram_takes_bootstrap_and_band_still_works():
    pytest.importorskip("matplotlib")
    import matplotlib

    matplotlib.use("Agg")
    from calibkit.plots.diagrams import ReliabilityDiagram, bin_band

    p = np.array([[0.8, 0.2], [0.3, 0.7], [0.6, 0.4], [0.1, 0.9]] * 10)
    y = np.array([0, 1, 1, 1] * 10)
    new = ReliabilityDiagram.from_predictions(p, y, n_bins=4, bootstrap=50, seed=2)
    with pytest.warns(FutureWarning, match="`band` is renamed `bootstrap`"):
        old = ReliabilityDiagram.from_predictions(p, y, n_bins=4, band=50, seed=2)
    np.testing.assert_array_equal(new.band_low_, old.band_low_)
    with pytest.warns(FutureWarning, match="`n_boot` is renamed `bootstrap`"):
        low, _ = bin_band(np.array([10]), np.array([0.5]), n_boot=50)
    np.testing.assert_array_equal(low, bin_band(np.array([10]), np.array([0.5]), bootstrap=50)[0])
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert ReliabilityDiagram.from_predictions(p, y, n_bins=4).band_ is None  # no band unless asked


# ------------------------------------------------------------------------------------------
# the command line: the flags are the dataclass's


def test_the_sampling_flags_are_generated_from_the_dataclass():
    from calibkit.cli.options import sampling_parent

    parser = sampling_parent("re-splits", threshold=True)
    actions = {a.dest: a for a in parser._actions}
    assert set(actions) == {"bootstrap", "resplits", "seed", "threshold"}
    assert actions["bootstrap"].default == 0 and type(actions["bootstrap"].default) is int  # asked for, not given
    for name in ("resplits", "seed", "threshold"):
        assert actions[name].default == getattr(SAMPLING_DEFAULTS, name)
    args = parser.parse_args(["--bootstrap", "7", "--threshold", "0.8"])
    assert (args.bootstrap, args.threshold) == (7, 0.8) and not is_unset(args.bootstrap)
    assert set(actions) - {"resplits"} == {a.dest for a in sampling_parent(None, threshold=True)._actions}


def test_the_command_line_names_a_bad_sampling_setting_by_its_flag():
    from calibkit.cli.common import name_flags

    message = str(pytest.raises(ValueError, SamplingSettings, threshold=2).value)
    assert name_flags(message, "generations").startswith("--threshold must be a number in (0, 1]")


def test_the_generations_doors_compute_alike_from_sampling_or_the_keywords(tmp_path):
    from calibkit.lm.generations import (
        abstention_resplits,
        generations_report,
        read_generations,
        recalibration_resplits,
    )
    from tests.test_generations import answers, write_jsonl

    data = read_generations(write_jsonl(tmp_path / "gen.jsonl", answers(60)))
    plain = generations_report(data, sources=["judge"])
    assert "intervals" not in plain["pooled"]["sources"]["judge"]  # OFF: no interval unless asked
    keywords = generations_report(data, sources=["judge"], threshold=0.7, bootstrap=20, seed=3)
    given = generations_report(data, sources=["judge"], sampling=SamplingSettings(threshold=0.7, bootstrap=20, seed=3))
    assert keywords == given and keywords["threshold"] == 0.7
    assert keywords["pooled"]["sources"]["judge"]["intervals"]
    sampling = SamplingSettings(resplits=3, seed=2, threshold=0.7)
    by_keywords = recalibration_resplits(data, sources=["judge"], resplits=3, seed=2, threshold=0.7)
    by_sampling = recalibration_resplits(data, sources=["judge"], sampling=sampling)
    for method, metrics in by_keywords["values"]["judge"].items():
        for name, values in metrics.items():
            np.testing.assert_array_equal(values, by_sampling["values"]["judge"][method][name])
    held = abstention_resplits(data, sources=["judge"], sampling=sampling)
    assert held["resplits"] == 3
    with pytest.raises(ValueError, match=r"`resplits=3` and `sampling\.resplits=3`"):
        abstention_resplits(data, resplits=3, sampling=sampling)
    with pytest.raises(ValueError, match=r"`resplits` must be an integer >= 1 here"):
        recalibration_resplits(data, resplits=0)
