"""The one page design of every HTML report (calibkit.plots.pages): its structure, checked on the HTML.

``check_page`` is what every report's page must satisfy (the browser tests of
tests/test_html_report_slow.py check the same pages as a reader sees them): the summary first, a
table of contents whose every entry leads somewhere, no section without content, alt text on every
image, nothing fetched from a network, every metric link pointing at a section of the metric guide,
no table wider than the page (``table_min_width``: every column of every table visible at 1280 px).
"""

import csv
import html
import json
import re
from pathlib import Path

import numpy as np
import pytest

from calibkit.plots import pages
from calibkit.plots.diagrams import bin_band
from calibkit.verdicts.comparison import compare_calibrators
from calibkit.verdicts.reporting import write_report

GUIDE = Path(__file__).resolve().parents[1] / "docs" / "guide" / "choosing_a_metric.rst"


def guide_anchors() -> set[str]:
    """The ids Sphinx gives the guide's sections and inline targets (docutils' rule: lower case, runs of
    other characters to one hyphen)."""
    text = GUIDE.read_text()
    titles = re.findall(r"^(\S.*)\n[~\-=^]{3,}$", text, flags=re.M)
    targets = re.findall(r"_`([^`]+)`", text)
    return {re.sub(r"[^a-z0-9]+", "-", t.lower()).strip("-") for t in [*titles, *targets]}


def sections_of(page: str) -> list[tuple[str, str]]:
    return re.findall(r'<section id="([^"]+)"[^>]*>(.*?)</section>', page, flags=re.S)


# What a table needs at the least, in a 1280 px window: its columns side by side, each as wide as
# its widest run of text that cannot wrap (a number and its interval do not; a header wraps at its
# spaces and at the "_" of a metric's name), in the tables' font (0.84rem: about 8 px a character,
# bold headers included), plus each cell's padding (2 x 0.5rem). The page's text column is
# 1260 px less its padding (2 x 1.5rem); a table wider than that is cut off inside its box (which
# scrolls alone: the page does not, so a browser's page-width check does not see it).
PAGE_PX, CHAR_PX, CELL_PX = 1260 - 48, 8.0, 16.0


def _runs(cell: str, attrs: str) -> list[float]:
    """The cell's runs of text that cannot wrap, in characters (an interval's smaller font counted)."""
    spans = re.findall(r'<span class="(v|ci)">(.*?)</span>', cell, flags=re.S)
    if spans:
        return [len(html.unescape(re.sub(r"<[^>]+>", "", t))) * (0.78 if k == "ci" else 1.0) for k, t in spans]
    text = html.unescape(re.sub(r"<[^>]+>", "", cell.replace("<wbr>", "\x00")))
    nowrap = re.search(r'class="[^"]*\b(n|verdict)\b', attrs)
    return [len(run) for run in ([text] if nowrap else re.split(r"[ \x00]", text))]


def table_min_width(table: str) -> float:
    """The least width in px of an HTML table as the pages write it (the estimate described above)."""
    widest: dict[int, float] = {}
    for row in re.findall(r"<tr\b[^>]*>(.*?)</tr>", table, flags=re.S):
        if "colspan=" in row:  # a group's heading row spans the table
            continue
        for j, (_, attrs, cell) in enumerate(re.findall(r"<(th|td)\b([^>]*)>(.*?)</\1>", row, flags=re.S)):
            widest[j] = max(widest.get(j, 0.0), *_runs(cell, attrs))
    return sum(CHAR_PX * w + CELL_PX for w in widest.values())


