"""Every confidence source of generated answers, once: its name, its kind, what it needs, its description.

A *source* is one number per answer that says how likely the answer is to be right. Each
:class:`Source` says what it is computed from (its kind), what that needs (the model's weights,
log-probabilities, several sampled answers, the answer's stated text), where calibkit computes
it (:data:`DOORS`) and what it is, in the one description that the command line's help, the
guide's table (docs/guide/generations.rst, checked equal to :func:`sources_table`) and the
readers' docs use. Everything that lists sources reads :data:`REGISTRY`: the readers of served
models and Inspect logs, the white-box scores, the agreement of samples, the verbalized parser,
``calibkit generations``/``calibkit served --confidence``, the Inspect plugin and the demos. A
new source is one entry here plus the function that computes it (see CONTRIBUTING.md).

A column of an answers file that is not a registered source is a *given* source (a tool's own
score), of kind ``given``. An unknown name gets one message listing the known ones
(:func:`check_source`); an old spelling (``Source.old_names``: ``letters``, the letters'
source as the Inspect reader and plugin once spelled it) is still read, with a
``FutureWarning``.
"""

from __future__ import annotations

import warnings
from collections.abc import Iterable
from dataclasses import dataclass

__all__ = [
    "AGREEMENT",
    "DOORS",
    "GIVEN",
    "KINDS",
    "LETTER",
    "NEEDS",
    "REGISTRY",
    "SIMILARITIES",
    "TOKENS",
    "VERBALIZED",
    "WHITEBOX",
    "Source",
    "check_source",
    "current_name",
    "lookup",
    "names",
    "source_kind",
    "sources_table",
]

KINDS = {
    "log-probabilities": "computed from the log-probabilities of the answer's tokens: a causal LM's weights give "
    "them, a served model or an Inspect log returns them",
    "white-box": "computed by running the model's weights on a further prompt",
    "verbalized": "stated by the model in the answer's text",
    "samples": "the agreement or the similarity of several answers sampled for one question",
    "given": "a column of the answers' file (a tool's own score: LM-Polygraph, uqlm, a judge), used as it is",
}
"""The kinds of source, by what they are computed from (``Generations.kinds`` holds one of these)."""

GIVEN = "given"
"""The kind of a column of an answers file that is not a registered source."""

NEEDS = ("weights", "log-probabilities", "samples", "text")
"""What a source can need: the model's weights, the answer tokens' log-probabilities (from the weights or
returned by a server), several sampled answers a question, the answer's text."""

DOORS = {
    "model": "computed with a causal LM (calibkit.lm.generations.whitebox_confidence; calibkit generations with "
    "the model)",
    "served": "read from a served model's returned log-probabilities (calibkit.lm.served.read_served; calibkit served)",
    "inspect": "read from an Inspect log's log-probabilities (calibkit.lm.inspect_logs.read_inspect_logs; the "
    "Inspect plugin's calibrated(source=...))",
    "text": "parsed from any answer's text (calibkit.lm.generations.verbalized_confidence)",
    "samples": "from several sampled answers a question (calibkit.lm.generations.read_agreement; calibkit generations)",
}
"""Where calibkit computes a source, each with its function and command."""

SIMILARITIES = ("exact", "jaccard", "rouge_l")
"""The built-in similarities of sampled answers that the consistency sources are computed over
(:mod:`calibkit.lm.generations.similarity`; a callable is the fourth kind)."""


@dataclass(frozen=True)
class Source:
    """One confidence source of the registry.

    Parameters
    ----------
    name : str
        Its one name: its key in every report, every reader's output and every ``--confidence``.
    kind : str
        One of :data:`KINDS`.
    needs : frozenset of str
        What it is computed from, of :data:`NEEDS`.
    description : str
        What it is, in one sentence: the command line's help and the guide's table say it.
    doors : tuple of str
        Where calibkit computes it, of :data:`DOORS`, in the order the description reads.
    choices : bool
        Only for a multiple-choice answer (the letters' distribution).
    old_names : tuple of str
        Spellings still read, with a ``FutureWarning``.
    """

    name: str
    kind: str
    needs: frozenset[str]
    description: str
    doors: tuple[str, ...]
    choices: bool = False
    old_names: tuple[str, ...] = ()


_LOGPROBS = frozenset({"log-probabilities"})
_SAMPLES = frozenset({"samples"})

