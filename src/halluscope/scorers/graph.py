"""Graph and spectral black-box scores over the NLI similarity of the N+1 answers (Lin, Trivedi & Sun 2023,
"Generating with Confidence: Uncertainty Quantification for Black-box Large Language Models", arXiv 2305.19187).

The response y and its N samples are the m = N + 1 nodes of a weighted graph. With a_ij = P(entailment | premise
t_i, hypothesis t_j) from the shared NLI model (a_ii = 1, and 1 for two identical texts, which need no model), the
symmetric similarity is

    W_ij = (a_ij + a_ji) / 2,    D = diag(sum_j W_ij),    L = I - D^{-1/2} W D^{-1/2}  (normalized Laplacian)

as in the paper's code (zlin7/UQ-NLG, ``agreement_w`` at temperature 1), uqlm and LM-Polygraph. The pure functions
below take W (or a clustering) and return the paper's raw quantity; the methods report each as a hallucination
score in [0, 1] (higher = more likely hallucinated) by a fixed map stated in its MethodSpec, so every one is a
bounded ensemble component. For a fixed N the maps are monotone, so AUROC and PRR equal those of the raw quantity.

- ``num_sets`` (paper §4.1, NumSets): K = number of semantic sets of the m answers by bidirectional-entailment
  clustering (the same greedy clustering and the same NLI pairs as ``semantic_negentropy``), reported as
  (K - 1) / (m - 1).
- ``eigv`` (§4.2, U_EigV): sum_k max(0, 1 - lambda_k) over the eigenvalues of L, a continuous number of sets in
  [1, m]; reported as (U_EigV - 1) / (m - 1).
- ``degree`` (§4.2, the response-level C_Deg): 1 - (1/N) sum_{j>=1} W_0j, one minus the response's mean similarity
  to the samples. The paper's C_Deg(y) = D_00 / m includes W_00 = 1, so this is (m/N)(1 - C_Deg): the same ranking.
  (The set-level U_Deg = trace(mI - D)/m^2 is :func:`degree_set`, not a method: it does not look at the response.)
- ``eccentricity`` (§4.2, the response-level C_Ecc): the eigenvectors u_1..u_k of L with eigenvalue below 0.9 (the
  authors' default threshold) embed answer j as v_j = (u_1j, ..., u_kj); the score is ||v_0 - mean_j v_j||_2, the
  distance of the response's embedding from the centre. In [0, sqrt(1 - 1/m)) for any W (the embedding has
  orthonormal columns), so it is reported raw.

Every NLI pair is read through the shared :class:`~halluscope.models.nli.NLI` cache; the response components
(:mod:`halluscope.engine.components`) batch all pairs of an item in one pass, so a pair read by
``non_contradiction``, ``semantic_negentropy`` and these scores goes through the model once.
"""

from __future__ import annotations

from typing import Callable, Sequence

import numpy as np

GRAPH_METHODS = ("num_sets", "eigv", "degree", "eccentricity")
ECC_THRESHOLD = 0.9  # the authors' default eigenvalue threshold (zlin7/UQ-NLG default_params); not tuned here


# ------------------------------------------------------------------------------------------ the similarity matrix
def text_pairs(texts: Sequence[str]) -> list[tuple[str, str]]:
    """Every ordered (premise, hypothesis) pair of two different texts, each once: what the matrix reads."""
    uniq = list(dict.fromkeys(texts))
    return [(a, b) for a in uniq for b in uniq if a != b]


def entailment_matrix(nli, texts: Sequence[str]) -> np.ndarray:
    """A_ij = P(entailment | premise texts[i], hypothesis texts[j]) from the shared NLI model (one batched call over
    the pairs not yet cached); 1 on the diagonal and between identical texts (no model call)."""
    pairs = text_pairs(texts)
    p = dict(zip(pairs, nli.probs(pairs)[:, 0])) if pairs else {}
    m = len(texts)
    A = np.ones((m, m))
    for i in range(m):
        for j in range(m):
            if texts[i] != texts[j]:
                A[i, j] = p[(texts[i], texts[j])]
    return A


def symmetric_similarity(A: np.ndarray) -> np.ndarray:
    """W = (A + A^T) / 2 with a unit diagonal."""
    W = (np.asarray(A, float) + np.asarray(A, float).T) / 2
    np.fill_diagonal(W, 1.0)
    return W


def normalized_laplacian(W: np.ndarray) -> np.ndarray:
    """L = I - D^{-1/2} W D^{-1/2}, D = diag of the row sums of W (all >= 1 here: W_ii = 1)."""
    d = 1.0 / np.sqrt(np.asarray(W, float).sum(axis=1))
    return np.eye(len(W)) - d[:, None] * W * d[None, :]