def check_page(page: str) -> None:
    """Assert what every report page must be (see the module docstring)."""
    sections = sections_of(page)
    assert sections and sections[0][0] == "summary", "the summary is not the first section"
    assert page.index('id="summary"') < page.index("<main>")
    assert re.search(r'<p class="answer">.{20,}?</p>', sections[0][1], flags=re.S), "no one-sentence answer"
    ids = set(re.findall(r'id="([^"]+)"', page))
    for target in re.findall(r'<nav class="toc".*?</nav>', page, flags=re.S)[0:1]:
        for ref in re.findall(r'href="#([^"]+)"', target):
            assert ref in ids, f"the table of contents leads nowhere: #{ref}"
    for ident, body in sections[1:]:
        rest = re.sub(r"<h2>.*?</h2>|<p class=\"note\">.*?</p>", "", body, flags=re.S)
        assert re.search(r"<(table|figure|img|p|ul|details)\b", rest), f"section {ident!r} is empty"
        assert "<tbody></tbody>" not in body, f"section {ident!r} has a table without rows"
    images = re.findall(r"<img\b[^>]*>", page)
    for image in images:
        assert re.search(r'alt="[^"]{10,}"', image), f"an image without alt text: {image[:80]}"
        assert re.search(r'src="data:image/png;base64,', image), "an image not inlined"
    assert not re.search(r"<link\b|<script\b[^>]*\bsrc=|@import|url\(\s*['\"]?https?:", page), "fetches from a network"
    assert not re.search(r'\bsrc="(?!data:)', page), "a resource not inlined"
    for table in re.findall(r"<table\b.*?</table>", page, flags=re.S):
        width = table_min_width(table)
        head = re.sub(r"<[^>]+>", " ", re.search(r"<tr\b.*?</tr>", table, flags=re.S).group(0)).split()
        assert width <= PAGE_PX, f"a table wider than the page ({width:.0f} px > {PAGE_PX} px): {' '.join(head)[:120]}"
    anchors = guide_anchors()
    for href in re.findall(r'<a class="metric" href="([^"]+)"', page):
        assert href.startswith(pages.DOCS_URL + pages.METRIC_GUIDE + "#"), href
        assert href.split("#")[1] in anchors, f"no such section in the metric guide: {href}"


def overconfident(n: int, seed: int = 0, k: int = 4) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(seed)
    z = rng.normal(size=(n, k)) * 1.5
    y = (z + rng.gumbel(size=z.shape)).argmax(axis=1)
    return z * 2.5, y  # sharpened: over-confident


def tiny_png(path: Path) -> Path:
    from calibkit.plots.figures import new_figure

    fig = new_figure(figsize=(2, 2))
    fig.subplots().plot([0, 1], [0, 1])
    fig.savefig(path, dpi=40)
    return path


def test_a_page_leads_with_its_summary_and_drops_what_has_no_content(tmp_path):
    data = tmp_path / "numbers.csv"
    data.write_text("bin,count\n0,3\n")
    figure = pages.figure(tiny_png(tmp_path / "f.png"), "a line from corner to corner", "one line", data=data)
    head = pages.summary(pages.Markup("<b>Over-confident</b>: ECE 0.146."), ["a file", "200 rows"],
                         [("ece", 0.146, (0.139, 0.152)), ("brier", 0.2, None, "brier after TS")])  # fmt: skip
    page = pages.report_page(
        "a title",
        head,
        [
            pages.Section("Reliability", [pages.side_by_side(pages.html_table(["m", "v"], [["ece", 0.1]]), figure)]),
            pages.Section("Conformal prediction sets", [""], "Sets at 90%."),  # nothing to show: no section
            pages.Section(
                "Verdicts", [pages.verdict_table([{"verdict": "holds", "claim": "TS helps", "numbers": "20/20"}])]
            ),
        ],  # fmt: skip
        files=[tmp_path / "table.md"],
    )
    check_page(page)
    assert [ident for ident, _ in sections_of(page)] == ["summary", "reliability", "verdicts", "files"]
    assert "Conformal" not in page and "Sets at 90%" not in page  # neither the section nor its note nor its entry
    assert re.search(r'<td class="verdict holds"><span class="mark"', page)  # a coloured mark per verdict
    assert '<span class="ci">[0.1390, 0.1520]</span>' in page  # the interval on its own line, below the value
    assert f'href="{pages.DOCS_URL}guide/choosing_a_metric.html#brier-score-and-nll">brier after TS</a>' in page
    assert 'download="numbers.csv" href="data:text/csv;base64,' in page  # the figure's numbers travel with the page
    assert "@media print" in page and "prefers-color-scheme:dark" in page


def test_a_long_table_shows_its_first_rows_and_folds_the_rest():
    rows = [[f"class {i}", 100 - i] for i in range(25)]
    text = pages.collapsed_table(["class", "n"], rows, keep=20, what="classes")
    shown, folded = text.split("<details>")
    assert shown.count("<tr>") == 21 and folded.count("<tr>") == 6  # the header and 20; the header and 5
    assert "<summary>5 more classes</summary>" in folded
    assert "<details>" not in pages.collapsed_table(["class", "n"], rows[:20], keep=20)


