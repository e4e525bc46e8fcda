"""The 0.1 module paths still import after the move into rooms: the same module object, with a
DeprecationWarning that names the new path and points at the importing line."""

import importlib
import subprocess
import sys
import warnings

import pytest

import calibkit
from calibkit._moved import MOVED, MOVED_NAMES, new_path


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
        "from calibkit.reporting import write_report, write_figures, new_figure\n"
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


MOVED_NAME_PAIRS = [
    (module, new, name) for module, moves in MOVED_NAMES.items() for new, names in moves.items() for name in names
]


@pytest.mark.parametrize(("module", "new", "name"), MOVED_NAME_PAIRS)
def test_a_name_that_left_a_module_still_imports_from_it_with_a_warning(module, new, name):
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        value = getattr(importlib.import_module(module), name)
    assert value is getattr(importlib.import_module(new), name)
    messages = [str(w.message) for w in caught if issubclass(w.category, DeprecationWarning)]
    assert any(f"`{module}.{name}` moved to `{new}.{name}`" in m for m in messages), messages


def test_a_name_that_never_was_there_is_still_an_attribute_error():
    import calibkit.verdicts.reporting as reporting

    with pytest.raises(AttributeError, match="no attribute 'nothing_here'"):
        reporting.nothing_here  # noqa: B018 - the attribute access is the test


def test_the_plots_room_is_the_01_path_again_and_the_02_path_leads_to_it():
    """``calibkit.plots`` (0.1) is the room of figures and tables, imported without a warning;
    ``calibkit.verdicts.plots`` (where 0.2 had put the displays) gives the same module, warned."""
    code = (
        "import warnings; warnings.simplefilter('error')\n"
        "import calibkit.plots, calibkit.plots.figures, calibkit.plots.tables\n"
        "warnings.simplefilter('ignore')\n"
        "import calibkit.verdicts.plots as old\n"
        "from calibkit.verdicts.held import smooth_figure\n"
        "assert old is calibkit.plots and old.ReliabilityDiagram.__module__ == 'calibkit.plots.diagrams'\n"
        "print('ok')\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=False)
    assert out.returncode == 0 and out.stdout.strip() == "ok", out.stderr


def test_a_moved_names_warning_points_at_the_users_line(tmp_path):
    script = tmp_path / "user.py"
    script.write_text("import calibkit.verdicts.reporting\nfrom calibkit.verdicts.reporting import new_figure\n")
    out = subprocess.run(
        [sys.executable, "-W", "always::DeprecationWarning", str(script)], capture_output=True, text=True, check=False
    )
    assert out.returncode == 0, out.stderr
    assert f"{script}:2: DeprecationWarning: `calibkit.verdicts.reporting.new_figure` moved to" in out.stderr


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
