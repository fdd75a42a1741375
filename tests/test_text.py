"""The array tokenizer gives exactly spaCy's tokens (it looks each whitespace-delimited chunk up instead of
re-tokenizing it), including the whitespace tokens spaCy makes."""

import numpy as np
import spacy
from spacy.attrs import IS_SPACE, LOWER, ORTH

from halluscope.scorers.base import PreparedItem
from halluscope.text import token_arrays

EDGE_CASES = [
    "", " ", "  lead", "a  b", "x \n\n y", "tab\there", "end  ", "\n\nstart", "nbsp\xa0x", "a\n b", "a \nb",
    "U.S. (Inc.) 'quoted' -- e.g. 3.5% $4 don't", "He said: \"no!\" (1820–1876)...", "agent",
]


def test_token_arrays_equal_spacy_on_wikibio_and_edge_cases(wikibio):
    items = [PreparedItem.from_record(r) for r in wikibio[:30]]
    texts = [s for it in items for s in it.sentences] + [t for it in items for t in it.evidence] + EDGE_CASES
    got = token_arrays(texts, lowercase=True, words=True)
    got_orth = token_arrays(texts, lowercase=False)
    assert len(got) == len(texts)
    reference = spacy.blank("en").tokenizer  # a plain tokenizer, not the one token_arrays uses
    for k, doc in enumerate(reference.pipe(texts)):
        a = doc.to_array([LOWER, ORTH, IS_SPACE]).reshape(-1, 3)
        space = a[:, 2].astype(np.int8)
        for i in np.flatnonzero(space):
            if "\n" in doc[int(i)].text:
                space[i] = 2
        ids, sp, words = got[k]
        assert words == [t.text for t in doc], texts[k]
        assert np.array_equal(ids, a[:, 0].view(np.uint64)), texts[k]
        assert np.array_equal(got_orth[k][0], a[:, 1].view(np.uint64)), texts[k]
        assert np.array_equal(sp, space), texts[k]
