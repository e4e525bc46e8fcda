"""Fixtures for calibkit's `evaluate` modules: one temporary module cache for the whole session.

evaluate imports its cached scripts as the top-level package ``evaluate_modules``, found on
``sys.path``; the first cache imported in a process wins. So the session gets its own cache,
put first on ``sys.path``, and any ``evaluate_modules`` imported before is set aside and restored.
evaluate's settings are module attributes read at call time (``evaluate.config``), so they are
patched there rather than through environment variables, which evaluate reads only at import.
"""

import sys

import pytest

import calibkit


def _evaluate_modules_entries() -> list[str]:
    return [name for name in sys.modules if name.split(".")[0] == "evaluate_modules"]


@pytest.fixture(scope="session")
def modules_cache(tmp_path_factory):
    import evaluate.config as config

    cache = tmp_path_factory.mktemp("hf_modules")
    patch = pytest.MonkeyPatch()
    patch.setattr(config, "HF_MODULES_CACHE", cache)
    patch.setattr(config, "HF_EVALUATE_OFFLINE", True)  # no Hub look-ups (no network here)
    patch.setattr(config, "HF_METRICS_CACHE", tmp_path_factory.mktemp("hf_metrics"))
    saved = {name: sys.modules.pop(name) for name in _evaluate_modules_entries()}
    patch.syspath_prepend(str(cache))
    calibkit.install_evaluate_modules(modules_cache=cache)
    yield cache
    for name in _evaluate_modules_entries():
        del sys.modules[name]
    sys.modules.update(saved)
    patch.undo()


@pytest.fixture(scope="session")
def load(modules_cache):
    """``load(name, config=None)``: the module by bare name from the installed cache."""
    import evaluate

    def _load(name: str, config: str | None = None, **kwargs):
        return evaluate.load(name, config, **kwargs)

    return _load
