"""The sampling settings: how many replicates, at which level, from which seed; which answer is right.

One frozen, validated object, :class:`SamplingSettings`, carries what every door that draws
intervals, re-splits data or scores answers used to write again: the bootstrap replicates
(``bootstrap``), the level of an interval (``level``), the seed (``seed``), the re-splits
(``resplits``) and the score at which an answer counts as right (``threshold``). A door takes
``sampling=SamplingSettings(...)`` or the same keywords and turns them into one object with
:func:`resolve_sampling`, which follows ``calibkit.metrics.settings.resolve_settings``'s rules
(keywords or ``sampling=``, never both; one check per setting, here; a door's keyword defaults to
``SAMPLING_UNSET.<name>``, a function without ``sampling=`` to ``SAMPLING_DEFAULTS.<name>``, so
``help()`` shows the value and no copy of it can drift). The command line's ``--bootstrap``,
``--resplits``, ``--seed`` and ``--threshold`` are generated from the dataclass
(``calibkit.cli.options.sampling_parent``). Old keyword names (``n_boot``, ``band``,
``confidence`` for the level) still work for one release, with a ``FutureWarning``, through
``calibkit.metrics.settings.renamed``.

Why a second dataclass and not fields of :class:`calibkit.CalibrationSettings`:
the metric settings say what a number *is* (ECE at 15 bins is another metric than at 10) and
every metric door spells out each of them (tests/test_settings_at_every_door.py); the sampling
settings say how an interval or a verdict around that number is *drawn*, and no metric of the
registry reads them. As fields of the metric settings, every metric door would list or excuse
five settings it never reads, and ``settings=`` of :func:`calibkit.metrics.bootstrap.bootstrap_intervals`
would carry both. The abstention levels (``abstention_alpha``, ``abstention_delta``) stay in
:class:`calibkit.CalibrationSettings`, where they were carried, checked once and
turned into flags before this module; one name each everywhere (the old ``alpha``/``delta`` of
:func:`calibkit.metrics.abstention.abstention_threshold` are renamed), one home each.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Any

import numpy as np

from calibkit.metrics.settings import given_keywords, is_unset, mark_unset, unset_defaults
from calibkit.metrics.validation import check_open_unit

__all__ = [
    "MAX_REPLICATES",
    "MAX_RESPLITS",
    "OFF",
    "SAMPLING_DEFAULTS",
    "SAMPLING_UNSET",
    "SamplingSettings",
    "resolve_sampling",
    "sampling_keywords",
    "sampling_names",
]

MAX_REPLICATES = 100_000
"""Upper bound of ``bootstrap``: percentiles of 1e5 replicates are stable far beyond the 4 decimals
reported, and each replicate costs the metric formulas once."""
MAX_RESPLITS = 10_000
"""Upper bound of ``resplits``."""
OFF = mark_unset(0)
"""``bootstrap`` or ``resplits`` of 0, marked as not given: none drawn, the default of a door that draws
them only when asked (:func:`calibkit.lm.generations.generations_report`'s ``bootstrap``); a door's own
default, used without ``sampling=`` and never in conflict with it."""


def _count(value: Any, name: str, maximum: int) -> int:
    if isinstance(value, (bool, np.bool_)) or not isinstance(value, (int, np.integer)) or not 0 <= value <= maximum:
        raise ValueError(f"`{name}` must be an integer in [0, {maximum}], got {value!r}")
    return int(value)


def _seed(value: Any) -> int:
    if isinstance(value, (bool, np.bool_)) or not isinstance(value, (int, np.integer)) or value < 0:
        raise ValueError(f"`seed` must be an integer >= 0, got {value!r}")
    return int(value)


def _threshold(value: Any) -> float:
    numeric = isinstance(value, (int, float, np.integer, np.floating)) and not isinstance(value, (bool, np.bool_))
    if not numeric or not 0 < value <= 1:
        raise ValueError(f"`threshold` must be a number in (0, 1], got {value!r}")
    return float(value)


@dataclass(frozen=True)
class SamplingSettings:
    """Replicates, level, seed and re-splits of every interval and verdict; when an answer is right.

    Parameters
    ----------
    bootstrap : int, default 1000
        Bootstrap replicates of each interval (at most 100000); 0: none, where intervals are
        optional (the command line's default).
    level : float, default 0.95
        Two-sided level of an interval, in (0, 1).
    seed : int, default 0
        Seed of every random draw (replicates, re-splits, a figure's band), >= 0.
    resplits : int, default 20
        Random re-splits of the data (fitted on one part, judged on the other) behind the means,
        intervals and verdicts (at most 10000; 0: none, where re-splits are optional).
    threshold : float, default 0.5
        An answer is right when its correctness score is at least this, in (0, 1].

    Raises
    ------
    ValueError
        Naming the setting, when a value is out of range or of the wrong type.

    Examples
    --------
    >>> s = SamplingSettings(bootstrap=200)
    >>> s.bootstrap, s.level, s.seed
    (200, 0.95, 0)
    >>> s.replace(seed=3).seed
    3
    """

    bootstrap: int = 1000
    level: float = 0.95
    seed: int = 0
    resplits: int = 20
    threshold: float = 0.5

    def __post_init__(self) -> None:
        """Check and normalise every setting (numpy integers become int, ...)."""
        checked = {
            "bootstrap": _count(self.bootstrap, "bootstrap", MAX_REPLICATES),
            "level": check_open_unit(self.level, "level"),
            "seed": _seed(self.seed),
            "resplits": _count(self.resplits, "resplits", MAX_RESPLITS),
            "threshold": _threshold(self.threshold),
        }
        for name, value in checked.items():
            object.__setattr__(self, name, value)

    def replace(self, **changes: Any) -> SamplingSettings:
        """Return a copy with ``changes`` applied and validated.

        Parameters
        ----------
        **changes
            Settings to change, by their names.

        Returns
        -------
        SamplingSettings

        Raises
        ------
        ValueError
            When a name is not a setting, or a value is out of range.
        """
        unknown = sorted(set(changes) - set(sampling_names()))
        if unknown:
            raise ValueError(f"unknown sampling settings {unknown}; known: {list(sampling_names())}")
        return dataclasses.replace(self, **changes)

    def as_dict(self) -> dict[str, Any]:
        """Return every setting by name (JSON-friendly).

        Returns
        -------
        dict of str to object
        """
        return dataclasses.asdict(self)

    def require(self, name: str) -> int:
        """Return the count ``name`` (``bootstrap`` or ``resplits``), refusing 0 where a door needs at least one.

        Parameters
        ----------
        name : {"bootstrap", "resplits"}

        Returns
        -------
        int

        Raises
        ------
        ValueError
            Naming the setting, when it is 0.
        """
        value = getattr(self, name)
        if value < 1:
            raise ValueError(f"`{name}` must be an integer >= 1 here (0 draws none), got {value!r}")
        return value


def sampling_names() -> tuple[str, ...]:
    """List the names of every sampling setting, in :class:`SamplingSettings`' order.

    Returns
    -------
    tuple of str
    """
    return tuple(f.name for f in dataclasses.fields(SamplingSettings))


SAMPLING_DEFAULTS = SamplingSettings()
"""The defaults of the sampling settings."""

SAMPLING_UNSET = unset_defaults(SAMPLING_DEFAULTS)
"""``SAMPLING_UNSET.<setting>``: the setting's default, marked as not given
(``calibkit.metrics.settings.is_unset``)."""


def resolve_sampling(sampling: SamplingSettings | None = None, /, **keywords: Any) -> SamplingSettings:
    """Turn a door's ``sampling`` argument and its sampling keywords into one checked settings object.

    Parameters
    ----------
    sampling : SamplingSettings, optional
        The door's ``sampling`` argument.
    **keywords
        The door's sampling keywords as received: ``SAMPLING_UNSET.<name>`` (or the door's own
        marked default, :data:`OFF`) where the caller gave none.

    Returns
    -------
    SamplingSettings
        ``sampling`` if given, else the settings of the keywords (defaults where not given).

    Raises
    ------
    ValueError
        When ``sampling`` and a keyword are both given (naming both values, whether they agree
        or not), a keyword is not a sampling setting, ``sampling`` is not a
        :class:`SamplingSettings`, or a value is bad (naming the setting).

    Examples
    --------
    >>> resolve_sampling(seed=3, bootstrap=SAMPLING_UNSET.bootstrap).bootstrap
    1000
    """
    unknown = sorted(set(keywords) - set(sampling_names()))
    if unknown:
        raise ValueError(f"unknown sampling settings {unknown}; known: {list(sampling_names())}")
    given = given_keywords(keywords)
    if sampling is None:  # a door's own marked default (OFF) holds where the caller gave none
        return SamplingSettings(**{**{k: v for k, v in keywords.items() if is_unset(v)}, **given})
    if not isinstance(sampling, SamplingSettings):
        raise ValueError(f"`sampling` must be a SamplingSettings, got {type(sampling).__name__}")
    if given:
        both = ", ".join(f"`{k}={v!r}` and `sampling.{k}={getattr(sampling, k)!r}`" for k, v in given.items())
        raise ValueError(f"{both}: give `sampling` or the sampling settings as keywords, not both")
    return sampling


def sampling_keywords(scope: dict[str, Any]) -> dict[str, Any]:
    """Pick a door's sampling keywords out of its ``locals()``, for :func:`resolve_sampling`.

    Parameters
    ----------
    scope : dict
        The door's ``locals()`` (after any renamed keyword is resolved).

    Returns
    -------
    dict of str to object
    """
    return {name: scope[name] for name in sampling_names() if name in scope}
