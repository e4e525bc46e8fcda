"""Slow, obviously correct references: plain Python loops straight from SPEC.md's formulas."""

from __future__ import annotations

import math

import numpy as np


def rows_of(probs, labels, *, from_logits=False, ignore_index=-100):
    """[(probability list, label)] after masking; 1-D binary becomes [1 - p, p]."""
    probs = np.asarray(probs, dtype=np.float64)
    labels = np.asarray(labels)
    binary = probs.ndim == 1
    flat = probs.reshape(-1, 1) if binary else probs.reshape(-1, probs.shape[-1])
    out = []
    for values, y in zip(flat.tolist(), labels.reshape(-1).tolist()):
        if y == ignore_index:
            continue
        if from_logits:
            if binary:
                p1 = 1.0 / (1.0 + math.exp(-values[0]))
                values = [1.0 - p1, p1]
            else:
                top = max(values)
                e = [math.exp(v - top) for v in values]
                values = [v / sum(e) for v in e]
        elif binary:
            values = [1.0 - values[0], values[0]]
        out.append((values, int(y)))
    return out, binary


EDGE_SHRINK = 1.0 - 2.0**-40  # SPEC.md: a value within 2**-40 above an edge m/M counts as on it


def bin_of(p, m):
    return min(max(math.ceil((p * m) * EDGE_SHRINK) - 1, 0), m - 1)


def top_pairs(rows, binary):
    """(confidence, outcome) per sample: top-label, or class-1 probability for binary 1-D."""
    pairs = []
    for p, y in rows:
        if binary:
            pairs.append((p[1], 1.0 if y == 1 else 0.0))
        else:
            pred = max(range(len(p)), key=lambda k: (p[k], -k))  # first index on ties
            pairs.append((max(p), 1.0 if pred == y else 0.0))
    return pairs


def bins(pairs, m):
    table = [[0, 0.0, 0.0] for _ in range(m)]
    for c, a in pairs:
        b = bin_of(c, m)
        table[b][0] += 1
        table[b][1] += c
        table[b][2] += a
    return table


def ece(pairs, m):
    n = len(pairs)
    return sum(cnt / n * abs(sa / cnt - sc / cnt) for cnt, sc, sa in bins(pairs, m) if cnt)


def mce(pairs, m):
    return max(abs(sa / cnt - sc / cnt) for cnt, sc, sa in bins(pairs, m) if cnt)


def esce(pairs, m):
    n = len(pairs)
    return sum(cnt / n * (sa / cnt - sc / cnt) for cnt, sc, sa in bins(pairs, m) if cnt)


def rbece(pairs, m, theta):
    gaps = [abs(sa / cnt - sc / cnt) for cnt, sc, sa in bins(pairs, m) if cnt > theta]
    return sum(gaps) / len(gaps) if gaps else float("nan")


def subset_ece(rows, binary, num_classes, m):
    """ECE_k: the top-label ECE on the subset y = k. Top-label for 1-D binary input too (rows are
    [1 - p, p]): there, the class-1 probability against y = 1 on the subset y = 0 is just the mean
    of p, no calibration error (SPEC.md)."""
    pairs = top_pairs(rows, False)
    out = []
    for k in range(num_classes):
        sub = [pair for pair, (_, y) in zip(pairs, rows) if y == k]
        out.append(ece(sub, m) if sub else float("nan"))
    return out


def class_summary(per_class, counts, overall):
    present = [(e, n) for e, n in zip(per_class, counts) if not math.isnan(e)]
    es = [e for e, _ in present]
    total = sum(es)
    return {
        "cece": sum(e * e for e in es) / total if total else 0.0,
        "msece": sum(es) / len(es),
        "wsece": sum(e * n for e, n in present) / sum(n for _, n in present),
        "ece_variance": sum((e - overall) ** 2 for e in es) / len(es),
    }


def sce(rows, num_classes, m):
    total = 0.0
    for k in range(num_classes):
        total += ece([(p[k], 1.0 if y == k else 0.0) for p, y in rows], m)
    return total / num_classes