def test_every_metric_the_reports_show_links_to_a_section_of_the_guide():
    from calibkit.verdicts.comparison import TABLE_METRICS

    anchors = guide_anchors()
    assert set(TABLE_METRICS) <= set(pages.METRIC_ANCHORS)
    missing = {m: a for m, a in pages.METRIC_ANCHORS.items() if a not in anchors}
    assert not missing, f"anchors the guide does not have: {missing}"
    assert pages.metric_link("not_a_metric") == "not_a_metric"  # no link where there is no entry


def test_the_page_of_a_predictions_file_says_nothing_of_calibrators(tmp_path):
    z, y = overconfident(600)
    comparison = compare_calibrators(z, y, z, y, methods=("uncalibrated",), sets=False, bootstrap=30, seed=1)
    paths = write_report(comparison, tmp_path, "calibkit report: preds.parquet")
    page = paths["html"].read_text()
    check_page(page)
    answer = re.search(r'<p class="answer">(.*?)</p>', page).group(1)
    ece, (low, high) = comparison.rows["uncalibrated"]["ece"], comparison.intervals["uncalibrated"]["ece"]
    assert answer.startswith("<b>Over-confident</b>: ") and f"ECE {ece:.3f} [{low:.3f}, {high:.3f}]" in answer
    assert "worst class '" in answer
    assert "calibrator" not in sections_of(page)[0][1].lower()  # a predictions file has none
    assert "Conformal" not in page and "Conformal" not in paths["markdown"].read_text()  # no sets measured
    assert "calibrator" not in paths["markdown"].read_text().lower()
    assert [ident for ident, _ in sections_of(page)][:2] == ["summary", "reliability"]  # the first figure next
    assert len(page.encode()) < 2_000_000
    with open(paths["reliability_data"]) as f:  # the numbers behind the binned diagram
        rows = list(csv.DictReader(f))
    assert sum(int(r["count"]) for r in rows) == len(y)
    filled = [r for r in rows if int(r["count"])]
    assert all(float(r["band_low"]) <= float(r["accuracy"]) <= float(r["band_high"]) for r in filled)


def test_with_calibrators_the_answer_names_the_best_and_what_it_does(tmp_path):
    z, y = overconfident(800, seed=3)
    comparison = compare_calibrators(z[:400], y[:400], z[400:], y[400:], methods=("uncalibrated", "ts"), sets=False)
    page = write_report(comparison, tmp_path, "a model").get("html").read_text()
    check_page(page)
    after = comparison.rows["ts"]["ece"]
    assert f"temperature scaling (TS), lowers it to {after:.3f} on the test rows." in page
    assert "1 calibrator fitted on 400 validation predictions" in page


def test_the_bootstrap_band_of_a_bin_is_the_rows_bootstrap():
    """A bin's accuracy resampled with its rows is Binomial(n, acc) / n: the band from the sums matches
    a bootstrap of the rows themselves."""
    rng = np.random.default_rng(0)
    right = rng.random(300) < 0.7
    low, high = bin_band(np.array([300, 0]), np.array([right.mean(), np.nan]), bootstrap=4000, seed=1)
    rows = rng.choice(right, size=(4000, 300)).mean(axis=1)
    assert low[0] == pytest.approx(np.percentile(rows, 2.5), abs=0.01)
    assert high[0] == pytest.approx(np.percentile(rows, 97.5), abs=0.01)
    assert np.isnan(low[1]) and np.isnan(high[1])


