"""The settings of every metric: one frozen, validated object, built once at each door.

Every entry point (the functional API, :func:`calibkit.calibration_report`, the accumulator,
the bootstrap, :mod:`calibkit.io.shards`, :mod:`calibkit.io.dask`, the ``evaluate`` modules, the
callback, the CLI) takes ``settings=CalibrationSettings(...)`` or the same keywords, and turns them
into one :class:`CalibrationSettings` with :func:`resolve_settings`, which it passes inward;
nothing further in checks or renames a setting. The defaults live in the dataclass only: a door's
keyword defaults to ``UNSET.<name>`` (the default, marked as not given) and a function that takes
no ``settings=`` to ``DEFAULTS.<name>``, so that ``help()`` shows the value and no copy of it can
drift. Each setting has one name everywhere. The names that some doors used before
(``ace(n_ranges=)``, ``rbece(n_bins=)``, ``sce(n_bins=)``, ``fce(n_bins=, variant=)``,
``esce(n_bins=)``) still work for one release, with a :class:`FutureWarning`, through
:func:`renamed`.
"""

from __future__ import annotations

import dataclasses
import warnings
from dataclasses import dataclass
from typing import Any

from calibkit.metrics.validation import (
    check_bins,
    check_bool,
    check_choice,
    check_coverage,
    check_eps,
    check_ignore_index,
    check_non_negative,
    check_open_unit,
)

FCE_VARIANTS = ("paper", "authors")
"""``fce_variant``: the paper's formula (default), or what the authors' published code computes."""


@dataclass(frozen=True)
class CalibrationSettings:
    """Bin counts, thresholds and input conventions of every metric (SPEC.md's defaults).

    Parameters
    ----------
    n_bins : int, default 15
        Equal-width bins of the top-label confidence for ECE, MCE, the L2 ECEs and the
        class-wise metrics (CECE, MSECE, WSECE, ECE variance, per-class ECE).
    ace_ranges : int, default 15
        Equal-mass ranges per class column for ACE.
    sce_bins : int, default 15
        Equal-width bins per class column for SCE.
    rbece_bins : int, default 20
        Equal-width bins for RBECE.
    theta : float, default 40
        RBECE counts a bin only when it holds more than ``theta`` samples.
    fce_bins : int, default 15
        Fuzzy bins for FCE.
    fce_variant : {"paper", "authors"}, default "paper"
        FCE by the paper's formula, or as the fuzzy-binning authors' code computes it.
    esce_bins : int, default 10
        Equal-width bins for ESCE (the entropic paper's 10).
    eps : float, default 1e-12
        Logs (NLL, ECD) clip probabilities at ``eps``.
    coverage : float, default 0.8
        The share of inputs, the most confident, on which the selective accuracy is measured
        (HELM's view: a model that answers only when it is most sure).
    from_logits : bool, default False
        The inputs are logits: softmax (sigmoid for 1-D binary input) is applied on the fly.
    multilabel : bool, default False
        Multi-label input: ``(N, K)`` probabilities (or logits: a sigmoid each) of independent
        labels with multi-hot ``(N, K)`` labels; every binary metric per label, with macro,
        weighted and micro averages (:func:`calibkit.multilabel_report`). Never guessed from the
        data.
    next_token : bool, default False
        Causal language-model input: logits (or probabilities) of shape ``(N, T, V)`` with the
        labels a causal LM's ``Trainer`` gives, ``(N, T)`` (the input ids, ``ignore_index`` on
        padding and prompt); position ``t`` is scored against the label at ``t + 1``, as the
        model's own loss shifts them. Never guessed from the shapes.
    ignore_index : int, default -100
        Label of the positions to skip (token padding, as ``transformers`` pads).
    abstention_alpha : float, default 0.1
        Abstention with a guarantee (Learn then Test): the selective error allowed (the error
        rate among the answers given, confidence at least the threshold), in (0, 1).
    abstention_delta : float, default 0.1
        Abstention with a guarantee: the probability allowed that the selective error exceeds
        ``abstention_alpha`` (the guarantee holds with probability ``1 - abstention_delta``),
        in (0, 1).

    Raises
    ------
    ValueError
        Naming the setting, when a value is out of range or of the wrong type.

    Examples
    --------
    >>> s = CalibrationSettings(rbece_bins=10)
    >>> s.rbece_bins, s.n_bins
    (10, 15)
    >>> s.replace(theta=0).theta
    0.0
    """

    n_bins: int = 15
    ace_ranges: int = 15
    sce_bins: int = 15
    rbece_bins: int = 20
    theta: float = 40.0
    fce_bins: int = 15
    fce_variant: str = "paper"
    esce_bins: int = 10
    eps: float = 1e-12
    coverage: float = 0.8
    from_logits: bool = False
    multilabel: bool = False
    next_token: bool = False
    ignore_index: int = -100
    abstention_alpha: float = 0.1
    abstention_delta: float = 0.1

    def __post_init__(self) -> None:
        """Check and normalise every setting (numpy integers become int, ...)."""
        checked = {
            "n_bins": check_bins(self.n_bins, "n_bins"),
            "ace_ranges": check_bins(self.ace_ranges, "ace_ranges"),
            "sce_bins": check_bins(self.sce_bins, "sce_bins"),
            "rbece_bins": check_bins(self.rbece_bins, "rbece_bins"),
            "theta": check_non_negative(self.theta, "theta"),
            "fce_bins": check_bins(self.fce_bins, "fce_bins"),
            "fce_variant": check_choice(self.fce_variant, "fce_variant", FCE_VARIANTS),
            "esce_bins": check_bins(self.esce_bins, "esce_bins"),
            "eps": check_eps(self.eps),
            "coverage": check_coverage(self.coverage),
            "from_logits": check_bool(self.from_logits, "from_logits"),
            "multilabel": check_bool(self.multilabel, "multilabel"),
            "next_token": check_bool(self.next_token, "next_token"),
            "ignore_index": check_ignore_index(self.ignore_index),
            "abstention_alpha": check_open_unit(self.abstention_alpha, "abstention_alpha"),
            "abstention_delta": check_open_unit(self.abstention_delta, "abstention_delta"),
        }
        for name, value in checked.items():  # normalised (numpy ints become int, ...)
            object.__setattr__(self, name, value)
        if self.multilabel and self.next_token:
            raise ValueError(
                "`multilabel=True` and `next_token=True`: a next token is one class of the vocabulary, "
                "not independent labels; give one of them"
            )

    def replace(self, **changes: Any) -> CalibrationSettings:
        """Return a copy with ``changes`` applied and validated.

        Parameters
        ----------
        **changes
            Settings to change, by their names.

        Returns
        -------
        CalibrationSettings

        Raises
        ------
        ValueError
            When a name is not a setting, or a value is out of range.
        """
        unknown = sorted(set(changes) - set(names()))
        if unknown:
            raise ValueError(f"unknown settings {unknown}; known: {list(names())}")
        return dataclasses.replace(self, **changes)

    def as_dict(self) -> dict[str, Any]:
        """Return every setting by name (JSON-friendly).

        Returns
        -------
        dict of str to object
        """
        return dataclasses.asdict(self)


