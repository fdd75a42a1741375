"""A probe of one-fact swaps in short sentences: 20 pairs whose hypothesis changes one name, date or number of a
short factual premise (contradiction), and 15 paraphrases or less specific restatements (entailment), all written
by hand, none from any training or evaluation set. It shows what the WikiBio and NLI-benchmark figures do not:
whether the model reads a single changed fact in a sentence as short as an answer to a question, and whether it
still reads a rephrased or less detailed one as supported (EVALUATION.md, issue 13, "Short-claim pairs").

    .venv/bin/python benchmarks/nli_swap_probe.py                    # the packaged halluscope-nli
    .venv/bin/python benchmarks/nli_swap_probe.py runs/nli10/model -v # another model, every pair shown
"""
import sys

from halluscope.models.nli import load_nli

C = [("Canberra is the capital of Australia.", "Sydney is the capital of Australia."),
 ("Canberra is the capital of Australia.", "Melbourne is the capital of Australia."),
 ("Canberra is the capital of Australia.", "Paris is the capital of Australia."),
 ("The capital of Australia is Canberra.", "The capital of Australia is Sydney."),
 ("Australia's capital is Canberra.", "Australia's capital is Sydney."),
 ("John Smith won the race in 2001.", "Peter Brown won the race in 2001."),
 ("Bill Gates founded Microsoft.", "Steve Jobs founded Microsoft."),
 ("Microsoft was founded by Bill Gates.", "Microsoft was founded by Steve Jobs."),
 ("Lincoln was the 16th president.", "Washington was the 16th president."),
 ("The Berlin Wall fell in 1989.", "The Berlin Wall fell in 1991."),
 ("A week has 7 days.", "A week has 9 days."),
 ("Mount Everest is the highest mountain on Earth.", "K2 is the highest mountain on Earth."),
 ("The Eiffel Tower is in Paris.", "The Eiffel Tower is in Rome."),
 ("Shakespeare wrote Hamlet.", "Marlowe wrote Hamlet."),
 ("Water boils at 100 degrees Celsius at sea level.", "Water boils at 90 degrees Celsius at sea level."),
 ("The Pacific is the largest ocean.", "The Atlantic is the largest ocean."),
 ("Tokyo is the capital of Japan.", "Kyoto is the capital of Japan."),
 ("Neil Armstrong was the first person to walk on the Moon.", "Buzz Aldrin was the first person to walk on the Moon."),
 ("The Amazon is the largest rainforest.", "The Congo is the largest rainforest."),
 ("He was born in Paris in 1950.", "He was born in Lyon in 1950."),
]
E = [("Canberra is the capital of Australia.", "The capital of Australia is Canberra."),
 ("The capital of Australia is Canberra.", "Canberra is Australia's capital."),
 ("Canberra is Australia's capital.", "Canberra is the capital of Australia."),
 ("The Berlin Wall fell in November 1989.", "The Berlin Wall fell in 1989."),
 ("It fell on 9 November 1989.", "It fell in 1989."),
 ("There are 7 days in a week.", "A week has 7 days."),
 ("Seven days make a week.", "A week has seven days."),
 ("Microsoft was founded by Bill Gates.", "Bill Gates founded Microsoft."),
 ("Bill Gates and Paul Allen founded Microsoft in 1975.", "Microsoft was founded in 1975."),
 ("Neil Armstrong was the first person to walk on the Moon, in 1969.", "Neil Armstrong walked on the Moon."),
 ("The Eiffel Tower, in Paris, was completed in 1889.", "The Eiffel Tower is in Paris."),
 ("Hamlet is a tragedy written by William Shakespeare.", "Shakespeare wrote Hamlet."),
 ("Tokyo has been Japan's capital since 1868.", "Tokyo is the capital of Japan."),
 ("He was born in Paris in 1950 and studied law.", "He was born in 1950."),
 ("She won two Olympic gold medals in swimming.", "She is an Olympic champion."),
]
def report(groups, argv) -> None:
    """Score each (name, pairs, label) group with the model named in ``argv`` (default: the packaged one): how many
    pairs get ``label`` as their top class, the mean probability of it and of contradiction; every pair with -v."""
    args = [a for a in argv if a != "-v"]
    m = load_nli(args[0] if args else "halluscope")
    for name, pairs, lab in groups:
        P = m.probs(pairs)
        ok = P.argmax(1) == lab
        print(f"{name}: {ok.sum()}/{len(pairs)}  mean p[label] {P[:, lab].mean():.3f}  "
              f"mean p[contradiction] {P[:, 2].mean():.3f}")
        if "-v" in argv:
            for (p, h), pr, o in zip(pairs, P, ok):
                print("  ", "ok " if o else "BAD", pr.round(2), p, "->", h)


if __name__ == "__main__":
    report((("swap->contradiction", C, 2), ("paraphrase->entailment", E, 0)), sys.argv[1:])
