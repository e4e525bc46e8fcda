"""Served models: confidence from the log-probabilities an API returns.

Most models people evaluate are served (OpenAI, vLLM's server, most providers), so the weights are
not in the process; what the API gives instead is each token's log-probability and its
``top_logprobs`` alternatives. :func:`logprob_sources` turns them (OpenAI's chat shape) into the
sequence sources and, for multiple choice, the distribution over the choice letters with the mass
the API did not return and the bound it puts on the ECE; :func:`read_served` reads chat and legacy
completions (one JSON, JSON Lines, the Batch API's output with its input file, vLLM's server's
variants) as :class:`~calibkit.lm.generations.Generations` with these sources.
"""

from calibkit.lm.served.readers import SOURCES, ServedAnswers, read_served, served_kind
from calibkit.lm.served.sources import LETTER_STRIP, SENTINEL, LogprobSources, letter_of, logprob_sources

__all__ = [
    "LETTER_STRIP",
    "SENTINEL",
    "SOURCES",
    "LogprobSources",
    "ServedAnswers",
    "letter_of",
    "logprob_sources",
    "read_served",
    "served_kind",
]