# ------------------------------------------------------------------------------------------ the paper's quantities
def semantic_sets(m: int, same: Callable[[int, int], bool]) -> list[int]:
    """Greedy bidirectional-entailment clustering of answers 0..m-1: each answer joins the first set whose first
    member (its representative) it is ``same`` as, else opens a set; every answer is in exactly one set. Returns the
    set label of each answer (NumSets = the number of distinct labels). ``same(i, r)`` is asked only of
    representatives r, so a caller reading NLI lazily computes no more pairs than it needs."""
    reps: list[int] = []
    labels = []
    for i in range(m):
        for k, r in enumerate(reps):
            if same(i, r):
                labels.append(k)
                break
        else:
            reps.append(i)
            labels.append(len(reps) - 1)
    return labels


def eigv(W: np.ndarray) -> float:
    """U_EigV = sum_k max(0, 1 - lambda_k(L)), L the normalized Laplacian of W (Lin et al. 2023, §4.2): about the
    number of semantic sets, continuous; in [1, m]."""
    lam = np.linalg.eigvalsh(normalized_laplacian(W))
    return float(np.clip(1.0 - lam, 0.0, None).sum())


def degree(W: np.ndarray, index: int = 0) -> float:
    """1 - mean over the other answers j of W_ij: how little answer ``index`` agrees with the rest (the
    response-level degree C_Deg of Lin et al. 2023, §4.2, up to the fixed map (m/N)(1 - C_Deg)); in [0, 1]."""
    W = np.asarray(W, float)
    others = np.delete(W[index], index)
    return float(1.0 - others.mean()) if len(others) else 0.0


def degree_set(W: np.ndarray) -> float:
    """The set-level U_Deg = trace(mI - D) / m^2 (Lin et al. 2023, §4.2): the mean dissimilarity of all answers."""
    W = np.asarray(W, float)
    m = len(W)
    return float((m * m - W.sum()) / (m * m))


def spectral_embedding(W: np.ndarray, threshold: float = ECC_THRESHOLD) -> np.ndarray:
    """Rows v_j = (u_1j, ..., u_kj): the eigenvectors of the normalized Laplacian with eigenvalue < threshold."""
    lam, U = np.linalg.eigh(normalized_laplacian(W))
    return U[:, lam < threshold]


def eccentricity(W: np.ndarray, index: int = 0, threshold: float = ECC_THRESHOLD) -> float:
    """||v_index - mean_j v_j||_2 in the spectral embedding (the response-level C_Ecc of Lin et al. 2023, §4.2, as a
    distance: larger = the answer lies farther from the others). Depends on the kept eigenspace only, not on the
    sign or basis of its eigenvectors."""
    V = spectral_embedding(W, threshold)
    return float(np.linalg.norm(V[index] - V.mean(axis=0)))


def graph_scores(W: np.ndarray, names: Sequence[str], sets: int | None = None) -> dict[str, float]:
    """The chosen methods' hallucination scores in [0, 1] for the response (answer 0) from W (m x m) and, for
    ``num_sets``, the number of semantic sets."""
    m = len(W)
    span = max(m - 1, 1)
    out = {}
    if "num_sets" in names and sets is not None:
        out["num_sets"] = (sets - 1) / span
    if "eigv" in names:
        out["eigv"] = float(np.clip((eigv(W) - 1.0) / span, 0.0, 1.0))
    if "degree" in names:
        out["degree"] = float(np.clip(degree(W), 0.0, 1.0))
    if "eccentricity" in names:
        out["eccentricity"] = eccentricity(W)
    return out


def _register() -> None:
    from ..engine.registry import MethodSpec, register

    src = "Lin, Trivedi & Sun 2023, Generating with Confidence (arXiv 2305.19187) "
    sim = "W_ij = (a_ij + a_ji)/2, a_ij = P(entail | t_i, t_j) over the response and the N samples; "
    register(
        MethodSpec("num_sets", level="response", needs=("nli",), bounded=True, aggregate=None, group="response",
                   source=src + "§4.1 NumSets",
                   formula="(K - 1)/N, K = number of semantic sets of the response and its N samples by "
                           "bidirectional-entailment clustering (the clustering of semantic_negentropy)"),
        MethodSpec("eigv", level="response", needs=("nli",), bounded=True, aggregate=None, group="response",
                   source=src + "§4.2 EigV",
                   formula="(U_EigV - 1)/N, U_EigV = sum_k max(0, 1 - lambda_k) of the normalized Laplacian "
                           "I - D^-1/2 W D^-1/2; " + sim),
        MethodSpec("degree", level="response", needs=("nli",), bounded=True, aggregate=None, group="response",
                   source=src + "§4.2 Deg (response-level C_Deg)",
                   formula="1 - (1/N) sum_j W_0j, the response's mean similarity to the samples; " + sim),
        MethodSpec("eccentricity", level="response", needs=("nli",), bounded=True, aggregate=None, group="response",
                   source=src + "§4.2 Ecc (response-level C_Ecc)",
                   formula="||v_0 - mean_j v_j||, v_j = row j of the eigenvectors of the normalized Laplacian with "
                           "eigenvalue < 0.9; in [0, 1); " + sim),
        build=_build)


def _build(names, art):
    """Built with the response components: one NLI pass for every NLI-based response method of the run."""
    from ..engine.components import ResponseMethods

    return ResponseMethods(names, art)


_register()
