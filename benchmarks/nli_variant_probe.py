"""A probe of surface variants: the same fact written another way, which a checker must read as support, beside
near misses that change the fact, which it must read as contradiction. 30 pairs each, written by hand, none from any
training or evaluation set. The nicknames and short forms here (Dave, Bill, Jim, Tom, Mike, Feb., Sept., U.S., UK,
Mt., St., No., UN, four, twelve: ``nli_variants.PROBE_WORDS``) are in none of the tables of the variant pairs that
``halluscope train-nli --variants`` builds (a test checks it), so those items measure what a model learnt about
variants, not which ones it was shown. The number formats and the decades and centuries are the generator's own
rules applied to sentences it never saw.

A model that learnt one-fact swaps from minimal pairs can learn too much: that any changed word is a contradiction.
SAC3's gpt-3.5 answer "The lead singer of Depeche Mode is David Gahan." against ten samples naming "Dave Gahan"
is graded correct; halluscope-nli v5 reads each of them as a contradiction (P 0.87), and so calls a right answer
wrong (EVALUATION.md, issue 13, "Surface variants").

    .venv/bin/python benchmarks/nli_variant_probe.py                    # the packaged halluscope-nli
    .venv/bin/python benchmarks/nli_variant_probe.py runs/nli10/model -v # another model, every pair shown
"""
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))  # also when run through nli_replay.py
from nli_swap_probe import report  # noqa: E402  the same scoring and printing

E = [  # the same fact: entailment
 ("The lead singer of Depeche Mode is Dave Gahan.", "The lead singer of Depeche Mode is David Gahan."),
 ("William Clinton was elected president in 1992.", "Bill Clinton was elected president in 1992."),
 ("Jim Morrison was the singer of the Doors.", "James Morrison was the singer of the Doors."),
 ("Thomas Edison patented the phonograph.", "Tom Edison patented the phonograph."),
 ("Mike Tyson became champion at the age of 20.", "Michael Tyson became champion at the age of 20."),
 ("John F. Kennedy was born in Brookline.", "John Kennedy was born in Brookline."),
 ("Martin Luther King Jr. gave the speech in Washington.", "Martin Luther King gave the speech in Washington."),
 ("President Lincoln signed the proclamation.", "Lincoln signed the proclamation."),
 ("The poet Emily Dickinson was born in Amherst.", "Dickinson was born in Amherst."),
 ("He was born in 1820.", "He was born in the 19th century."),
 ("He was born in 1820.", "He was born in the 1820s."),
 ("The bridge opened on 27 May 1937.", "The bridge opened in May 1937."),
 ("The bridge opened on May 27, 1937.", "The bridge opened in 1937."),
 ("The treaty was signed in Feb. 1848.", "The treaty was signed in February 1848."),
 ("The festival is held every Sept.", "The festival is held every September."),
 ("She moved to the U.S. in 1990.", "She moved to the United States in 1990."),
 ("The company is based in the UK.", "The company is based in the United Kingdom."),
 ("The town lies at the foot of Mt. Hood.", "The town lies at the foot of Mount Hood."),
 ("He was named after St. Patrick.", "He was named after Saint Patrick."),
 ("The stadium holds 45,000 people.", "The stadium holds 45000 people."),
 ("The band released 4 albums.", "The band released four albums."),
 ("The team won twelve games.", "The team won 12 games."),
 ("About 30% of the voters stayed home.", "About 30 percent of the voters stayed home."),
 ("The film cost $20 million.", "The film cost 20 million dollars."),
 ("The first English colony was Jamestown, Virginia.", "The first English colony was Jamestown."),
 ("She was born in Austin, Texas.", "She was born in Texas."),
 ("The song reached No. 1 in 1965.", "The song reached number one in 1965."),
 ("The novel was written by J. R. R. Tolkien.", "The novel was written by Tolkien."),
 ("The museum opened in the year 1902.", "The museum opened in 1902."),
 ("The UN was founded in 1945.", "The United Nations was founded in 1945."),
]
C = [  # a changed fact that looks alike: contradiction
 ("The lead singer of Depeche Mode is Dave Gahan.", "The lead singer of Depeche Mode is Martin Gore."),
 ("William Clinton was elected president in 1992.", "George Clinton was elected president in 1992."),
 ("Jim Morrison was the singer of the Doors.", "Van Morrison was the singer of the Doors."),
 ("Thomas Edison patented the phonograph.", "Thomas Jefferson patented the phonograph."),
 ("Mike Tyson became champion at the age of 20.", "Mike Tyson became champion at the age of 30."),
 ("John F. Kennedy was born in Brookline.", "Robert F. Kennedy was born in Brookline."),
 ("Martin Luther King Jr. gave the speech in Washington.", "Martin Luther King Jr. gave the speech in Chicago."),
 ("President Lincoln signed the proclamation.", "President Johnson signed the proclamation."),
 ("The poet Emily Dickinson was born in Amherst.", "The poet Emily Dickinson was born in Boston."),
 ("He was born in 1820.", "He was born in the 18th century."),
 ("He was born in 1820.", "He was born in the 1850s."),
 ("The bridge opened on 27 May 1937.", "The bridge opened in June 1937."),
 ("The bridge opened on May 27, 1937.", "The bridge opened in 1973."),
 ("The treaty was signed in Feb. 1848.", "The treaty was signed in December 1848."),
 ("The festival is held every Sept.", "The festival is held every April."),
 ("She moved to the U.S. in 1990.", "She moved to the United Kingdom in 1990."),
 ("The company is based in the UK.", "The company is based in the United States."),
 ("The town lies at the foot of Mt. Hood.", "The town lies at the foot of Mount Rainier."),
 ("He was named after St. Patrick.", "He was named after Saint Andrew."),
 ("The stadium holds 45,000 people.", "The stadium holds 4,500 people."),
 ("The band released 4 albums.", "The band released fourteen albums."),
 ("The team won twelve games.", "The team won 20 games."),
 ("About 30% of the voters stayed home.", "About 13 percent of the voters stayed home."),
 ("The film cost $20 million.", "The film cost 200 million dollars."),
 ("The first English colony was Jamestown, Virginia.", "The first English colony was Plymouth."),
 ("She was born in Austin, Texas.", "She was born in Ohio."),
 ("The song reached No. 1 in 1965.", "The song reached number ten in 1965."),
 ("The novel was written by J. R. R. Tolkien.", "The novel was written by C. S. Lewis."),
 ("The museum opened in the year 1902.", "The museum opened in 1920."),
 ("The UN was founded in 1945.", "The European Union was founded in 1945."),
]
if __name__ == "__main__":
    report((("variant->entailment", E, 0), ("near miss->contradiction", C, 2)), sys.argv[1:])
