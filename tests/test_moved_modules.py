"""The 0.1 module paths still import after the move into rooms: the same module object, with a
DeprecationWarning that names the new path and points at the importing line."""

import importlib
import subprocess
import sys
import warnings

import pytest

import calibkit
from calibkit._moved import MOVED, new_path


@pytest.mark.parametrize("old", sorted(MOVED))
def test_an_old_path_gives_the_module_at_its_new_path_with_a_warning(old):
    sys.modules.pop(old, None)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        module = importlib.import_module(old)
    assert module is importlib.import_module(MOVED[old])
    messages = [str(w.message) for w in caught if issubclass(w.category, DeprecationWarning)]
    assert any(f"`{old}` moved to `{MOVED[old]}`" in m for m in messages), messages


def test_documented_names_import_from_the_old_paths():
    code = (
        "import warnings; warnings.simplefilter('ignore')\n"
        "from calibkit.plots import ReliabilityDiagram, RegionPlot\n"
        "from calibkit.comparison import compare_calibrators\n"
        "from calibkit.resplits import resplit_comparison, claim_measurements, verdicts, Resplits\n"
        "from calibkit.claims import CATALOGUE, HOLD_SHARE, MIN_RESPLITS, MIN_COUNTED_BINS, Claim, what_this_means\n"
        "from calibkit.reporting import write_report\n"
        "from calibkit.shards import stream_report, find_shards\n"
        "from calibkit.prediction_files import load_predictions\n"
        "from calibkit.multiple_choice import read_choices, multiple_choice_report, choice_temperature_scaling\n"
        "from calibkit.multiple_choice import choice_probabilities, choice_logits, ChoiceData\n"
        "from calibkit.multiple_choice.figures import write_choice_report\n"
        "from calibkit.demo import class_weights, run_demo, load_twitter_ner, first_subtoken_labels\n"
        "from calibkit.demo_multilabel import run_multilabel_demo\n"
        "import calibkit.verdicts.plots as new, calibkit.plots as old\n"
        "assert new is old and new.ReliabilityDiagram is ReliabilityDiagram\n"
        "print('ok')\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=False)
    assert out.returncode == 0 and out.stdout.strip() == "ok", out.stderr


def test_the_warning_points_at_the_users_line(tmp_path):
    script = tmp_path / "user.py"
    script.write_text("import calibkit.shards\n")
    out = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, check=False)
    assert out.returncode == 0
    assert f"{script}:1: DeprecationWarning: `calibkit.shards` moved to `calibkit.io.shards`" in out.stderr


def test_submodules_of_a_moved_package_follow_it():
    assert new_path("calibkit.multiple_choice.readers") == "calibkit.lm.multiple_choice.readers"
    assert new_path("calibkit.metrics") is None and new_path("calibkit.demos") is None
    assert calibkit.__name__ == "calibkit"
