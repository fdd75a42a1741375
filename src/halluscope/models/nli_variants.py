"""Surface-variant pairs for halluscope's NLI cross-encoder: the same fact written another way (entailment), each
with a near miss from the same premise (contradiction).

A model trained on one-fact swaps learns that a changed name, date or number is a contradiction, and with nothing to
say otherwise it also reads a changed *form* of the same fact as one: halluscope-nli v5 gives P(contradiction) 0.87
to "The lead singer of Depeche Mode is David Gahan." against "... is Dave Gahan." (a SAC3 answer graded correct),
0.99 to "Bill Clinton" for "William Clinton", 0.97 to "born in the 19th century" for "born in 1820" (EVALUATION.md,
issue 13, "Surface variants"). These pairs teach the difference, each rewrite beside a swap at the same place:

- a first name and its usual short form ("Robert Wise" / "Bob Wise"), against another first name ("Richard Wise"),
  the subject's too: a first try that left subjects without a near miss taught "William Clinton" -> "George
  Clinton" as entailment;
- a year and its decade or century ("in 1937" -> "in the 1930s", "in the 20th century"), against a wrong decade or
  century; the reverse direction, less detailed premise, is neutral;
- a word and its abbreviation (months, titles, countries and cities: "January" / "Jan.", "Governor" / "Gov.",
  "United States" / "USA"), against another word of its kind;
- a number written another way ("4,500" / "4500", "seven" / "7", "30%" / "30 percent", "$20 million" / "20 million
  dollars"), against another number.

Sentences come from FEVER's claims (CC BY-SA 3.0) and the prose passages of the synthetic pairs (never WikiBio);
each gives at most one minimal pair, premise first in its original form or (half the time, where the rewrite keeps
every detail) in the rewritten one. The nicknames and short forms of ``benchmarks/nli_variant_probe.py`` are left out
of every table here (:data:`PROBE_WORDS`; a test checks it), so the probe measures what a model learnt about
variants, not which ones it was shown; its number formats, decades and centuries are these rules on new sentences.
"""

from __future__ import annotations

import random
import re
from pathlib import Path

from .nli_data import Pair, _claims, _entities, _passages

SOURCE = "variants"  # its licence: nli_data.BUILT_LICENCES["variants"]

# Formal first name -> its usual short forms. Left out (the probe's): David/Dave, William/Bill/Will/Billy,
# James/Jim/Jimmy, Thomas/Tom, Michael/Mike.
NICKNAMES: dict[str, tuple[str, ...]] = {
    "Robert": ("Bob", "Rob", "Bobby"), "Richard": ("Rick", "Dick", "Rich"), "Edward": ("Ed", "Ted", "Eddie"),
    "Anthony": ("Tony",), "Christopher": ("Chris",), "Nicholas": ("Nick",), "Matthew": ("Matt",),
    "Alexander": ("Alex",), "Benjamin": ("Ben",), "Samuel": ("Sam",), "Andrew": ("Andy", "Drew"),
    "Steven": ("Steve",), "Stephen": ("Steve",), "Joseph": ("Joe", "Joey"), "Daniel": ("Dan", "Danny"),
    "John": ("Jack", "Johnny"), "Charles": ("Charlie", "Chuck"), "Patrick": ("Pat",), "Gregory": ("Greg",),
    "Jeffrey": ("Jeff",), "Kenneth": ("Ken", "Kenny"), "Lawrence": ("Larry",), "Ronald": ("Ron", "Ronnie"),
    "Donald": ("Don",), "Timothy": ("Tim",), "Frederick": ("Fred",), "Henry": ("Harry", "Hank"),
    "Gerald": ("Jerry",), "Raymond": ("Ray",), "Peter": ("Pete",), "Philip": ("Phil",), "Douglas": ("Doug",),
    "Jonathan": ("Jon",), "Joshua": ("Josh",), "Theodore": ("Ted", "Teddy"), "Vincent": ("Vince",),
    "Albert": ("Al", "Bert"), "Leonard": ("Len", "Lenny"), "Walter": ("Walt",), "Franklin": ("Frank",),
    "Francis": ("Frank",), "Eugene": ("Gene",), "Stanley": ("Stan",), "Terence": ("Terry",), "Harold": ("Harry",),
    "Elizabeth": ("Liz", "Beth", "Betty"), "Katherine": ("Kate", "Kathy"), "Catherine": ("Cathy", "Kate"),
    "Margaret": ("Maggie", "Peggy"), "Jennifer": ("Jenny", "Jen"), "Susan": ("Sue",), "Patricia": ("Patty",),
    "Deborah": ("Debbie",), "Rebecca": ("Becky",), "Victoria": ("Vicky",), "Jacqueline": ("Jackie",),
    "Samantha": ("Sam",), "Abigail": ("Abby",), "Pamela": ("Pam",), "Barbara": ("Barb",),
}
# A short form of several formal names (Sam: Samuel or Samantha; Harry: Henry or Harold) is never expanded, and a near
# miss is never a name that shares a short form with the original.
_FORMAL: dict[str, set[str]] = {}
for _f, _ns in NICKNAMES.items():
    for _n in _ns:
        _FORMAL.setdefault(_n, set()).add(_f)
