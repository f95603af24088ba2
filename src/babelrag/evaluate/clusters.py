"""What counts as one independent sample, and statistics that resample, permute and count those.

A benchmark asks the same question many times: XQuAD's question in up to 8 languages, in the
country KBs and in the pooled one. Those rows are not independent — a question that is hard in
German is hard in Thai — so treating them as separate samples makes intervals about √copies too
narrow and p-values too small. The unit is therefore a *cluster*: the question (its ``tags.qid``,
shared by its translations; else its id), or, for claims about documents, its gold page or
article. Every statistic here resamples, flips or counts clusters; means stay means over rows.
"""
from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, Literal

import numpy as np

Unit = Literal["question", "page", "article"]
UNITS: tuple[Unit, ...] = ("question", "page", "article")


def cluster_key(row: Mapping[str, Any], unit: Unit = "question", default: str = "") -> str:
    """The cluster a golden question or run row belongs to. Pages are the gold pages (a question needing
    two pages is one cluster of its own pair); an article is a page's ``<title>`` before ``#``. A row with
    neither tag nor id is its own cluster (``default``: its position)."""
    tags = row.get("tags") or {}
    if unit == "question":
        return str(tags.get("qid") or row.get("id") or f"#{default}")
    pages = "|".join(sorted(row.get("gold_pages") or ())) or str(row.get("id") or f"#{default}")
    if unit == "page":
        return str(tags.get("page") or pages)
    return str(tags.get("article") or "|".join(sorted({page.split("#")[0] for page in pages.split("|")})))


def cluster_keys(rows: Sequence[Mapping[str, Any]], unit: Unit = "question") -> list[str]:
    return [cluster_key(row, unit, str(i)) for i, row in enumerate(rows)]