REGISTRY: tuple[Source, ...] = (
    Source(
        "sequence",
        "log-probabilities",
        _LOGPROBS,
        "the answer's probability: exp of its tokens' summed log-probabilities after the question",
        ("model", "served", "inspect"),
    ),
    Source(
        "sequence_normalized",
        "log-probabilities",
        _LOGPROBS,
        "the geometric mean of the answer's token probabilities, which does not fall with its length",
        ("model", "served", "inspect"),
    ),
    Source(
        "least_token",
        "log-probabilities",
        _LOGPROBS,
        "the probability of the answer's least probable token",
        ("served", "inspect"),
    ),
    Source(
        "letter",
        "log-probabilities",
        _LOGPROBS,
        "multiple choice: the chosen letter's share of the distribution over the choice letters at its position "
        "(from the top log-probabilities)",
        ("served", "inspect"),
        choices=True,
        old_names=("letters",),
    ),
    Source(
        "ptrue",
        "white-box",
        frozenset({"weights"}),
        "P(True): the model asked whether the answer is true (LM-Polygraph's prompt), True's probability "
        "renormalised over True and False",
        ("model",),
    ),
    Source(
        "verbalized",
        "verbalized",
        frozenset({"text"}),
        'the confidence the answer states ("Confidence: 80%"), parsed from its text; NaN where it states none',
        ("text",),
    ),
    Source(
        "agreement",
        "samples",
        frozenset({"samples"}),
        "the majority answer's share of a question's sampled answers",
        ("samples",),
    ),
    Source(
        "semantic_entropy",
        "samples",
        frozenset({"samples"}),
        "exp(-SE) of the semantic entropy over the groups of a question's sampled answers that agree",
        ("samples",),
    ),
    Source(
        "lexsim_rouge_l",
        "samples",
        _SAMPLES,
        "LexSim: the mean ROUGE-L F-measure over the pairs of a question's sampled answers "
        "(LM-Polygraph's LexicalSimilarity, minus its sign)",
        ("samples",),
    ),
    Source(
        "lexsim_jaccard",
        "samples",
        _SAMPLES,
        "LexSim: the mean Jaccard index of the word sets over the pairs of a question's sampled answers",
        ("samples",),
    ),
    Source(
        "num_sem_sets",
        "samples",
        _SAMPLES,
        "1 / NumSemSets: one over the number of sets of sampled answers linked by the similarity both "
        "ways (above 1/2, or entailment above contradiction)",
        ("samples",),
    ),
    Source(
        "eigv",
        "samples",
        _SAMPLES,
        "1 / EigV: one over the sum of max(0, 1 - eigenvalue) of the normalised Laplacian of the "
        "sampled answers' similarity graph",
        ("samples",),
    ),
    Source(
        "deg",
        "samples",
        _SAMPLES,
        "1 - Deg: the sampled answers' mean similarity, each to itself included (the degree matrix's)",
        ("samples",),
    ),
    Source(
        "ecc",
        "samples",
        _SAMPLES,
        "1 / (1 + Ecc^2): Ecc the eccentricity of the answers in the Laplacian's eigenvectors of eigenvalue below 0.9",
        ("samples",),
    ),
    Source(
        "kle",
        "samples",
        _SAMPLES,
        "k^-KLE: one over the effective number of meanings in the von Neumann entropy of the similarity "
        "graph's heat kernel",
        ("samples",),
    ),
)
"""Every confidence source, in the order of every output."""

_BY_NAME = {s.name: s for s in REGISTRY}
_OLD = {old: s.name for s in REGISTRY for old in s.old_names}


def names(door: str | None = None, *, kind: str | None = None, choices: bool | None = None) -> tuple[str, ...]:
    """Return the registered sources' names, in registry order, optionally only some.

    Parameters
    ----------
    door : str, optional
        Only those computed there (one of :data:`DOORS`).
    kind : str, optional
        Only those of this kind (one of :data:`KINDS`).
    choices : bool, optional
        Only those of multiple-choice answers (True) or of any answer (False).

    Returns
    -------
    tuple of str

    Raises
    ------
    ValueError
        On an unknown door or kind.
    """
    if door is not None and door not in DOORS:
        raise ValueError(f"`door`: unknown door {door!r}; known: {', '.join(DOORS)}")
    if kind is not None and kind not in KINDS:
        raise ValueError(f"`kind`: unknown kind {kind!r}; known: {', '.join(KINDS)}")
    return tuple(
        s.name
        for s in REGISTRY
        if (door is None or door in s.doors)
        and (kind is None or s.kind == kind)
        and (choices is None or s.choices == choices)
    )