_REGNAL = re.compile(r"\b(?:[IVX]+|of)\b")  # "Henry III", "Charles of Austria": a king's name has no short form

# Kinds of words with their abbreviations or other names (long, short). Left out: February/Feb., September/Sept.,
# United States/U.S., United Kingdom/UK, Mount/Mt., Saint/St., number/No., United Nations/UN.
ABBREVIATIONS: dict[str, tuple[tuple[str, str], ...]] = {
    "month": (("January", "Jan."), ("March", "Mar."), ("April", "Apr."), ("August", "Aug."), ("October", "Oct."),
              ("November", "Nov."), ("December", "Dec.")),
    "title": (("Governor", "Gov."), ("Senator", "Sen."), ("Professor", "Prof."),
              ("Doctor", "Dr."), ("Captain", "Capt."), ("Lieutenant", "Lt."), ("Reverend", "Rev."),
              ("Colonel", "Col."), ("Sergeant", "Sgt.")),
    "place": (("United States", "USA"), ("United States", "US"), ("Soviet Union", "USSR"),
              ("European Union", "EU"), ("New York City", "NYC"), ("Los Angeles", "LA"),
              ("the Netherlands", "Holland"), ("Great Britain", "Britain")),
}
_NUMBER_WORDS = {2: "two", 3: "three", 5: "five", 6: "six", 7: "seven", 8: "eight", 9: "nine", 10: "ten",
                 11: "eleven", 13: "thirteen", 15: "fifteen", 20: "twenty"}  # four and twelve left out; "one" is
# as often a pronoun ("one of"), and "1" a day of a month
PROBE_WORDS = ("David", "Dave", "William", "Bill", "Will", "Billy", "James", "Jim", "Jimmy", "Thomas", "Tom",
               "Michael", "Mike", "February", "Feb.", "September", "Sept.", "U.S.", "UK", "United Kingdom", "Mount",
               "Mt.", "Saint", "St.", "No.", "United Nations", "UN", "four", "twelve")


def _sub(s: str, start: int, old: str, new: str) -> str:
    return s[:start] + new + s[start + len(old):]


def _nickname(s: str, e: list, rng: random.Random) -> tuple[str, str, bool] | None:
    """(variant, near miss, keeps every detail) by a first name's other form; None where no person has one."""
    for text, lab, start in e:
        first = text.split()[0]
        if lab != "PERSON" or len(text.split()) < 2 or _REGNAL.search(text):
            continue
        if first in NICKNAMES:
            other = rng.choice(NICKNAMES[first])
        elif len(_FORMAL.get(first, ())) == 1:
            other = next(iter(_FORMAL[first]))
        else:
            continue
        group = {f for n in (first, other) for f in _FORMAL.get(n, {n})}  # every formal name either could be
        stranger = rng.choice([f for f in NICKNAMES if f not in group and not set(NICKNAMES[f]) & {first, other}])
        return _sub(s, start, first, other), _sub(s, start, first, stranger), True
    return None


_IN_YEAR = re.compile(r"\bin (1[0-9]{3}|20[0-2][0-9])\b(?![,.]?\d)(?!\s*[-–/]\s*\d)")  # not a range


def _ordinal(n: int) -> str:
    return f"{n}{'th' if 10 <= n % 100 <= 20 else {1: 'st', 2: 'nd', 3: 'rd'}.get(n % 10, 'th')}"


def _period(s: str, rng: random.Random) -> tuple[str, str, bool] | None:
    """"in 1937" -> its decade or century (a detail dropped), against a wrong one."""
    m = _IN_YEAR.search(s)
    if not m:
        return None
    y = int(m.group(1))
    if rng.random() < 0.5:
        right, wrong = f"in the {y // 10 * 10}s", f"in the {(y // 10 + rng.choice([-3, -2, -1, 1, 2, 3])) * 10}s"
    else:
        c = (y - 1) // 100 + 1  # 1900 is the last year of the 19th century
        right, wrong = f"in the {_ordinal(c)} century", f"in the {_ordinal(c + rng.choice([-2, -1, 1]))} century"
    return _sub(s, m.start(), m.group(0), right), _sub(s, m.start(), m.group(0), wrong), False


def _abbreviation(s: str, rng: random.Random) -> tuple[str, str, bool] | None:
    """A word of a kind written long or short, against another word of the kind."""
    found = []
    for kind, table in ABBREVIATIONS.items():
        for k, (long, short) in enumerate(table):
            for form, alt in ((long, short), (short, long)):
                m = re.search(rf"(?<![\w.]){re.escape(form)}(?![\w$])", s)
                if m:
                    found.append((kind, k, m.start(), form, alt))
    # a form inside a longer one ("Britain" in "Great Britain") is not a word of its own
    found = [f for f in found if not any(g[2] <= f[2] and f[2] + len(f[3]) <= g[2] + len(g[3]) and g != f
                                         for g in found)]
    if not found:
        return None
    kind, k, start, form, alt = rng.choice(found)
    table = ABBREVIATIONS[kind]
    others = [x for j, x in enumerate(table) if j != k and table[k][0] not in x and x[0] not in table[k][0]]
    if not others:
        return None
    wrong = rng.choice(others)[0 if form == table[k][0] else 1]
    return _sub(s, start, form, alt), _sub(s, start, form, wrong), True