def test_the_page_of_shards_draws_its_diagram_from_the_streamed_sums(tmp_path, capsys):
    import json

    from calibkit.cli import main

    z, y = overconfident(900, seed=5)
    shards = tmp_path / "shards"
    shards.mkdir()
    for i in range(3):
        np.savez(shards / f"{i}.npz", logits=z[i::3], labels=y[i::3])
    out = tmp_path / "out"
    assert main(["report", "--predictions", str(shards), "--quiet", "--output", str(out)]) == 0
    assert f"html: {out / 'index.html'}" in capsys.readouterr().out
    page = (out / "index.html").read_text()
    check_page(page)
    report = json.loads((out / "report.json").read_text())
    answer = re.search(r'<p class="answer">(.*?)</p>', page).group(1)
    assert answer.startswith("<b>Over-confident</b>: ")
    assert f"ECE {report['ece']:.3f} over 900 predictions in 3 shards, worst class '" in answer
    assert [ident for ident, _ in sections_of(page)] == ["summary", "reliability", "metrics", "classes", "files"]
    assert "no intervals" in page and "calibrator" not in page.lower()  # none computed, none fitted
    with open(out / "reliability.csv") as f:  # the numbers behind the diagram: every streamed row, once
        rows = list(csv.DictReader(f))
    assert sum(int(r["count"]) for r in rows) == len(y)
    filled = [r for r in rows if int(r["count"])]
    assert all(float(r["band_low"]) <= float(r["accuracy"]) <= float(r["band_high"]) for r in filled)
    ece = sum(int(r["count"]) * abs(float(r["accuracy"]) - float(r["confidence"])) for r in filled) / len(y)
    assert ece == pytest.approx(report["ece"], rel=1e-9)  # the diagram is of the reported ECE's bins


def test_the_page_of_a_multilabel_head_leads_with_its_macro_ece_and_worst_label(tmp_path, capsys):
    import json

    from calibkit.cli import main

    rng = np.random.default_rng(2)
    z = rng.normal(size=(800, 5)) * 2
    y = (rng.random(z.shape) < 1 / (1 + np.exp(-z / 3))).astype(np.float32)  # sharpened logits
    y[:, 4] = rng.random(800) < 0.02  # a rare label: too few rows to be the worst
    np.savez(tmp_path / "ml.npz", logits=z, labels=y)
    out = tmp_path / "out"
    argv = ["multilabel", "--predictions", str(tmp_path / "ml.npz"), "--bootstrap", "20", "--output", str(out)]
    assert main(argv) == 0
    page = (out / "report.html").read_text()
    check_page(page)
    report = json.loads((out / "report.json").read_text())
    low, high = report["intervals"]["macro"]["ece"]
    ece = np.asarray(report["per_label"]["ece"])
    worst = int(np.argmax(ece[:4]))
    answer = re.search(r'<p class="answer">(.*?)</p>', page).group(1)
    assert answer.startswith("<b>Calibration</b>: ")  # a probability of presence has no over/under-confidence
    assert f"ECE {report['macro']['ece']:.3f} [{low:.3f}, {high:.3f}] (macro over 5 labels" in answer
    assert f"worst label {worst} ({ece[worst]:.2f})" in answer
    ids = [ident for ident, _ in sections_of(page)]
    assert ids == ["summary", "reliability-per-label", "averages", "labels-section", "files"]
    with open(out / "reliability.csv") as f:  # the four labels of largest support, each over every row
        rows = list(csv.DictReader(f))
    panels = {r["panel"] for r in rows}
    assert len(panels) == 4 and not any(p.startswith("label 4 ") for p in panels)
    assert all(sum(int(r["count"]) for r in rows if r["panel"] == p) == 800 for p in panels)
    assert page.count('<a class="metric"') >= 2 * len(report["per_label"])  # each metric named links to the guide


def headline_of(page: str) -> list[str]:
    """The names of the summary's headline numbers, as the page shows them."""
    numbers = re.search(r'<ul class="headline">(.*?)</ul>', page, flags=re.S).group(1)
    return [re.sub(r"<[^>]+>", "", k) for k in re.findall(r'<span class="k">(.*?)</span>', numbers)]


def both_ways(n: int = 4000, seed: int = 0) -> tuple[np.ndarray, np.ndarray]:
    """Two-class logits whose bins lean both ways: under-confident below 0.75, over-confident above."""
    rng = np.random.default_rng(seed)
    p = rng.uniform(0.5, 1.0, n)
    right = rng.random(n) < np.where(p < 0.75, p + 0.15, p - 0.15).clip(0, 1)
    return np.log(np.stack([1 - p, p], axis=1)), right.astype(np.int64)