def names() -> tuple[str, ...]:
    """List the names of every setting, in :class:`CalibrationSettings`' order.

    Returns
    -------
    tuple of str
    """
    return tuple(f.name for f in dataclasses.fields(CalibrationSettings))


DEFAULTS = CalibrationSettings()
"""The SPEC.md defaults."""


class _UnsetInt(int):
    """A keyword's default, told apart from the same value passed by the caller (reads as the value)."""

    __slots__ = ()

    def __repr__(self) -> str:
        return int.__repr__(self)


class _UnsetFloat(float):
    """A keyword's default, told apart from the same value passed by the caller (reads as the value)."""

    __slots__ = ()

    def __repr__(self) -> str:
        return float.__repr__(self)


class _UnsetStr(str):
    """A keyword's default, told apart from the same value passed by the caller (reads as the value)."""

    __slots__ = ()

    def __repr__(self) -> str:
        return str.__repr__(self)


class _UnsetBool:
    """A bool keyword's default (bool cannot be subclassed): false, equal to False, reads as ``False``."""

    __slots__ = ()

    def __bool__(self) -> bool:
        return False

    def __eq__(self, other: object) -> bool:
        return other is False or isinstance(other, _UnsetBool)

    def __hash__(self) -> int:
        return hash(False)

    def __repr__(self) -> str:
        return "False"


_UNSET_TYPES = (_UnsetInt, _UnsetFloat, _UnsetStr, _UnsetBool)
_BOOLS = ("from_logits", "multilabel", "next_token")  # None also stands for "not given" (the doors' older default)


def mark_unset(value: Any) -> Any:
    """Mark a default as not given: the same value, which :func:`is_unset` tells from the caller's own.

    Parameters
    ----------
    value : int, float, str or bool
        A dataclass default (every bool setting defaults to False).

    Returns
    -------
    object
        The value, marked.
    """
    if isinstance(value, bool):
        return _UnsetBool()
    return {int: _UnsetInt, float: _UnsetFloat, str: _UnsetStr}[type(value)](value)


class _Unset:
    """The defaults of the settings keywords, as values a door can tell from the caller's own.

    ``n_bins: int = UNSET.n_bins`` reads as ``15`` in ``help()`` and computes as 15, but
    :func:`is_unset` knows it was not passed: a door that also takes ``settings=`` (or an old
    keyword name) refuses two values for one setting even when one of them equals the default.
    The bools (``from_logits``, ``multilabel``, ``next_token``) read as ``False``; some doors
    default them to None instead, which :func:`resolve_settings` also reads as "not given".
    """

    def __init__(self, defaults: Any = None) -> None:
        defaults = DEFAULTS if defaults is None else defaults
        for field in dataclasses.fields(defaults):
            setattr(self, field.name, mark_unset(getattr(defaults, field.name)))


UNSET = _Unset()
"""``UNSET.<setting>``: the setting's default, marked as not given (see :func:`is_unset`)."""


