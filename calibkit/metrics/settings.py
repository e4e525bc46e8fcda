"""The settings of every metric: one frozen, validated object, built once at each door.

Every entry point (the functional API, :func:`calibkit.calibration_report`, the accumulator,
the bootstrap, the ``evaluate`` modules, the callback, the CLI) turns its keyword arguments into
a :class:`CalibrationSettings` and passes that inward; nothing further in checks or renames a
setting. Each setting has one name everywhere. The names that some doors used before
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
    check_eps,
    check_ignore_index,
    check_non_negative,
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
    from_logits : bool, default False
        The inputs are logits: softmax (sigmoid for 1-D binary input) is applied on the fly.
    ignore_index : int, default -100
        Label of the positions to skip (token padding, as ``transformers`` pads).

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
    from_logits: bool = False
    ignore_index: int = -100

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
            "from_logits": check_bool(self.from_logits, "from_logits"),
            "ignore_index": check_ignore_index(self.ignore_index),
        }
        for name, value in checked.items():  # normalised (numpy ints become int, ...)
            object.__setattr__(self, name, value)

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


def either(settings: CalibrationSettings | None, keywords: CalibrationSettings) -> CalibrationSettings:
    """Choose between a door's ``settings`` argument and the settings built from its keywords.

    Parameters
    ----------
    settings : CalibrationSettings or None
        The ``settings`` argument.
    keywords : CalibrationSettings
        The settings built from the door's keyword arguments.

    Returns
    -------
    CalibrationSettings
        ``settings`` if given, else ``keywords``.

    Raises
    ------
    ValueError
        When both are given (``keywords`` away from the defaults), or ``settings`` is not a
        :class:`CalibrationSettings`.
    """
    if settings is None:
        return keywords
    if not isinstance(settings, CalibrationSettings):
        raise ValueError(f"`settings` must be a CalibrationSettings, got {type(settings).__name__}")
    if keywords != DEFAULTS:
        raise ValueError("give `settings` or the settings as keywords, not both")
    return settings


def renamed(old: str, value: Any, new: str, current: Any, default: Any, where: str) -> Any:
    """Resolve a deprecated keyword ``old`` of ``where`` to its one name ``new``.

    Giving both, with ``new`` away from its default, is a :class:`ValueError`: which one was
    meant cannot be told.

    Parameters
    ----------
    old : str
        The deprecated name.
    value : object
        What was passed as ``old`` (None when it was not).
    new : str
        The current name.
    current : object
        What was passed as ``new``.
    default : object
        ``new``'s default.
    where : str
        The door, for the warning (``"ace()"``).

    Returns
    -------
    object
        ``current`` when ``old`` was not given; else ``value``, after a :class:`FutureWarning`.
    """
    if value is None:
        return current
    if current != default:
        raise ValueError(f"`{old}` is the old name of `{new}`: give `{new}` only")
    warnings.warn(
        f"{where}: `{old}` is renamed `{new}` (the name every calibkit entry point uses); "
        f"`{old}` will be removed in the next release",
        FutureWarning,
        stacklevel=3,
    )
    return value
