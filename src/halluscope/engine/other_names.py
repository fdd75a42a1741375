"""Other libraries' names for halluscope's methods, so a name brought from SelfCheckGPT, uqlm or LM-Polygraph gets
an answer instead of a bare "unknown method". README's "Coming from SelfCheckGPT, uqlm or LM-Polygraph" has the
same rows with the formulas side by side.

Every halluscope score is a hallucination score (higher = more likely hallucinated); uqlm's scorers are
confidences (higher = more likely correct) and LM-Polygraph's estimators uncertainties of the sample set. A name is
never mapped silently: where the quantity differs (another normalization, the samples without the response), the
hint says so and the user picks the method.
"""

from __future__ import annotations

import difflib
import re

# other library's name (lower case, without '_', '-' or spaces) -> (library, halluscope method or None, note)
OTHER_NAMES: dict[str, tuple[str, str | None, str]] = {
    "selfcheckbertscore": ("SelfCheckGPT", "bertscore", "the same formula (its encoder is roberta-large)"),
    "selfcheckmqag": ("SelfCheckGPT", "qa_bayes_alpha", "also qa_count, qa_bayes; one question per sentence"),
    "selfcheckngram": ("SelfCheckGPT", "ngram1_avg", "ngram{n}_avg / ngram{n}_max for n = 1..5"),
    "selfchecknli": ("SelfCheckGPT", "nli", "the same formula; the whole sample as premise with "
                     "Detector(nli_evidence='sample') or --nli-evidence sample"),
    "selfcheckllmprompt": ("SelfCheckGPT", "prompt", "the same template and Yes / No / other mapping"),
    "selfcheckapiprompt": ("SelfCheckGPT", "prompt", "the same template and Yes / No / other mapping"),
    "noncontradiction": ("uqlm", "non_contradiction", "the same formula, as 1 - uqlm's confidence"),
    "entailment": ("uqlm", "degree", "uqlm's entailment score is 1 - degree"),
    "semanticnegentropy": ("uqlm", "semantic_negentropy", "1 - confidence; uqlm's code clusters otherwise"),
    "semanticsetsconfidence": ("uqlm", "num_sets", "(K - 1) / N here, 1 - (K - 1) / (N - 1) in uqlm's code"),
    "exactmatch": ("uqlm", "exact_match", "1 - confidence; texts compared after normalization"),
    "bertscore": ("uqlm", "bertscore_response", "the answer-level BERTScore; 'bertscore' is SelfCheck's sentence "
                  "score"),
    "cosinesim": ("uqlm", "cosine", "1 - mean of cos clipped to [0, 1]; uqlm's code maps cos to 0.5 + cos / 2"),
    "numsemsets": ("LM-Polygraph", "num_sets", "the response's graph (response + samples), scaled to [0, 1]"),
    "eigvallaplacian": ("LM-Polygraph", "eigv", "the response's graph (response + samples), scaled to [0, 1]"),
    "degmat": ("LM-Polygraph", "degree", "the response-level C_Deg; Polygraph's U_Deg reads the samples only"),
    "kernellanguageentropy": ("LM-Polygraph", "kle", "the paper's kernel (t = 0.4, response included); "
                              "Polygraph's code differs"),
    "ptrue": ("LM-Polygraph", "p_true", "1 - P(True) normalized over True / False, not -log P"),
    "ptruesampling": ("LM-Polygraph", "p_true", "the share of sampled verdicts without log-probs"),
    "lexicalsimilarity": ("LM-Polygraph", "rouge_l", "ROUGE-L of the response against each sample; Polygraph's reads "
                          "pairs of samples, stemmed; no BLEU"),
    "rougel": ("LM-Polygraph", "rouge_l", "1 - mean ROUGE-L F1 of the response and each sample"),
}


def _key(name: str) -> str:
    return re.sub(r"[\s_\-]", "", name.lower())


AS_COMPONENT = {"bertscore_response": "bertscore"}  # the same score's name among the ensemble's components


def hint(name: str, known: list[str], component: bool = False) -> str:
    """What to say about a method name halluscope does not know (``component``: an ensemble component's name): the
    method another library's name stands for, or the closest known names; '' where there is nothing to suggest."""
    other = OTHER_NAMES.get(_key(name))
    if other:
        lib, ours, note = other
        ours = AS_COMPONENT.get(ours, ours) if component and ours else ours
        use = f"halluscope's is {ours!r} ({note})" if ours else f"halluscope has none ({note})"
        return f"{name!r} is {lib}'s name: {use}."
    close = difflib.get_close_matches(name.lower(), known, n=3, cutoff=0.75)
    return f"did you mean {', '.join(repr(c) for c in close)}?" if close else ""