_GROUPED = re.compile(r"(?<![\d.,])(\d{1,3}(?:,\d{3})+)(?![\d,]*\.?\d)")
_MONTHS = "January|February|March|April|May|June|July|August|September|October|November|December"
# a count alone: not a day of a month (before or after it), a score ("10-0"), a time or ratio ("7:20", "24/7"), a
# decimal, a range, a compound ("twenty-four", "seven-year-old") or a part of a larger number
_WORDS = "|".join(_NUMBER_WORDS.values())
_SMALL = re.compile(rf"(?<!{_MONTHS.replace('|', ' )(?<!')} )(?<![\d.,$–:/-])\b("
                    + "|".join(map(str, _NUMBER_WORDS)) + "|" + _WORDS + rf")\b(?![.,:/]?\d)(?![-–]\w)"
                    + rf"(?!\s*[-–]\s*\d)(?!\s*[-–]\s*(?:{_WORDS})\b)(?! (?:{_MONTHS})\b)")
_PERCENT = re.compile(r"(?<![\d.])(\d+(?:\.\d+)?)(%| percent\b| per cent\b)")
_DOLLARS = re.compile(r"\$(\d+(?:\.\d+)?) (million|billion)\b")


def _number(s: str, rng: random.Random) -> tuple[str, str, bool] | None:
    """A number written another way, against another number written that way."""
    if m := _DOLLARS.search(s):
        v, unit = m.group(1), m.group(2)
        w = str(int(float(v) * rng.choice([2, 3, 10])) if float(v) >= 1 else float(v) + 1)
        return (_sub(s, m.start(), m.group(0), f"{v} {unit} dollars"),
                _sub(s, m.start(), m.group(0), f"{w} {unit} dollars"), True)
    if m := _PERCENT.search(s):
        v = m.group(1)
        alt = "%" if m.group(2) != "%" else rng.choice([" percent", " per cent"])
        w = str(int(float(v)) + rng.choice([-20, -10, -5, 5, 10, 20]) if float(v) > 20 else int(float(v)) + 7)
        return _sub(s, m.start(), m.group(0), v + alt), _sub(s, m.start(), m.group(0), w + alt), True
    if m := _GROUPED.search(s):
        v = m.group(1)
        n = int(v.replace(",", ""))
        w = rng.choice([n // 10, n * 10, n * rng.choice([2, 3]) + rng.choice([1, 7, 100])])  # a digit dropped, ...
        return _sub(s, m.start(), v, str(n)), _sub(s, m.start(), v, rng.choice([str(w), f"{w:,}"])), True
    if m := _SMALL.search(s):
        tok = m.group(1)
        words = {w: n for n, w in _NUMBER_WORDS.items()}
        n = words.get(tok.lower()) or int(tok)
        other = rng.choice([k for k in _NUMBER_WORDS if k != n])
        as_word = not tok.isdigit()
        alt = str(n) if as_word else _NUMBER_WORDS[n]
        wrong = str(other) if as_word else _NUMBER_WORDS[other]
        return _sub(s, m.start(), tok, alt), _sub(s, m.start(), tok, wrong), True
    return None


def _rewrite(s: str, e: list, rng: random.Random) -> tuple[str, str, bool] | None:
    ways = [lambda: _nickname(s, e, rng), lambda: _period(s, rng), lambda: _abbreviation(s, rng),
            lambda: _number(s, rng)]
    rng.shuffle(ways)
    for way in ways:
        r = way()
        if r and r[0] != s:
            return r
    return None


def variant_pairs(root: Path, n: int, rng: random.Random) -> list[Pair]:
    """Up to ``n`` pairs (module docstring): per sentence that has a rewrite, the variant (entailment) and the near
    miss (contradiction) against the same premise; a decade or century read back against its year is neutral."""
    sents = _claims(root) + [s for p in _passages(root, 3000) for s in p]
    sents = list(dict.fromkeys(sents))
    rng.shuffle(sents)
    ents, _ = _entities(sents[: max(4 * n, 2000)])
    out: list[Pair] = []
    for s, e in zip(sents, ents):
        r = _rewrite(s, e, rng)
        if r is None:
            continue
        variant, near, same = r
        premise, hyp = (variant, s) if same and rng.random() < 0.5 else (s, variant)
        out.append(Pair(premise, hyp, "entailment", SOURCE))
        if near != hyp:
            out.append(Pair(premise, near, "contradiction", SOURCE))  # the same span changed: wrong either way
        if not same and rng.random() < 0.3:
            out.append(Pair(variant, s, "neutral", SOURCE))
        if len(out) >= n:
            break
    return out[:n]