def test_the_direction_is_named_only_when_the_interval_excludes_0():
    assert pages.direction(-0.01, (-0.03, 0.02)) == "Neither over- nor under-confident on average"
    assert pages.direction(0.01, (-0.02, 0.03)) == "Neither over- nor under-confident on average"
    assert pages.direction(-0.01, (-0.03, -0.001)) == "Over-confident"
    assert pages.direction(0.01, (0.001, 0.03)) == "Under-confident"
    assert pages.direction(-0.01) == "Over-confident"  # no interval: the sign alone
    assert pages.direction(-0.01, (float("nan"), float("nan"))) == "Over-confident"
    assert pages.direction(float("nan"), (-0.03, 0.02)) == "Calibration"
    assert pages.direction(1e-16, ece=1e-16) == "Neither over- nor under-confident on average"  # 0 to round-off
    line = pages.answer_line(-0.01, 0.05, esce_interval=(-0.03, 0.02), ece_interval=(0.04, 0.06))
    assert line.startswith("<b>Neither over- nor under-confident on average</b>: ECE 0.050 [0.040, 0.060]")


def test_where_every_bin_leans_one_way_the_headline_leaves_esce_out_and_says_it_in_words(tmp_path):
    from calibkit.metrics.registry import HEADLINE_SHOWN, headline, leans_one_way

    one_way = {"ece": 0.2, "esce": -0.2, "cece": 0.1, "brier": 0.3, "accuracy": 0.7, "nll": 0.9, "aurc": 0.2}
    assert leans_one_way(one_way) and leans_one_way({**one_way, "esce": 0.2 * (1 - 1e-9)})
    assert headline(one_way) == ["ece", "cece", "brier", "accuracy", "nll"]  # the next one takes ESCE's place
    assert not leans_one_way({**one_way, "esce": -0.15}) and not leans_one_way({"ece": 0.2})
    assert headline({**one_way, "esce": -0.15}) == ["ece", "cece", "esce", "brier", "accuracy"][:HEADLINE_SHOWN]
    assert pages.direction(-0.2, (-0.25, -0.15), ece=0.2) == "Over-confident in every bin"
    assert pages.direction(0.2, ece=0.2) == "Under-confident in every bin"
    assert pages.direction(-0.15, (-0.2, -0.1), ece=0.2) == "Over-confident"
    assert pages.direction(-0.01, (-0.03, 0.02), ece=0.01) == "Neither over- nor under-confident on average"

    for name, (z, y), leans in [("one way", overconfident(800, seed=3), True), ("both ways", both_ways(), False)]:
        comparison = compare_calibrators(z, y, z, y, methods=("uncalibrated",), sets=False)
        row = comparison.rows["uncalibrated"]
        assert leans_one_way(row) is leans, name
        page = write_report(comparison, tmp_path / name.replace(" ", "_"), "preds").get("html").read_text()
        check_page(page)
        answer = re.search(r'<p class="answer">(.*?)</p>', page).group(1)
        shown = headline_of(page)
        if leans:  # ESCE would be -ECE: one number twice
            assert abs(row["esce"]) == pytest.approx(row["ece"], rel=1e-9)
            assert "esce" not in shown and len(shown) == HEADLINE_SHOWN
            assert answer.startswith("<b>Over-confident in every bin</b>: ")
        else:
            assert abs(row["esce"]) < 0.5 * row["ece"]
            assert "esce" in shown and "in every bin" not in answer