def ace(rows, num_classes, r):
    per_class = []
    for k in range(num_classes):
        col = sorted((p[k], 1.0 if y == k else 0.0) for p, y in rows)
        # tied values share their mean outcome
        means = {}
        for v, o in col:
            means.setdefault(v, []).append(o)
        col = [(v, sum(means[v]) / len(means[v])) for v, _ in col]
        sizes = [len(part) for part in np.array_split(np.arange(len(col)), r)]
        gaps, start = [], 0
        for size in sizes:
            if size:
                chunk = col[start : start + size]
                gaps.append(abs(sum(o for _, o in chunk) / size - sum(v for v, _ in chunk) / size))
            start += size
        per_class.append(sum(gaps) / len(gaps))
    return sum(per_class) / num_classes


def membership(p, m, bins_total):
    w = 1.0 / bins_total
    t0, t1 = m * w, (m + 1) * w
    a, d = t0 - w / 4, t1 + w / 4
    return min(max(min((p - a) / (w / 2), 1.0, (d - p) / (w / 2)), 0.0), 1.0)


def fce(pairs, m):
    num = den = 0.0
    for b in range(m):
        g = sum(membership(c, b, m) for c, _ in pairs)
        if g == 0:
            continue
        acc = sum(membership(c, b, m) * a for c, a in pairs) / g
        conf = sum(membership(c, b, m) * c for c, _ in pairs) / g
        num += g * abs(acc - conf)
        den += g
    return num / den


def authors_membership(x, bin_index, bins_total):
    """Their ``fuzzy_binning`` (bihani-g/fce@10f95e0, paper_demo/calibration_metrics.py) and the
    ``skfuzzy.trapmf`` it calls, for one float64 value: their ticks, corners and branches."""
    part = 1 / bins_total
    ticks = [i * part for i in range(bins_total)] + [1.0]
    t0, t1 = ticks[bin_index], ticks[bin_index + 1]
    mid = (t0 + t1) / 2
    b = (t0 + mid) / 2
    c = (mid + t1) / 2
    a = (2 * t0) - b
    d = (2 * t1) - c
    y = 1.0
    if x <= b:  # trimf(x, [a, b, b])
        y = (x - a) / float(b - a) if a < x < b else (1.0 if x == b else 0.0)
    if x >= c:  # trimf(x, [c, c, d])
        y = (d - x) / float(d - c) if c < x < d else (1.0 if x == c else 0.0)
    if x < a or x > d:
        y = 0.0
    return y


def fce_authors(pairs, m):
    """The fuzzy-binning authors' ``fuzzy_calibration_error`` (paper_demo/calibration_metrics.py at
    bihani-g/fce@10f95e0), loop for loop: their memberships rounded by Python's ``round(mu, 3)``,
    accuracy and confidence sums over the correct predictions only, both divided by the bin's
    total membership."""
    mem = [[round(authors_membership(c, b, m), 3) for b in range(m)] for c, _ in pairs]
    num = den = 0.0
    for b in range(m):
        g = [row[b] for row in mem]
        total = sum(g)
        acc_sum = sum(g[i] for i, (_, a) in enumerate(pairs) if a == 1)
        conf_sum = sum(g[i] * c for i, (c, a) in enumerate(pairs) if a == 1)
        gap = abs(acc_sum / total - conf_sum / total) if total != 0 else 0
        num += total * gap
        den += total
    return num / den


def overconfidence(rows):
    wrong = []
    for p, y in rows:
        pred = max(range(len(p)), key=lambda k: (p[k], -k))
        if pred != y:
            wrong.append(max(p))
    return sum(wrong) / len(wrong) if wrong else float("nan")


def ecd(rows, eps=1e-12):
    total = 0.0
    for p, y in rows:
        total += sum(q * math.log(max(q, eps)) for q in p if q > 0) - math.log(max(p[y], eps))
    return total / len(rows)


def brier(rows, binary):
    if binary:
        return sum((p[1] - (1.0 if y == 1 else 0.0)) ** 2 for p, y in rows) / len(rows)
    return sum(sum((q - (1.0 if k == y else 0.0)) ** 2 for k, q in enumerate(p)) for p, y in rows) / len(rows)


def nll(rows, eps=1e-12):
    return sum(-math.log(max(p[y], eps)) for p, y in rows) / len(rows)


def accuracy(rows):
    return sum(1.0 for (p, y) in rows if max(range(len(p)), key=lambda k: (p[k], -k)) == y) / len(rows)
