"""Kernel Language Entropy (Nikitin, Kossen, Gal & Marttinen 2024, "Kernel Language Entropy: Fine-grained
Uncertainty Quantification for LLMs from Semantic Similarities", NeurIPS 2024, arXiv 2405.20003).

The response and its N samples are the m = N + 1 nodes of the semantic graph with edge weights

    W_ij = a_ij + a_ji  (i != j),  a_ij = P(entailment | premise t_i, hypothesis t_j)

(the authors' ``deberta`` weighting: the sum of both entailment probabilities; the same NLI pairs, through the same
cache, as ``non_contradiction``, ``semantic_negentropy`` and the graph scores). With the graph Laplacian
L = D - W (D the degrees), the heat kernel is K = exp(-t L) with t = 0.4, the default of the authors' code
(``kle/kernels.py``, ``heat_kernel``; LM-Polygraph's default is 0.3); t was not tuned on any data here. K is
normalized as the authors do (``normalize_kernel``): to a unit diagonal, K_ij / sqrt(K_ii K_jj), then divided by m,
so its trace is 1 and its eigenvalues mu_k form a distribution. KLE is the von Neumann entropy

    VNE(K) = -sum_k mu_k log mu_k,        reported as KLE = VNE / log m  in [0, 1]

(the authors' ``scale=True``). 0: the answers agree (one dominant eigenvalue); 1: no two answers are related
(K = I / m). Higher = more likely hallucinated.
"""

from __future__ import annotations

import numpy as np

HEAT_T = 0.4  # the authors' default heat-kernel time (kle/kernels.py); fixed, not tuned on the test data


def heat_kernel(W: np.ndarray, t: float = HEAT_T) -> np.ndarray:
    """K = exp(-t L), L = D - W the (unnormalized) graph Laplacian; the diagonal of W does not enter L. Computed by
    the eigen-decomposition of the symmetric L."""
    W = np.asarray(W, float)
    W = W - np.diag(np.diag(W))
    L = np.diag(W.sum(axis=1)) - W
    lam, U = np.linalg.eigh((L + L.T) / 2)
    return (U * np.exp(-t * lam)) @ U.T


def unit_trace(K: np.ndarray) -> np.ndarray:
    """K_ij / sqrt(K_ii K_jj) / m: unit diagonal divided by m, so trace 1 (the authors' normalize_kernel)."""
    d = np.sqrt(np.clip(np.diag(K), 1e-300, None))
    return K / np.outer(d, d) / len(K)


def von_neumann_entropy(rho: np.ndarray) -> float:
    """-sum mu log mu over the eigenvalues mu of a unit-trace PSD matrix (numerical negatives and zeros dropped)."""
    mu = np.linalg.eigvalsh((rho + rho.T) / 2)
    mu = mu[mu > 1e-12]
    return float(-(mu * np.log(mu)).sum())


def kle(W: np.ndarray, t: float = HEAT_T) -> float:
    """KLE = VNE(unit_trace(exp(-t (D - W)))) / log m, in [0, 1] (0 for a single answer)."""
    m = len(W)
    if m < 2:
        return 0.0
    return float(np.clip(von_neumann_entropy(unit_trace(heat_kernel(W, t))) / np.log(m), 0.0, 1.0))


def kle_weights(A: np.ndarray) -> np.ndarray:
    """The semantic graph's weights from the entailment matrix A: W_ij = a_ij + a_ji, zero diagonal."""
    A = np.asarray(A, float)
    W = A + A.T
    np.fill_diagonal(W, 0.0)
    return W


def _register() -> None:
    from ..engine.registry import MethodSpec, register
    from .graph import _build

    register(MethodSpec("kle", level="response", needs=("nli",), bounded=True, aggregate=None, group="response",
                        source="Nikitin et al. 2024, Kernel Language Entropy (NeurIPS; arXiv 2405.20003), KLE(K_heat)",
                        formula="VNE(K)/log m, K = exp(-0.4 L) normalized to unit diagonal / m (trace 1), L = D - W, "
                                "W_ij = a_ij + a_ji, a_ij = P(entail | t_i, t_j) over the response and its samples; "
                                "VNE = -sum mu log mu over K's eigenvalues"),
             build=_build)


_register()