def per_cluster(values: Sequence[float], clusters: Sequence[str] | np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Each cluster's sum of ``values`` and its number of rows (clusters in first-seen order; given as an array of
    integer codes, in code order — the fast path for code that recomputes over subsets of the same rows)."""
    if len(values) != len(clusters):
        raise ValueError(f"{len(values)} values for {len(clusters)} cluster keys")
    if isinstance(clusters, np.ndarray) and clusters.dtype.kind in "iu":
        present, owner = np.unique(clusters, return_inverse=True)
        size = len(present)
    else:
        index: dict[str, int] = {}
        owner = np.array([index.setdefault(key, len(index)) for key in clusters], dtype=np.int64)
        size = len(index)
    data = np.asarray(values, dtype=np.float64)
    return np.bincount(owner, weights=data, minlength=size), np.bincount(owner, minlength=size).astype(np.float64)


def cluster_means(values: Sequence[float], clusters: Sequence[str]) -> np.ndarray:
    """One value per cluster: the mean of its rows (each question counted once)."""
    sums, counts = per_cluster(values, clusters)
    return sums / counts


def clustered_standard_error(values: Sequence[float], clusters: Sequence[str] | np.ndarray) -> float:
    """The standard error of the mean over rows of ``values``, each cluster one sample whatever its size (the
    cluster-robust error; with equal clusters, the plain error of the cluster means). Fewer than 2 clusters have
    no error to measure."""
    data = np.asarray(values, dtype=np.float64)
    sums, _ = per_cluster(data - data.mean(), clusters)
    if len(sums) < 2:
        raise ValueError("a standard error over clusters needs at least 2 clusters")
    return float(np.sqrt(len(sums) / (len(sums) - 1) * (sums * sums).sum()) / len(data))


def bootstrap_ci(values: Sequence[float], clusters: Sequence[str] | None = None, seed: int = 0,
                 resamples: int = 1000) -> tuple[float, float]:
    """Percentile-bootstrap 95 % interval of the mean over rows, resampling whole clusters (default: every
    row its own cluster). Eight identical copies of each cluster give the interval of one copy."""
    if len(values) == 0:
        return (float("nan"), float("nan"))
    sums, counts = per_cluster(values, clusters if clusters is not None else [str(i) for i in range(len(values))])
    rng = np.random.default_rng(seed)
    picks = rng.integers(0, len(sums), size=(resamples, len(sums)))
    means = sums[picks].sum(axis=1) / counts[picks].sum(axis=1)
    return float(np.percentile(means, 2.5)), float(np.percentile(means, 97.5))


def bootstrap_gap_ci(values: Sequence[float], in_first_group: Sequence[bool], clusters: Sequence[str], seed: int = 0,
                     resamples: int = 1000) -> tuple[float, float]:
    """Percentile-bootstrap 95 % interval of (mean of the first group's rows) − (mean of the others), resampling
    whole clusters. A question's translations can fall in both groups (on a scattered KB its English version
    may find its page in English while the others look across languages), so the two means are not
    independent and their intervals do not combine; resampling questions keeps each one's rows together.
    No interval (nan) with fewer than 2 clusters in a group, where it would show only the other group's noise, or
    when more than 5 % of the resamples miss a group (those are left out otherwise)."""
    if not (len(values) == len(in_first_group) == len(clusters)):
        raise ValueError(f"{len(values)} values, {len(in_first_group)} groups and {len(clusters)} cluster keys")
    data, first = np.asarray(values, dtype=np.float64), np.asarray(in_first_group, dtype=bool)
    if not np.isfinite(data).all():
        raise ValueError("a language gap over values that are not all finite")
    groups = [per_cluster(np.where(side, data, 0.0), clusters)[0] for side in (first, ~first)]
    counts = [per_cluster(side.astype(np.float64), clusters)[0] for side in (first, ~first)]
    if min(int(np.count_nonzero(count)) for count in counts) < 2:
        return (float("nan"), float("nan"))
    rng = np.random.default_rng(seed)
    picks = rng.integers(0, len(counts[0]), size=(resamples, len(counts[0])))
    means = []
    for sums, count in zip(groups, counts):
        picked = count[picks].sum(axis=1)
        means.append(np.divide(sums[picks].sum(axis=1), picked, out=np.full(resamples, np.nan), where=picked > 0))
    gaps = (means[0] - means[1])[np.isfinite(means[0] - means[1])]
    if len(gaps) < 0.95 * resamples:
        return (float("nan"), float("nan"))
    return float(np.percentile(gaps, 2.5)), float(np.percentile(gaps, 97.5))


def sign_flip_test(differences: Sequence[float], clusters: Sequence[str] | None = None, seed: int = 0,
                   resamples: int = 10_000) -> dict[str, float]:
    """Paired randomisation test of the mean difference over rows: under the null the two configurations
    are exchangeable per *cluster*, so each cluster's differences flip sign together. Two-sided, with the
    +1 correction; ``n`` is rows, ``clusters`` the independent units."""
    diff = np.asarray(differences, dtype=np.float64)
    if len(diff) == 0:
        return {"n": 0, "clusters": 0, "delta": float("nan"), "p": float("nan")}
    sums, counts = per_cluster(diff, clusters if clusters is not None else [str(i) for i in range(len(diff))])
    total = counts.sum()
    observed = abs(sums.sum() / total)
    if not np.any(diff):
        return {"n": len(diff), "clusters": len(sums), "delta": 0.0, "p": 1.0}
    rng = np.random.default_rng(seed)
    extreme = 0
    block = max(1, 2_000_000 // len(sums))  # bounded memory: blocks of resamples
    for start in range(0, resamples, block):
        signs = rng.choice((-1.0, 1.0), size=(min(block, resamples - start), len(sums)))
        extreme += int(np.sum(np.abs(signs @ sums / total) >= observed - 1e-12))
    return {"n": len(diff), "clusters": len(sums), "delta": float(diff.mean()), "p": (extreme + 1) / (resamples + 1)}