def unset_defaults(defaults: Any) -> Any:
    """Mark every default of a settings dataclass instance as not given (``UNSET`` of another carrier).

    Parameters
    ----------
    defaults : dataclass instance
        The carrier's defaults (:data:`calibkit.metrics.sampling.SAMPLING_DEFAULTS`).

    Returns
    -------
    object
        ``.<name>``: each default, marked (:func:`is_unset`).
    """
    return _Unset(defaults)


def is_unset(value: Any) -> bool:
    """Tell whether ``value`` is a default a door put there (``UNSET.*``), not the caller's.

    Parameters
    ----------
    value : object

    Returns
    -------
    bool
    """
    return isinstance(value, _UNSET_TYPES)


def given_keywords(keywords: dict[str, Any]) -> dict[str, Any]:
    """Keep the settings keywords the caller gave: drop ``UNSET.*``, and None for a bool setting.

    Parameters
    ----------
    keywords : dict of str to object
        A door's settings keywords as received.

    Returns
    -------
    dict of str to object
    """
    return {k: v for k, v in keywords.items() if not is_unset(v) and not (k in _BOOLS and v is None)}


def resolve_settings(settings: CalibrationSettings | None = None, /, **keywords: Any) -> CalibrationSettings:
    """Turn a door's ``settings`` argument and its settings keywords into one checked settings object.

    Every entry point calls this once, first; the defaults and the checks live in
    :class:`CalibrationSettings` only.

    Parameters
    ----------
    settings : CalibrationSettings, optional
        The door's ``settings`` argument.
    **keywords
        The door's settings keywords as received: ``UNSET.<name>`` (or None for ``from_logits``,
        ``multilabel``, ``next_token``) where the caller gave none.

    Returns
    -------
    CalibrationSettings
        ``settings`` if given, else the settings of the keywords (defaults where not given).

    Raises
    ------
    ValueError
        When ``settings`` and a keyword are both given (naming both values, whether they agree
        or not), a keyword is not a setting, ``settings`` is not a :class:`CalibrationSettings`,
        or a value is bad (naming the setting).

    Examples
    --------
    >>> resolve_settings(n_bins=10, theta=UNSET.theta).n_bins
    10
    >>> resolve_settings(CalibrationSettings(n_bins=10), n_bins=UNSET.n_bins).n_bins
    10
    """
    unknown = sorted(set(keywords) - set(names()))
    if unknown:
        raise ValueError(f"unknown settings {unknown}; known: {list(names())}")
    given = given_keywords(keywords)
    if settings is None:
        return CalibrationSettings(**given)
    if not isinstance(settings, CalibrationSettings):
        raise ValueError(f"`settings` must be a CalibrationSettings, got {type(settings).__name__}")
    if given:
        both = ", ".join(f"`{k}={v!r}` and `settings.{k}={getattr(settings, k)!r}`" for k, v in given.items())
        raise ValueError(f"{both}: give `settings` or the settings as keywords, not both")
    return settings


def either(settings: CalibrationSettings | None, keywords: dict[str, Any]) -> CalibrationSettings:
    """Resolve ``settings`` and a dict of settings keywords: :func:`resolve_settings` (kept for its callers).

    Parameters
    ----------
    settings : CalibrationSettings or None
        The ``settings`` argument.
    keywords : dict of str to object
        The door's settings keywords as received.

    Returns
    -------
    CalibrationSettings
    """
    return resolve_settings(settings, **keywords)


def renamed(old: str, value: Any, new: str, current: Any, where: str) -> Any:
    """Resolve a deprecated keyword ``old`` of ``where`` to its one name ``new``.

    Giving both names is a :class:`ValueError` naming both values, even when ``new`` holds its
    default (the door's default is ``UNSET.<new>``): which one was meant cannot be told.

    Parameters
    ----------
    old : str
        The deprecated name.
    value : object
        What was passed as ``old`` (None when it was not).
    new : str
        The current name.
    current : object
        What was passed as ``new`` (``UNSET.<new>`` when it was not).
    where : str
        The door, for the warning (``"ace()"``).

    Returns
    -------
    object
        ``current`` when ``old`` was not given; else ``value``, after a :class:`FutureWarning`.
    """
    if value is None:
        return current
    if not is_unset(current):
        raise ValueError(
            f"`{old}={value!r}` and `{new}={current!r}`: `{old}` is the old name of `{new}`; give `{new}` only"
        )
    warnings.warn(
        f"{where}: `{old}` is renamed `{new}` (the name every calibkit entry point uses); "
        f"`{old}` will be removed in the next release",
        FutureWarning,
        stacklevel=3,
    )
    return value


def settings_keywords(scope: dict[str, Any]) -> dict[str, Any]:
    """Pick a door's settings keywords out of its ``locals()``, for :func:`either`.

    Every door lists the settings as keyword arguments of the same names; this reads them by
    name instead of each door copying the list.

    Parameters
    ----------
    scope : dict
        The door's ``locals()`` at its first line.

    Returns
    -------
    dict of str to object
    """
    return {name: scope[name] for name in names() if name in scope}