TOKENS = names("served", choices=False)
"""The sources of every answer with returned log-probabilities (served models, Inspect logs)."""

LETTER = names("served", choices=True)[0]
"""The source of a multiple-choice answer: its letter's share of the letters' distribution."""

WHITEBOX = names("model")
"""The sources computed with a causal LM's weights."""

AGREEMENT = names("samples")
"""The sources computed from several sampled answers a question."""

VERBALIZED = names("text")[0]
"""The source the answer states in its text."""


def current_name(name: str, argument: str = "source") -> str:
    """Return a source's one name: an old spelling's current one (with a warning), any other name as it is.

    Parameters
    ----------
    name : str
        A source name as the user typed it (or a column name: returned as it is).
    argument : str, default "source"
        The argument it came in, for the warning.

    Returns
    -------
    str

    Warns
    -----
    FutureWarning
        When ``name`` is an old spelling (``letters``).
    """
    new = _OLD.get(name)
    if new is None:
        return name
    warnings.warn(
        f"`{argument}`: the confidence source {name!r} is renamed {new!r} (its one name in every reader, report "
        f"and option); {name!r} will be removed in the next release",
        FutureWarning,
        stacklevel=3,
    )
    return new


def check_source(
    name: str, argument: str = "source", among: Iterable[str] | None = None, present: Iterable[str] = ()
) -> str:
    """Return the one name of a source, or refuse an unknown one with the known ones listed.

    Parameters
    ----------
    name : str
        What the user gave.
    argument : str, default "source"
        The argument it came in (named in backticks: the command line names its flag).
    among : iterable of str, optional
        The sources this door computes (default: every registered one).
    present : iterable of str, default ()
        The sources the data holds (an answers file's columns, a reader's sources): known too,
        listed first, and taken as they are (a column named as an old spelling is that column).

    Returns
    -------
    str
        ``name``, or its current spelling (with a ``FutureWarning``).

    Raises
    ------
    ValueError
        One line: the unknown name and the known ones.
    """
    present = sorted(present)
    known = [s for s in (names() if among is None else among) if s not in present]
    if name in present:
        return name
    current = current_name(name, argument)
    if current in known or current in present:
        return current
    listed = [*(f"{s} (in the data)" for s in present), *known]
    raise ValueError(f"`{argument}`: unknown confidence source {name!r}; known: {', '.join(listed) or 'none'}")


def lookup(name: str, argument: str = "source") -> Source:
    """Return a registered source's entry (an old spelling's with a warning).

    Parameters
    ----------
    name : str
    argument : str, default "source"
        The argument it came in, for the messages.

    Returns
    -------
    Source

    Raises
    ------
    ValueError
        On a name that is not registered (:func:`check_source`'s message).
    """
    return _BY_NAME[check_source(name, argument)]


def source_kind(name: str) -> str:
    """Return a source's kind: its registry kind, else ``given`` (a column of a file).

    Parameters
    ----------
    name : str

    Returns
    -------
    str
        One of :data:`KINDS`.
    """
    found = _BY_NAME.get(name)
    return GIVEN if found is None else found.kind


def sources_table() -> str:
    """Return the guide's table of the sources (reStructuredText), generated from :data:`REGISTRY`.

    docs/guide/generations.rst holds it as it is (tests/test_sources.py checks).

    Returns
    -------
    str
    """
    lines = [
        ".. list-table::",
        "   :header-rows: 1",
        "   :widths: 18 14 14 16 38",
        "",
        "   * - source",
        "     - kind",
        "     - needs",
        "     - computed by",
        "     - what it is",
    ]
    rows = [(f"``{s.name}``", s.kind, [n for n in NEEDS if n in s.needs], s.doors, s.description) for s in REGISTRY]
    rows.append(("any other column", GIVEN, ["nothing"], ("the file",), KINDS[GIVEN]))
    for name, kind, needs, doors, description in rows:
        lines += [f"   * - {name}", f"     - {kind}", f"     - {', '.join(needs)}", f"     - {', '.join(doors)}"]
        lines += [f"     - {description}"]
    lines += ["", "Where calibkit computes them:", ""]
    for door, where in DOORS.items():
        lines += [f"- **{door}**: {where}"]
    return "\n".join(lines) + "\n"