def test_every_table_of_the_generations_page_fits_the_page_and_shows_every_metric(tmp_path, capsys):
    """Its one table of every metric was 17 columns wide (1,400 px at 1280): the last ones cut off."""
    from calibkit.cli import main
    from calibkit.cli.report_generations import PAGE_FAMILIES, format_generations_table
    from tests.test_generations import answers, write_jsonl

    file = write_jsonl(tmp_path / "gen.jsonl", answers(300))
    assert (
        main(
            [
                "generations",
                "--answers",
                str(file),
                "--bootstrap",
                "20",
                "--resplits",
                "0",
                "--output",
                str(tmp_path / "o"),
            ]
        )
        == 0
    )
    page = (tmp_path / "o" / "report.html").read_text()
    check_page(page)  # no table wider than the page
    report = json.loads((tmp_path / "o" / "report.json").read_text())
    wide = pages.markdown_to_html(format_generations_table(report))[0]  # the old layout: caught by the check
    assert table_min_width(wide) > PAGE_PX
    metrics = re.search(r'<section id="every-metric">(.*?)</section>', page, flags=re.S).group(1)
    tables = re.findall(r"<table\b.*?</table>", metrics, flags=re.S)
    assert [re.search(r"<caption>(.*?)</caption>", t).group(1) for t in tables[: len(PAGE_FAMILIES)]] == [
        title for title, _ in PAGE_FAMILIES
    ]
    heads = " ".join(re.sub(r"<[^>]+>", "", h) for t in tables for h in re.findall(r"<th\b[^>]*>(.*?)</th>", t))
    for name in ("kind", "answers", "without a confidence", "accuracy", "mean confidence", "ece", "ace", "brier",
                 "nll", "miscalibration", "discrimination", "aurc", "selective accuracy (80%)", "answer above (LTT)",
                 "answered", "PRR", "PRR@50%", "ROC AUC", "PR AUC (wrong)", "AUGRC", "risk at 80%",
                 "coverage at risk 0.1"):  # fmt: skip
        assert name in heads, name
    judge = report["pooled"]["sources"]["judge"]
    low, high = judge["intervals"]["ece"]
    assert f'<span class="v">{judge["ece"]:.4f}</span><span class="ci">[{low:.4f}, {high:.4f}]</span>' in tables[1]
    low, high = judge["intervals"]["prr"]  # the rejection family, with its intervals
    assert f'<span class="v">{judge["prr"]:.4f}</span><span class="ci">[{low:.4f}, {high:.4f}]</span>' in tables[4]
    for task in ("math", "trivia"):  # a group of rows per task, each with every source
        assert f"task &#x27;{task}&#x27;: {report['tasks'][task]['questions']:,} questions" in tables[0]
    assert tables[0].count('<td class="text">judge</td>') == 3  # pooled, math, trivia


def test_the_multiple_choice_tables_fit_the_page_with_long_task_names(tmp_path, capsys):
    """A harness's task names are long (mmlu_high_school_government_and_politics): a table of tasks
    breaks them at "_" rather than grow past the page."""
    from calibkit.cli import main
    from tests.test_multiple_choice import tempered_questions

    data = tempered_questions(n=200)
    names = np.where(np.arange(200) % 2, "mmlu_high_school_government_and_politics", "hellaswag")
    rows = [
        {"task": str(t), "choice_logprobs": [v * 2 for v in row if not np.isnan(v)], "gold": int(g)}
        for t, row, g in zip(names, data.loglik.tolist(), data.gold)
    ]
    file = tmp_path / "preds.jsonl"
    file.write_text("".join(json.dumps(r) + "\n" for r in rows))
    argv = ["choices", "--predictions", str(file), "--calibrate", "--resplits", "2", "--output", str(tmp_path / "o")]
    assert main(argv) == 0
    page = (tmp_path / "o" / "index.html").read_text()
    check_page(page)  # both tables (every metric, temperature scaling) within the page
    assert "<td>mmlu_<wbr>high_<wbr>school_<wbr>government_<wbr>and_<wbr>politics</td>" in page


def test_a_markdown_tables_intervals_go_below_their_values_so_six_methods_fit():
    """The multi-label demo's re-splits table (metrics x 6 methods, `mean [2.5 %, 97.5 %]` a cell) was
    1,280 px wide with each interval on its value's line; below it, as number() writes it, the table fits."""
    methods = ["uncalibrated", "TS (one T)", "WTS (per-type weights)", "TS per type", "Platt per type", "isotonic"]
    rows = "".join(f"| {m} |" + " 0.1234 [0.1111, 0.1356] |" * len(methods) + "\n" for m in ("macro_ece", "nll"))
    table = pages.markdown_to_html_table(f"| metric | {' | '.join(methods)} |\n|{'---|' * 7}\n{rows}")
    assert '<td class="n"><span class="v">0.1234</span><span class="ci">[0.1111, 0.1356]</span></td>' in table
    assert table_min_width(table) <= PAGE_PX
    bold = pages.markdown_to_html_table("| a | b |\n|---|---|\n| x | **0.5 [0.4, 0.6]** ▲ |\n| y | 7 |")
    assert '<span class="v"><b>0.5</b> ▲</span><span class="ci">[0.4, 0.6]</span>' in bold and '"n">7<' in bold
