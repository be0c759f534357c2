"""A book's cast: its people, each once under the forms the book calls them by, and its places.

Mentions are capitalised names, with a title when one precedes them ("Mrs. Dashwood", "Sir John Middleton",
"M. de Treville", "Miss Lucy Steele"; not inside an abbreviation: "H.M. Thrush"; "Mdlle." is "Mademoiselle",
and a form is shown with its title as the book writes it short: "M. Pelet", "Mdlle. Henri", but "Mr." for
"Mister"; a word written before two titled surnames or more, and seldom alone, is read as a title: "Maister
Weston", "Duc de Beaufort"); a capitalised word that the book also writes in lower case often ("Yes",
"Heaven") is an ordinary word, and words that name no one (months, days, God, nationalities, a title alone)
are left out, and so is a name after "St." ("St. Louis": a town, a church or a saint) (but "Christian", a
given name, is a name in a book that writes it before the surname of a family that speaks: "Christian
Cantle"). Mentions inside front and back matter do not count. The forms are then
merged into people:

  * a name of two words or more ("Lucy Steele", "Edward Ferrars") is a person, the same with a
    title ("Miss Lucy Steele"), except a wife named by her husband's name ("Mrs. John Knightley", and any
    woman's title but "Miss" before a man's given name: "Countess Raymond de Chelles");
    a regnal number and an "of" after a first name belong to the name ("Louis XIV", "Anne of
    Austria"; "the King of Spain" is Spain, and "louis" the coin does not cut "Louis XIII"); a name of
    two words that a longer one holds joins it ("Frances Henri", "Frances Evans": "Frances Evans Henri";
    "Reverend Bute Crawley" is Bute Crawley; `_join_held_names`);
  * a first name alone ("Lucy") is that person when exactly one such name starts with it (not two given names
    the book writes together: "Mary" is not "Mary Ann"); when two do ("John Reed", "John Rivers") each mention
    goes to the one named last before it (a king by his number, "Henry VIII", named in full no more often than
    another, is none of them: "Henry" is Henry Ashton; nor is one named in full once or twice beside one named
    ten times as often: "Tom" is Tom Bertram, not Tom Oliver); a first name used alone twenty times more than
    in all its full forms ("Milady") is the person, and its untitled full forms join it ("Lady Mary Grierson"
    does not join Mary); an entry is named by its longest form used at least 5% as often as the whole entry;
  * a title with a first name ("Sir John") joins the one full name seen with that title and first name ("Sir
    John Middleton"; of several, the one named in full ten times as often as any other), and "Miss" or "Mr."
    the one full name with that first name ("Miss Katrine", "Mr. Franklin"; not "Sir Henry", a baronet, for
    Henry Crawford);
  * "Miss" with a surname joins the one woman of that surname named in full, or of several the one the book
    names three times as often, if the book calls her by her first name ("Miss Woodhouse" is Emma Woodhouse,
    "Miss Hale" Margaret beside her brother Frederick Hale, "Miss Verinder" Rachel beside her mother Julia
    Verinder; "Miss Steele" with two Steele sisters stays apart; not a sister the book calls "Miss" with her
    first name beside one it never does: "Miss Millward" is Mary, not "Miss Eliza"), under her earliest
    surname only ("Miss Osborne" is not Amelia Sedley, Mrs. Osborne by marriage), else the one woman named in
    full only once or twice whose first name the book uses more than "Miss X" (a heroine called "Catherine":
    "Miss Morland"; not "Miss Jemima" for her elder sister); a rank ("Captain", "Sergeant", "Dr") joins the
    one man's, or the one full name of that surname whose sex nothing tells ("Captain Wentworth", "Dr. Sloper"
    and "Austin Sloper"), or the one the book writes in full with that rank ("Major Dobbin" is Major William
    Dobbin beside his father); "Mr." joins the one man of that surname named in full ("Mr. Crawford" is Henry
    Crawford; a man titled otherwise, "Sir Michael Audley", aside: "Mr. Audley" is Robert Audley) unless a
    "Mrs." of that surname or "Mr." with his first name ("Mr. Franklin" beside "Mr. Blake") says "Mr." is the
    family's father ("Monsieur" and "Madame" alike); "Mr." with the surname of two men named in full is any of
    them, no one ("Mr. Townsend" beside Morris and Arthur Townsend), and so is "Miss" with the surname of two
    women never titled otherwise, each named half as often as it or more ("Miss Schlegel" beside Margaret and
    Helen Schlegel); none of them joins a full name written with another title. "Mr." with a surname no man is
    named in full with joins its military or police ranks ("Mr. Seegrave", "Superintendent Seegrave"; not "Dr.
    Johnson"). A name's sex is its title's, else its first name's (as the book titles it, else
    qa.given_names), else the pronouns after it. "Mr." is the father, not the one man named in full, where a
    "Mrs." of the name is a tenth as frequent and the book calls that man "Mr." with his first name three
    times ("Mr. Richard" beside "Mr. Bradshaw" and "Mrs. Bradshaw"). "Aunt" and "Uncle" join the family's
    "Mrs." and "Mr."; a rank alone ("the Sergeant", "the Doctor") the one man of that rank; any title but a
    wife's joins a first name used alone far more than in full ("Monsieur d'Artagnan"); a titled plural ("the
    Miss Musgroves", "Messieurs Jones") is no one;
  * a woman's title other than "Miss" with a surname ("Madame Olenska", "Countess Olenska") joins the one
    person named in full with it, a woman never titled "Miss", where no man is called by it (Ellen Olenska;
    `_fold_womens_titles`);
  * any other title with a surname ("Mr. Knightley", "Mrs. Dashwood", "Lady Middleton") is a person of
    its own: a book writes "Mr. John Knightley" to tell him from Mr. Knightley, and women known
    by their title are kept apart from their daughters;
  * a surname alone ("Knightley") joins the entry of a full name its titled forms joined where that holds two
    thirds of the surname's titled mentions ("Craigengelt": "Captain Craigengelt" is Captain John
    Craigengelt), else the titled form that holds two thirds of that surname's titled mentions ("Mr.
    Knightley"), or the most used when all its titles are of one sex ("Buckingham" with "Lord" and "Monsieur
    de Buckingham"), else the one full name with it (or its one namesake of its sex: "Betteredge" beside
    Gabriel and Penelope Betteredge), else it is ambiguous; a family in the plural ("the Steeles", "the
    Newland Archers") is no one;
  * a given name used alone five times or more joins the one entry of a name it is a familiar form of
    (qa.given_names: "Meg", "Margaret"), or, being no known given name itself, the start of ("Reub",
    "Reuben"), or, for a name used alone, the name with a pet ending ("Sophy", "Sophia"; "Jimmy", "Jim");
    two names used alone that no list knows are one where one is the other's first three letters or more with
    a pet ending, whichever is used more ("Roxy", "Roxana").

A place ends with a word such as "Park", "Abbey", "Street" or "Avenue" (kept where the book writes "street" in
lower case often: "Queen Ann Street"; not one titled alone: "Mr. Square"), or is one of something ("Castle of
Monkshaven"), or is a word mostly written after a name's possessive ("Wolf's Crag"), or is named after "in",
"at", "to", "from" and the like and has no title or speech; a person has a title (once is enough where it is
not mostly after "the"), a speech verb before a mention or a person's act after one ("said Lucy", "Lucy
replied", "Lucy smiled"; "returned to England" is no speech), or a full name, or is a given name used alone (a
first-person narrator and the narrator's family are seldom "said X": "George", "Deborah"); a name mostly
written after "the" is someone only when it speaks and acts ("said the Hatter", and a role for a name: "the
Queen"; not a plural always after "the": "the Mavericks", a regiment), else a place ("the Louvre") or no one
("the Musketeers"); a word mostly written after "the" and before a capitalised ordinary word is an epithet's
first word, no one ("the Grand Master", "the Disinherited Knight": the book also writes "master" and
"knight"); a single word mostly followed by "!" that neither speaks nor acts is an oath ("Mordioux!"), no one,
and one that no given name is and mostly opens a speech before "," or "!" an exclamation ("'Pardi,' cried");
anything else is a name. A document where under a fifth of the entries (or fewer than two) have a title, a
given name (qa.given_names) or speech has no cast: a manual's or a paper's capitalised terms are no one. Each
entry keeps the sentence that introduces it (its first mention outside front and back matter, cut by
`qa.reader.sentence_spans`, the one sentence splitter `ask` uses).
"""

from __future__ import annotations

import re
from bisect import bisect_right
from collections import Counter, defaultdict
from dataclasses import dataclass, field
from typing import Sequence

from .given_names import NICKNAMES, given_sex
from .reader import sentence_spans

MIN_MENTIONS = 5
MAX_ENTRIES = 60
MALE = ("Mr", "Mister", "Sir", "Lord", "Monsieur", "M", "Count", "Duke", "King", "Prince", "Baron", "Father", "Uncle",
        "Sergeant", "Superintendent", "Inspector", "Captain", "Colonel", "General", "Dr", "Doctor", "Cardinal",
        "Abbé", "Chevalier", "Marquis", "Viscount", "Vicomte", "Comte", "Admiral", "Major", "Lieutenant", "Herr",
        "Signor", "Squire", "Judge")
FEMALE = ("Mrs", "Miss", "Ms", "Lady", "Madame", "Mme", "Mlle", "Mdlle", "Mademoiselle", "Countess", "Duchess", "Queen",
          "Princess", "Baroness", "Aunt", "Mother", "Sister", "Marquise", "Vicomtesse", "Comtesse", "Dame", "Frau",
          "Fraulein", "Fräulein", "Signora", "Signorina")
PLURAL_TITLES = ("Messieurs", "Mesdames", "Misses", "Mlles")
TITLES = MALE + FEMALE + PLURAL_TITLES
WIVES = ("Mrs", "Madame", "Mme", "Frau", "Signora")  # with a man's full name: his wife
DAUGHTERS = ("Miss", "Mlle", "Mdlle", "Mademoiselle", "Fraulein", "Fräulein", "Signorina")
FAMILIAR = DAUGHTERS + ("Mr", "Monsieur")  # with a first name: "Miss Katrine", "Mr. Franklin"
KIN = {"Aunt": ("Mrs", "Lady"), "Uncle": ("Mr", "Sir")}  # "Aunt Norris" is the book's Mrs. Norris
RANKS = ("Sergeant", "Superintendent", "Inspector", "Captain", "Colonel", "General", "Admiral", "Major",
         "Lieutenant", "Dr", "Cardinal", "Judge")  # one man's
PLACE_WORDS = frozenset("""Abbey Park Hall House Street Square Lane Court Castle Place Road Church Mill Grove Farm
Lodge Manor Cottage Inn Bridge River Hill Common Green Gardens Palace Cathedral Hotel Island Bay Mount Valley
Forest Wood Wells Buildings Crescent Terrace Rooms Chapel Priory Heath Moor Cross Gate Row Quay
Avenue Station Harbour Wharf Docks Barracks College Hospital Gaol Theatre Chambers Club Academy
Grange Shaft University Museum""".split())
STREETS = frozenset("Street Square Road Avenue Terrace Crescent".split())  # a place's last word even where the
# book writes it in lower case often ("Queen Ann Street": no "Queen Ann")
PARTICLES = ("de", "du", "des", "la", "le", "von", "van", "der", "den", "del", "della")  # "van der Luyden"
INNER = PARTICLES + ("of",)  # inside a name only: "Anne of Austria"
_ROMAN = re.compile(r"[IVX]{2,5}")
NOT_PEOPLE = frozenset("""
January February March April May June July August September October November December Monday Tuesday
Wednesday Thursday Friday Saturday Sunday Jan Feb Apr Aug Sept Oct Nov Dec Christmas Easter Michaelmas Lent God
Heaven Heavens Providence
Lord Jesus Christ Christian Bible Gospel English French Spanish Italian German Dutch Irish Scotch Scottish
Welsh British American Indian Indians Swiss Russian Greek Latin Roman Romans Catholic Protestant Gascon
Gutenberg Project Chapter Volume Book Part Section Madam Sir Miss Mrs Mr Esq Oh Ah Yes No Well Alas Hush
St Ay Aye Yea Bah Pshaw Hum Hem Ha Eh Hallo Halloa Hullo Hello Parbleu Pardieu Mordieu Morbleu Sacre Adieu Amen Vive
Englishman Englishmen Frenchman Frenchmen Scotchman Scotchmen Irishman Irishmen Spaniard Spaniards Dutchman
Jesuit Jesuits Huguenot Huguenots Puritan Puritans Saxon Saxons Norman Normans Jew Jews Jewess Templar Templars
Moor Moors Turk Turks Quaker Quakers Gipsy Gipsies Gypsy Gypsies Heathen Pagan Mahometan Hindu Hindus Hindoo
Hindoos Mussulman Mussulmans Moslem Moslems Arab Arabs Persian Persians Chinaman Chinamen Malay Malays Yankee Yankees
""".split())
SPEECH = frozenset("said says replied asked cried answered exclaimed whispered continued returned added "
                   "resumed observed remarked rejoined murmured shouted".split())
FUNCTION = frozenset("""The A An And But Or Nor For So Yet He She It They We You I His Her Its Their Our Your
This That These Those There Here Then When Where What Which Who Whom Whose Why How If Though Although While
As At By In On Of To With From Into Upon After Before Now Not All Some Every Each One Two My Me Him Let Do
Did Is Was Were Be Are Have Has Had Will Would Shall Should Can Could May Might Must
Tis Twas Twere Twould Hence Thus Perhaps Indeed Nay Hereupon Thereupon Whereupon Meanwhile Moreover Besides
Nevertheless However Accordingly Afterwards Presently Suddenly Certainly""".split())  # "'Tis Maypole", "Hence
# Yeobright", "Hereupon Startop": a sentence's first word
TITLE_WORDS = frozenset(RANKS + ("Mr", "Mister", "Mrs", "Miss", "Ms", "Sir", "Lady", "Monsieur", "Madame",
                                  "Mademoiselle", "Messieurs", "Mesdames", "Misses", "Baronet", "Reverend", "Herr",
                                  "Signor", "Senor", "Professor", "Esquire", "Esq", "Bart",
                                  "Mamma", "Mama", "Papa", "Pa", "Ma", "Mum", "Dad", "Daddy", "Mammy", "Grandmamma",
                                  "Grandpapa"))  # a rank or a form of address alone is no one
# ("the Queen" of Alice and "the Duchess" are their names), nor a parent called so ("Yes, Mamma.")
ACTS = SPEECH | frozenset("looked smiled laughed thought felt knew came went took saw turned began sat stood ran "
                         "wrote told wished nodded sighed hesitated paused rose bowed shook whispered".split())
LOOKS = SPEECH | frozenset("looked smiled laughed nodded bowed turned wrote whispered looking smiling laughing "
                           "glanced gazed stared spoke speaking talked listened".split())
PLACE_PREP = frozenset("in at to from near towards toward into through".split())
_CAP = (r"(?:[dDO][’']|M[’'](?=[A-Z])|Ma?c(?=[A-Z][a-z]))?[A-Z][a-zà-öø-ÿ]+"
        r"(?:-(?:(?:de|du|des|la|le|the)-)?[A-Z][a-zà-öø-ÿ]+)?")  # "Front-de-Boeuf", "Bide-the-Bent", "M’Choakumchild"
_REGNAL = r"(?:[ \t]+(?=[IVX]{2,5}\b)X{0,3}(?:IX|IV|V?I{0,3}))?"  # "Louis XIV", "Charles II" (not "I")
_TITLE_AHEAD = rf"(?:{'|'.join(TITLES)})\.?[ \t]+[A-Z]"
_ABBREVIATED = ("Mr", "Mrs", "Ms", "Dr", "M", "Mme", "Mlle", "Mdlle", "Mlles")  # a period after the others ends a
# sentence: "said the Doctor. The Time Traveller did not ..." named no "Dr. Traveller"
_TITLE = (rf"(?:{'|'.join(t for t in TITLES if t in _ABBREVIATED)})(?=\.?\s)"
          rf"|(?:{'|'.join(t for t in TITLES if t not in _ABBREVIATED)})(?=\s)")
_MENTION = re.compile(
    rf"(?:\b(?<!\.)(?P<title>{_TITLE})\.?\s+)?(?P<name>(?:(?:{'|'.join(PARTICLES)})\s+){{0,2}}{_CAP}"
    rf"(?:[ \t]+(?:(?:{'|'.join(INNER)})[ \t]+){{0,2}}(?!{_TITLE_AHEAD}){_CAP}){{0,3}}{_REGNAL})(?![\w’']|-\w)")
# on one line (`_unwrap`); a title inside starts the next mention ("Then | Mr. Thornton came", not "Then Mr" and
# "Thornton"); not the start of a longer word ("Front" of "Front-de-Boeuf's", a possessive, which is not read)
_WORD = re.compile(r"[A-Za-zà-öø-ÿ’']+")
_PRONOUN = re.compile(r"\b(?:[Hh]e|[Hh]is|him|[Ss]he|[Hh]er)\b")
_CUT = re.compile(r"[ \t]+[A-Z]")  # a name's next word, capitalised
_ELIDED = re.compile(r"[dD][’'][A-Z]")  # d’Artagnan
ARTICLES = frozenset("the a an his her your their my our its this that these those".split())
SAME_TITLE = {"M": "Monsieur", "Mister": "Mr", "Mme": "Madame", "Mlle": "Mademoiselle", "Mdlle": "Mademoiselle",
              "Doctor": "Dr"}


@dataclass
class Form:
    """One way the book writes a name: an optional title and the name's words."""
    title: str | None
    words: tuple[str, ...]
    count: int = 0
    first: int | None = None
    person: int = 0  # mentions with speech beside them
    place: int = 0  # mentions after a place preposition
    article: int = 0  # mentions after an article or a possessive
    of: int = 0  # mentions after "of"
    bang: int = 0  # mentions followed by "!" ("Mordioux!", "Peste!": an oath)
    opens: int = 0  # mentions that open a speech before a comma or "!" ("'Pardi,' cried Madame Duval")
    cut: int = 0  # mentions cut before a capitalised ordinary word ("the Grand | Master")
    owned: int = 0  # mentions after a capitalised name's possessive ("Wolf's Crag", "Tod's Hole")
    he: int = 0  # mentions whose next pronoun is "he", "his", "him"
    she: int = 0  # ... "she", "her"
    positions: list[int] = field(default_factory=list)
    shown: Counter = field(default_factory=Counter)  # the title and words as written ("M. de Treville", where
    # the title is "Monsieur")

    @property
    def text(self) -> str:
        if self.shown:
            return self.shown.most_common(1)[0][0]
        words = " ".join(self.words)
        return f"{self.title}{'.' if self.title in _DOTTED else ''} {words}" if self.title else words


_DOTTED = {"Mr", "Mrs", "Ms", "Dr", "M", "Mme", "Mlle", "Mdlle"}


def _written(title: str | None, written: str | None, words: list[str]) -> str:
    """A mention as the book writes it: "M. Vandenhuten" (title "Monsieur"), "Mdlle. Henri", "Mr. Gray";
    a title written in full is shown short where it has a short form ("Mister O'Hara": "Mr. O'Hara")."""
    if title is None:
        return " ".join(words)
    t = written if written in _DOTTED and SAME_TITLE.get(written, written) == title else title
    return f"{t}{'.' if t in _DOTTED else ''} {' '.join(words)}"


def _ordinary(text: str) -> set[str]:
    """Capitalised words the book also writes in lower case often (ordinary words)."""
    low: Counter = Counter()
    cap: Counter = Counter()
    for w in _WORD.findall(text):
        (low if w[:1].islower() and not _ELIDED.match(w) else cap)[w.lower()] += 1
    return {w for w, n in cap.items() if low[w] > 0.2 * n}


def mentions(text: str, skip_spans: Sequence[tuple[int, int]] = ()) -> dict[tuple, Form]:
    """Every name form of `text` with its counts, outside `skip_spans`; a word the book uses as a title
    (`_addresses`: "Maister Weston") read as one."""
    ordinary = _ordinary(text)  # read once for both passes
    forms = _mentions(text, skip_spans, ordinary)
    extra, named = _addresses(forms), _given_after_all(text, forms, ordinary)
    return _mentions(text, skip_spans, ordinary, extra, named) if extra or named else forms


def _given_after_all(text: str, forms: dict[tuple, Form], ordinary: set[str]) -> frozenset[str]:
    """Words left out as no one's name ("Christian") that are given names, which the book writes three
    times or more before a name it writes with a title or after another word ("Christian Cantle" beside
    "Grandfer Cantle" in The Return of the Native): there, a name."""
    acting = Counter()  # a name written with a title or after another word, by its speech and acts
    for k, f in forms.items():
        if (k[0] or len(k[1]) >= 2) and k[1][-1] not in PLACE_WORDS:
            acting[k[1][-1]] += f.person
    lasts = {w for w, n in acting.items() if n >= 2}  # ("Grandfer Cantle" speaks; "Christian Kings" do not)
    pairs = [(m.group(1), m.group(2)) for m in re.finditer(r"\b([A-Z][a-z]+)(?= ([A-Z][a-z]+)\b)", text)
             if m.group(1) in NOT_PEOPLE and given_sex(m.group(1)) and m.group(2) in lasts]
    seen = Counter(w for w, after in pairs if after.lower() not in ordinary)  # (not "Christian Kings")
    return frozenset(w for w, n in seen.items() if n >= 3)


def _addresses(forms: dict[tuple, Form]) -> frozenset[str]:
    """Words the book writes before two surnames or more that it also writes after a title, and seldom
    alone, as a title: a dialect's or a foreign one ("Maister Weston" and "Maister Hatfield" beside "Mr.
    Weston" and "Mr. Hatfield", "Duc de Beaufort"); not a given name ("Pitt Crawley", "Pitt Binkie")."""
    titled = {k[1][0] for k in forms if k[0] and len(k[1]) == 1 and not _known(k[1][0])}
    before = defaultdict(Counter)
    for (title, words), f in forms.items():
        if title is None and len(words) == 2 and words[1] in titled and not _known(words[0]):
            before[words[0]][words[1].removesuffix("s")] += f.count
    return frozenset(w for w, after in before.items() if len(after) >= 2 and sum(after.values()) >= 5
                     and sum(after.values()) > forms.get((None, (w,)), Form(None, ())).count)


def _mentions(text: str, skip_spans: Sequence[tuple[int, int]], ordinary: set[str],
              extra: frozenset[str] = frozenset(), named: frozenset[str] = frozenset()) -> dict[tuple, Form]:
    skips = sorted(skip_spans)
    starts = [a for a, _ in skips]

    def skipped(pos: int) -> bool:
        i = bisect_right(starts, pos) - 1
        return i >= 0 and skips[i][0] <= pos < skips[i][1]

    text = _unwrap(text)
    surnames = _ordinary_surnames(text, ordinary)
    forms: dict[tuple, Form] = {}
    for m in _MENTION.finditer(text):
        if skipped(m.start()) or _SAINT.search(text, max(0, m.start() - 4), m.start()) \
                or m.group("name").startswith(("St ", "St\t")):
            continue  # "St. Louis", "St. Moritz": a town, a church or a saint, no one in the book
        title = SAME_TITLE.get(m.group("title"), m.group("title"))
        words = [("d" + w[1:]) if _ELIDED.match(w) else w for w in m.group("name").split()]
        before = text[max(0, m.start() - 5):m.start()]
        if title is None and len(words) == 1 and words[0] in FEMALE + MALE and before.endswith(("the ", "The ")):
            skipped_chars = 0  # a role for a name: "the Queen", "the Duchess"
        else:
            title, words, skipped_chars = _front(title, words, ordinary, surnames, extra, named)
        if not words:
            continue
        pos = m.start("name") + skipped_chars
        key = (title, tuple(w for w in words if w not in INNER))  # "de Treville" is "Treville"
        f = forms.setdefault(key, Form(title, key[1]))
        f.shown[_written(title, m.group("title"), words)] += 1
        f.count += 1
        f.first = pos if f.first is None else f.first
        f.positions.append(pos)
        f.bang += text[m.end():m.end() + 1] == "!"
        f.opens += text[m.start() - 1:m.start()] in _OPENING and text[m.end():m.end() + 1] in (",", "!")
        end = pos + len(" ".join(words))
        f.cut += end < m.end() and bool(_CUT.match(text, end))
        f.owned += title is None and bool(_OWNER.search(text, max(0, pos - 30), pos))
        pronoun = _PRONOUN.search(text, m.end(), m.end() + 60)
        if pronoun:
            f.he += pronoun.group().lower() in ("he", "his", "him")
            f.she += pronoun.group().lower() in ("she", "her")
        at = m.start() if title is not None else pos  # before the name as read ("the King of | Spain")
        prev = [w.lower() for w in _WORD.findall(text[max(0, at - 24):at])]
        nxt = _WORD.findall(text[m.end():m.end() + 16])
        if prev and prev[-1] == "of":
            f.of += 1  # "Anne of Austria said": the act is Anne's
        elif ((prev and prev[-1] in SPEECH) or (nxt and nxt[0].lower() in ACTS)
                or (len(prev) > 1 and prev[-1] == "the" and prev[-2] in SPEECH)):  # "said the Hatter"
            f.person += 1
        if title is None and prev and prev[-1] in ARTICLES:
            f.article += 1  # "the Louvre", "his Eminence": not a person's name
        if title is None and len(prev) > 1 and prev[-1] in ("at", "to") and prev[-2] in LOOKS - {"returned"}:
            f.person += 1  # "smiled at Elinor", "said to Elinor" (not "returned to England")
        elif title is None and prev and (prev[-1] in PLACE_PREP or (len(prev) > 1 and prev[-1] == "the"
                                                                    and prev[-2] in PLACE_PREP)):
            f.place += 1
    return forms


_SAINT = re.compile(r"\bSt\.?[ \t]+$")
_OPENING = ("\"", "“", "‘", "'")
_OWNER = re.compile(r"\b[A-Z][a-z]+[’']s[ \t]+$")  # "Wolf's | Crag"


WRAPPED_LINE = 40  # characters: a line this long that breaks was wrapped; a shorter one ends (a heading)


def _unwrap(text: str) -> str:
    """`text` with the line breaks of wrapped lines made spaces, the same length: a name may run
    over a wrapped line ("Miss Lucy / Steele") but not from a heading into the text under it
    ("Down the Rabbit-Hole / Alice was beginning")."""
    out, start = list(text), 0
    for i, ch in enumerate(text):
        if ch == "\n":
            if i - start >= WRAPPED_LINE:
                out[i] = " "
            start = i + 1
    return "".join(out)


def _front(title: str | None, words: list[str], ordinary: set[str], surnames: frozenset[str] = frozenset(),
           extra: frozenset[str] = frozenset(), named: frozenset[str] = frozenset()
           ) -> tuple[str | None, list[str], int]:
    """(title, name words, characters dropped in front) of one mention: ordinary words, titles
    and non-names in front dropped (a sentence's first word is capitalised anyway; "Sir" in
    "Dear Sir John" becomes the title), cut before an ordinary word inside; None words for no name.
    An ordinary word in `surnames` (`_ordinary_surnames`) is a name after a title or a first name."""
    dropped = 0
    if not (title is not None and words[0] in PARTICLES):  # "M. de Treville" keeps its particle
        while words and ((words[0].lower() in ordinary and not (title is not None and words[0] in surnames))
                         or words[0] in TITLES or (words[0] in NOT_PEOPLE and words[0] not in named)
                         or words[0] in FUNCTION or words[0] in extra) \
                and not (len(words) == 2 and _ROMAN.fullmatch(words[1])):
            if title is None and words[0] in TITLES and len(words) > 1:
                title = SAME_TITLE.get(words[0], words[0])
            dropped += len(words[0]) + 1
            words, address = words[1:], words[0] in extra
            while address and words and words[0] in PARTICLES:  # "Duc de Beaufort": Beaufort
                dropped, words = dropped + len(words[0]) + 1, words[1:]
            while words and words[0] == "of":  # "Tower of London": London; "King of Spain": Spain
                dropped, words, title = dropped + 3, words[1:], None
    if "of" in words:  # "Anne of Austria", not "Miss Musgrove of Uppercross" nor one person asked of another
        i = words.index("of")  # ("inquired Charley of Michael")
        if title is not None or i != 1 or i + 1 == len(words) or given_sex(words[i + 1]):
            words = words[:i]
    cut = next((i for i, w in enumerate(words) if i and w not in INNER and w not in STREETS
                and ((w.lower() in ordinary and w not in surnames) or (w in NOT_PEOPLE and w not in named))), None)
    words = words[:cut] if cut is not None else words
    while words and words[-1] in INNER:
        words = words[:-1]
    if words and (_ROMAN.fullmatch(words[0]) or (words[0].endswith("s") and words[0][:-1] in TITLES)):
        return title, [], dropped  # "XIV" alone; "Captains Wentworth and Harville": two men
    if not words or (words[0] in PARTICLES and title is None):
        return title, [], dropped
    if len(words) == 1 and ((words[0].lower() in ordinary and not (title is not None and words[0] in surnames))
                            or (words[0] in NOT_PEOPLE and words[0] not in named)):
        return title, [], dropped
    return title, words, dropped


_ADDRESSED = re.compile(r"\b(?:Mr|Mrs|Miss|Ms|Dr|Mme|Mlle)\.?[ \t]+([A-Z][a-z]+)\b")


def _ordinary_surnames(text: str, ordinary: set[str]) -> frozenset[str]:
    """Ordinary words the book writes after "Mr.", "Mrs.", "Miss" or "Dr." three times or more: surnames
    ("Mrs. Day" 18 times in Under the Greenwood Tree, whose daughter is "Fancy Day"; "day" is an ordinary
    word). Not after "Sir" or "Lord", which address a rank ("Sir Knight", "Sir Prior"), nor a word that names
    a place's kind ("Mr. Hall" would make Hamley Hall a man)."""
    seen = Counter(m.group(1) for m in _ADDRESSED.finditer(text)
                   if m.group(1).lower() in ordinary and m.group(1) not in PLACE_WORDS)
    return frozenset(w for w, n in seen.items() if n >= 3)


def _surname(words: tuple[str, ...]) -> str:
    return words[-1]


def merge(forms: dict[tuple, Form]) -> list[list[Form]]:
    """The forms grouped into entries (see the module docstring); ambiguous forms left out."""
    lasts = {f.words[-1] for f in forms.values() if len(f.words) >= 2}
    forms = {k: f for k, f in forms.items()  # "the Newland Archers", "the Bute Crawleys": a couple, a family
             if not (len(f.words) >= 2 and f.words[-1].endswith("s") and f.words[-1][:-1] in lasts)}
    full = {k: f for k, f in forms.items() if len(f.words) >= 2}
    bare = Counter({f.words[0]: f.count for k, f in forms.items() if k[0] is None and len(f.words) == 1})
    by_first_count = Counter()
    for f in full.values():
        by_first_count[f.words[0]] += f.count
    # a name used alone far more than in all its full forms together ("Milady" against "Milady de
    # Winter" and "Milady Clarik") is the person; its full forms join it
    dominant = {w for w, n in bare.items() if n > 20 * by_first_count.get(w, n)}
    entity: dict[tuple, tuple] = {}  # form key -> the key of the entry it joins
    names = {f.words: (None, f.words[:1]) for f in full.values()  # untitled full words -> entry key
             if f.title is None and f.words[0] in dominant}  # ("Mr. Edmund Bertram" is Edmund's too)
    for k, f in sorted(full.items(), key=lambda kv: -kv[1].count):
        if f.title in WIVES or (f.title in FEMALE and f.title not in DAUGHTERS and given_sex(f.words[0]) == "m"):
            # "Mrs. John Knightley" is his wife, and so is "Countess Raymond de Chelles" (a woman's title before
            # a man's given name)
            entity[k] = k
            continue
        if f.words[0] in dominant and f.title is None:  # ("Lady Mary Grierson" is not the Mary of the book)
            entity[k] = names.setdefault(f.words, (None, f.words[:1]))
            continue
        # "Miss Lucy Steele" and "Lucy Steele" are one person
        names.setdefault(f.words, k)
        entity[k] = names[f.words]
    ranked = {entity[k] for k, f in full.items() if f.title and f.title not in FAMILIAR and f.count >= 2}  # (not
    # Vanity Fair's one joking "Lord Joseph Sedley")
    pet_of = {}  # a pet name's own entry (a name used alone) -> the entry it joined ("Becky" -> "Rebecca")
    for words in list(names):  # "Becky Sharp" is Rebecca Sharp (but "Tom Bertram" is not his father Sir Thomas)
        formal = [w for w in names if len(words) >= 2 and w[1:] == words[1:] and w[0] in NICKNAMES.get(words[0], ())]
        if len(formal) == 1 and names[formal[0]] != names[words] and names[formal[0]] not in ranked:
            old, new = names[words], names[formal[0]]
            if old == (None, words[:1]):  # the pet name is the person ("Sissy" 128 times): the formal joins it,
                if new == (None, formal[0][:1]):  # unless both are ("Rebecca" 412, "Becky" 325): the pet joins
                    pet_of[old] = new
                else:
                    old, new = new, old
            for w in names:
                names[w] = new if names[w] == old else names[w]
            for j in entity:
                entity[j] = new if entity[j] == old else entity[j]
    _join_held_names(names, entity, full)
    by_first = defaultdict(set)
    by_last = defaultdict(set)
    for words, k in names.items():
        by_first[words[0]].add(k)
        by_last[_surname(words)].add(k)
    in_full = Counter()  # an entry's mentions in full
    for k, f in full.items():
        in_full[entity[k]] += f.count
    for w, n in bare.items():  # "Emmy", "Miss Emmy": the one person named in full "Amelia" (or Emily, Emma)
        if w not in by_first and n >= 3 and w in NICKNAMES:
            formal = {e for t in NICKNAMES[w] for e in by_first.get(t, ()) if in_full[e] >= 3}
            if len(formal) == 1:
                by_first[w] = formal
    titled_with = defaultdict(set)  # (title, first name) -> full entries seen with that title
    for k, f in full.items():
        if f.title:
            titled_with[(f.title, f.words[0])].add(entity[k])
    given = _given_sexes(forms, by_first)
    sex_of: dict[tuple, str | None] = {}  # entry -> its sex, by its most used full form that tells
    for k, f in sorted(full.items(), key=lambda kv: -kv[1].count):
        sex_of[entity[k]] = sex_of.get(entity[k]) or _sex(f, given)
    counts = Counter({k: f.count for k, f in forms.items()})
    alone = Counter()  # a first name's mentions alone or after "Miss" ("Rachel", "Miss Rachel")
    for (title, words), n in counts.items():
        if len(words) == 1 and (title is None or title in DAUGHTERS):
            alone[words[0]] += n
    weight = Counter(in_full)  # ... with its first name's alone
    for words, k in names.items():
        weight[k] += alone[words[0]] if len(by_first[words[0]]) == 1 else 0
    first_of = {k: words[0] for words, k in names.items()}
    firsts_of = defaultdict(set)  # ... all of them ("Richard Bradshaw" and "Dick Bradshaw")
    for words, k in names.items():
        firsts_of[k].add(words[0])
    minor = {e for e in names.values() if in_full[e] < 3}  # a full name once or twice ("Ramazan Dulany")
    maiden = {}  # entry -> the surname of its earliest full name ("Amelia Sedley", later Amelia Osborne), of
    # those named three times if any (not a contents line's "Amelia Invades the Low Countries")
    for k, f in sorted(full.items(), key=lambda kv: (kv[1].count < 3, kv[1].first if kv[1].first is not None
                                                      else 1 << 60)):
        maiden.setdefault(entity[k], _surname(f.words))
    titles_of = defaultdict(set)  # entry -> the titles its forms are written with
    for k, f in full.items():
        if f.title:
            titles_of[entity[k]].add(f.title)
    missed_in_full = {entity[k] for k, f in full.items() if f.title in DAUGHTERS}  # "Miss Arabella Wilmot"
    singles = dict(sorted(((k, f) for k, f in forms.items() if k not in full), key=lambda kv: -kv[1].count))
    # a name used alone that is no family's surname ("d'Artagnan"; not "Crawley", which a chapter heading's
    # "Crawley of James" made dominant, beside Pitt, Rawdon and Bute Crawley)
    alone_name = {w for w in dominant if not by_last.get(w, set()) - minor}
    split: dict[tuple, list[tuple]] = {}  # an ambiguous first name -> the full names that share it
    unsure = set()  # surnames whose "Mr." may be any of two men or more
    double = {k for words, k in names.items() if len(words) == 2 and given_sex(words[1]) == given_sex(words[0])
              and given_sex(words[1]) and by_last[words[1]] == {k}
              and not any(counts[(t, (words[1],))] for t in TITLES)}  # "Mary Ann": two given names, no surname
    surnames = set(by_last) | {f.words[-1] for k, f in singles.items() if f.title}
    for k, f in singles.items():
        word = f.words[-1]
        if f.title in TITLES and word.endswith("s") and word[:-1] in surnames \
                and (word[:-1] in by_last or not given_sex(word[:-1])) or f.title in PLURAL_TITLES:
            continue  # "the Miss Musgroves", "Messieurs Jones": two (not "Mr. Williams" beside "Sir William")
        if f.title:
            seen = titled_with.get((f.title, word), set())
            if len(seen) > 1:  # "Sir William" is Sir William Ashton (73 in full), not Sir William Hamilton (3)
                top = sorted(seen, key=lambda e: (-in_full[e], str(e)))  # or Sir William Wallace (2)
                seen = {top[0]} if in_full[top[0]] >= 10 * in_full[top[1]] else seen
            if not seen and f.title in FAMILIAR and len(by_first.get(word, set()) - minor) == 1 \
                    and not by_last.get(word, set()) - minor:
                # "Miss Katrine", "Mr. Franklin": a title with the first name of one full name, of that sex
                # ("Sir Henry" and "Lady Mary" are a baronet's and a peer's children, not Henry Crawford)
                seen = {e for e in by_first[word] - minor if sex_of.get(e) in (None, "m" if f.title in MALE else "f")}
            if f.title in DAUGHTERS and not seen:  # "Miss Woodhouse": the one full name with that surname,
                # or the one woman's among them, or the one of them the book names far most ("Miss Verinder"
                # is Rachel, not her mother Julia Verinder), a young woman the book calls by her first name
                # ("Miss Thornton" is not her mother Hannah Thornton, named twice) or one it titles "Miss" in full
                # ("Miss Wilmot" is "Miss Arabella Wilmot", called "Arabella" twice)
                kin = by_last.get(word, set())  # (else of all, a full name written once or twice too where her
                # first name is used more than "Miss X": "Catherine Morland" once beside "Catherine" 420 times)
                # Where the book shows sisters ("the Miss Brownings", "the Misses Jenkyns"; or one sister it calls
                # "Miss Eliza" beside one named half as often as "Miss X" it never calls "Miss Mary"), "Miss X" is
                # the eldest, and a sister it calls "Miss" with her first name is a younger one ("Miss Phoebe";
                # "Miss Millward" is Mary, not Eliza Millward; not Julia Verinder, Rachel's mother, named seldom)
                called = {e: counts[(f.title, (first_of[e],))] >= max(3, 0.3 * f.count) for e in kin}
                named = {e: c for e, c in called.items() if e not in minor}
                sisters = counts[("Misses", (word,))] or any(
                    counts[(t, (word + end,))] for t in DAUGHTERS + ("Misses", "Mlles") for end in ("s", "es")) or (
                    any(named.values()) and any(not c and sex_of.get(e) == "f" and titles_of[e] <= set(DAUGHTERS)
                                                and weight[e] >= f.count / 2 for e, c in named.items()))
                if sisters:
                    kin = {e for e in kin if not called[e]}
                seen = {e for e in _one_of(kin - minor, "f", sex_of, weight) or
                        {e for e in _one_of(kin, "f", sex_of, weight) if alone[first_of[e]] > f.count}
                        if (alone[first_of[e]] >= max(5, 0.1 * f.count) or e in missed_in_full)
                        and _classes(titles_of[e]) <= {"Miss"}
                        and maiden.get(e) == word}  # "Miss Osborne" is not Amelia, Mrs. Osborne by marriage
            elif f.title in RANKS and not seen:  # "Captain Wentworth": the one man's, as for "Miss"
                men = by_last.get(word, set())  # (or the one full name whose sex nothing tells: "Austin Sloper")
                seen = {e for e in _one_of(men, "m", sex_of) or {e for e in men if len(men) == 1 and not sex_of.get(e)}
                        if titles_of[e] <= {f.title}}  # ("Captain Lennox" is not Mr. Henry Lennox)
                if not seen:  # else the one of them the book writes in full with that rank ("Major William
                    seen = {e for e in men - minor if f.title in titles_of[e]}  # Dobbin", beside Sir William)
                    seen = seen if len(seen) == 1 else set()
            elif f.title in ("Mr", "Monsieur") and not seen:
                # "Mr." with a surname is the one man of that surname named in full ("Mr. Crawford" is Henry
                # Crawford) unless the book calls that man "Mr." with his first name to tell him from "Mr.
                # Blake" ("Mr. Franklin"), or has a "Mrs." of that surname: then he is most often the family's
                # father, whose full name is seldom written ("Mr. Musgrove", "Mr. Hale"), unless the father is
                # titled otherwise ("General Tilney": "Mr. Tilney" is Henry)
                plain = {e for e in by_last.get(word, set()) - minor if _classes(titles_of[e]) <= {"Mr"}}  # (not
                # "Sir Michael Audley": "Mr. Audley" is Robert)
                wife = counts[("Mrs" if f.title == "Mr" else "Madame", (word,))] >= f.count / 4 and not any(
                    counts[(t, (word,))] >= max(3, f.count / 4) for t in MALE if t not in FAMILIAR)
                seen = set() if wife else {e for e in _one_of(plain, "m", sex_of)
                                           if not _told_apart(counts, word, firsts_of[e], f.count)}
            if not seen and f.title in KIN:  # "Aunt Norris" is Mrs. Norris, "Uncle Pumblechook" Mr. Pumblechook
                seen = next(({entity.get(j, j)} for j in ((t, (word,)) for t in KIN[f.title]) if counts[j]), set())
            if not seen and word in alone_name and f.title not in WIVES:  # "Monsieur d'Artagnan"
                seen = {(None, (word,))}
            if len(seen) == 1:
                entity[k] = next(iter(seen))
                titles_of[entity[k]].add(f.title)
            elif f.title == "Mr" and len({e for e in by_last.get(word, set()) - minor if sex_of.get(e) == "m"}) > 1:
                unsure.add(word)  # "Mr. Wilcox" beside Henry, Charles and Paul Wilcox: any of them, no one
                continue
            elif f.title in DAUGHTERS and len({e for e in by_last.get(word, set()) if sex_of.get(e) == "f"
                                               and not titles_of[e] - set(DAUGHTERS)
                                               and weight[e] >= f.count / 2}) > 1:
                continue  # "Miss Schlegel" (75) beside Margaret (637) and Helen Schlegel (460): either, no one
            else:
                entity[k] = k  # a person known by title and name ("Mrs. Dashwood")
    regnal = {k for k in names.values() if all(_ROMAN.fullmatch(w[-1]) for w, e in names.items() if e == k)}  # a
    # king by his number ("Henry VIII", "George IV")
    titled_single = defaultdict(Counter)  # surname -> titled forms of their own ("Mr. Knightley")
    titled_joined = defaultdict(Counter)  # surname -> entries its titled forms joined ("Captain Craigengelt")
    for k, f in singles.items():
        if f.title and entity.get(k) == k:
            titled_single[f.words[-1]][k] += f.count
        elif f.title and k in entity:
            titled_joined[f.words[-1]][entity[k]] += f.count
    for k, f in singles.items():
        if f.title:
            continue
        word = f.words[-1]
        if word.endswith("s") and (word[:-1] in by_last or word[:-1] in titled_single) \
                and not any(counts[(t, (word,))] for t in TITLES):
            continue  # "the Steeles": a family (not "Williams" beside "Mr. Williams" and "Sir William")
        if word in alone_name:
            entity[k] = pet_of.get(k, k)
            continue
        fulls = by_first.get(word, set())  # (a titled full name is no heading: "Miss Matilda Murray" twice)
        heading = fulls <= minor and not any(titles_of[e] for e in fulls) and (
            f.count > 10 * sum(in_full[e] for e in fulls) or by_last.get(word, set()) - minor)  # (or the surname
        # of a family named in full: a heading's "Driscoll Spares His Slaves" once beside Tom and Percy Driscoll)
        doubles = {e for e in by_first.get(word, ()) if e in double}
        if word in by_first and not heading and by_first[word] == doubles:
            entity[k] = k  # "Mary" is not "Mary Ann", a child called by both her given names
            continue
        if word in by_first and not heading:  # (not "Dobbin", hundreds of times, beside a heading's "Dobbin Licked")
            most = max(in_full[e] for e in by_first[word])  # "Tom" is Tom Bertram (68 in full), not Tom Oliver
            owners = {e for e in by_first[word] if e not in minor or 10 * in_full[e] >= most}  # (once or twice)
            kings = owners & regnal
            if kings and owners - kings and max(in_full[e] for e in owners - kings) >= max(in_full[e] for e in kings):
                owners = owners - kings  # "Henry" is Henry Ashton, not Henry VIII, named in full as seldom (but
                # "Louis" is Louis XIV beside Louis de Conde)
            if f.count < 3:  # a first name alone twice may be anyone's ("John" beside John Yates)
                entity[k] = k
            elif len(owners) == 1:
                entity[k] = next(iter(owners))
            else:  # two people share the first name: each mention is the one named last before it
                split[k] = sorted(owners, key=str)
            continue
        if word in unsure:  # "Bertram" beside an ambiguous "Mr. Bertram" is not Lady Bertram
            continue
        sex = _sex(f, given)  # "Betteredge" beside Gabriel and Penelope Betteredge: he
        if word in titled_joined:  # "Craigengelt" (90) is Captain John Craigengelt ("Captain Craigengelt" 26)
            top, n = titled_joined[word].most_common(1)[0]  # not "Mr. Craigengelt", once
            if n >= 2 / 3 * (sum(titled_joined[word].values()) + sum(titled_single.get(word, {}).values())) \
                    and sex in (None, sex_of.get(top) or sex):
                entity[k] = top
                continue
        if word in titled_single:
            total = sum(titled_single[word].values())
            top, n = titled_single[word].most_common(1)[0]
            one_sex = len({t in FEMALE for t, _ in titled_single[word]}) == 1  # "Lord" and "Monsieur de Buckingham"
            # unless the pronouns after it tell the other sex and someone of that surname is named in full:
            # "Bounderby" ("he") is not "Mrs. Bounderby" but Josiah Bounderby, whom "Mr." joined
            if not (sex and sex != ("f" if top[0] in FEMALE else "m") and word in by_last):
                if n >= 2 / 3 * total or one_sex:
                    entity[k] = top
                elif f.count > 10 * total and word not in by_last:
                    entity[k] = k  # "Jo", 1223 times beside "Miss Jo" 5, "Dr. Jo" 2, "Sister Jo": a name of its own
                continue
        if word in by_last and f.place < 0.2 * f.count:  # ("Paris" is no one's surname)
            one = by_last[word] if len(by_last[word]) == 1 else _one_of(by_last[word], sex, sex_of) if sex else ()
            if len(one) == 1:
                entity[k] = next(iter(one))
            continue
        rank = SAME_TITLE.get(word, word)  # "the Doctor" is the book's one "Dr."
        if rank in RANKS:  # "the Sergeant" is the one sergeant the book names
            held = {entity.get(j, j) for j, g in forms.items() if g.title == rank and j in entity}
            if len(held) == 1:
                entity[k] = next(iter(held))
                continue
        entity[k] = k
    groups: dict[tuple, list[Form]] = defaultdict(list)
    for k, e in entity.items():
        groups[e].append(forms[k])
    for k, owners in split.items():
        for owner, part in zip(owners, _split_by_nearest(forms[k], [groups[o] for o in owners])):
            if part.count:
                groups[owner].append(part)
    _fold_surnames(groups, by_last, by_first, minor, sex_of, titles_of, counts, firsts_of)
    _fold_ranks(groups, by_last, sex_of)
    _fold_womens_titles(groups, by_last, sex_of, counts, minor)
    _fold_pet_names(groups, given)
    return list(groups.values())


def _join_held_names(names: dict, entity: dict, full: dict) -> None:
    """A name of two words that a longer name holds as its first and last words or its first or last two
    joins that one longer name's entry, or of several the one written three times as often as any other:
    "Frances Henri" and "Frances Evans" are "Frances Evans Henri" (beside a misprint's "Frances Evan Henri"
    once), "Douglas Ashton" is "Sholto Douglas Ashton" (not "Peter Arley" beside "Peter Marmaduke Arley
    Jenkyns"; "Reverend Bute Crawley" is Bute Crawley). The longer name is written twice or more and names
    no place ("Audley Court. Robert Audley"), holds no two people ("Roger Stephen Osborne Hamley": Roger
    Hamley and Osborne Hamley), and has the titles of rank of the shorter ("William Walter Elliot" is not
    Sir Walter Elliot)."""
    weight, count, ranks = Counter(), Counter(), defaultdict(set)
    for k, f in full.items():
        weight[entity[k]] += f.count
        count[f.words] += f.count
        if f.title and f.title not in FAMILIAR + WIVES:  # (not "Mrs. Bute Crawley", his wife)
            ranks[f.words].add(f.title)
    def core(w):  # "Reverend Bute Crawley": Bute Crawley
        return core(w[1:]) if len(w) > 2 and w[0] in TITLE_WORDS else w

    held = {w: [h for h in names if len(h) == 2 and h in ((core(w)[0], w[-1]), core(w)[:2], w[-2:])]
            for w in names if len(w) >= 3 and count[w] >= 2 and not set(w) & PLACE_WORDS}
    held = {w: hs for w, hs in held.items() if len({h[0] for h in hs}) == 1}
    for words in [w for w in names if len(w) == 2]:
        into = sorted({names[w] for w, hs in held.items() if words in hs and ranks[words] <= ranks[w]},
                      key=lambda e: (-weight[e], str(e)))
        if not into or names[words] in into or (len(into) > 1 and weight[into[0]] < 3 * max(1, weight[into[1]])):
            continue
        old, new = names[words], into[0]
        for w in names:
            names[w] = new if names[w] == old else names[w]
        for j in entity:
            entity[j] = new if entity[j] == old else entity[j]


def _pet_of(pet: str, name: str, bare: bool) -> bool:
    """Whether `pet` is a familiar form of the given name `name`: one qa.given_names knows ("Meg",
    "Margaret"), or, where only `name` is a known given name, its start ("Len", "Leonard"; "Reub",
    "Reuben") or, for a name used alone (`bare`), the name with a pet ending ("Sophy", "Sophia"; "Jimmy",
    "Jim"); two known given names are two names ("Eli", "Eliza"), and "Johnson" or "Williams" no one's pet."""
    if name in NICKNAMES.get(pet, ()):
        return True
    if pet == name or _known(pet):
        return False
    if not _known(name):  # two names no list knows, both used alone: the pet is the formal name's first three
        stem = re.sub(r"(?:ie|ey|y)$", "", pet)  # letters or more with a pet ending ("Roxy", "Roxana")
        return bare and len(stem) >= 3 and stem != pet and len(name) > len(stem) + 1 and name.startswith(stem)
    if len(pet) >= 3 and name.startswith(pet):
        return True
    stems = (name, name + name[-1], name.rstrip("aeiou")) if bare else ()
    return any(len(s) >= 3 and pet.startswith(s) and pet[len(s):] in ("ie", "y", "ey") for s in stems)


def _known(word: str) -> bool:
    return given_sex(word) is not None or word in NICKNAMES


def _fold_pet_names(groups: dict, given: dict) -> None:
    """An entry of a given name used alone or after "Miss" ("Sophy", "Miss Livy") joins the one entry whose
    given name it is a pet form of ("Sophia", "Olivia"), the smaller into the larger."""
    def firsts(g):  # the entry's given names: its full names' first words, else its name used alone
        out = {f.words[0] for f in g if len(f.words) >= 2 and f.title not in WIVES}
        return out or {f.words[0] for f in g if f.title is None}

    def called_alone(f, names):  # a form of the entry that is one of its given names, or their familiar form
        return not f.title and len(f.words) == 1 and (f.words[0] in names or bool(set(NICKNAMES.get(f.words[0], ()))
                                                                                 & names))

    def sex(g):
        said = {_sex(f, given) for f in g} - {None}
        return next(iter(said)) if len(said) == 1 else None

    received = set()  # entries that took a pet name in, not themselves one ("Sam" into "Samson" into ...)
    for key in sorted(groups, key=lambda k: sum(f.count for f in groups[k])):
        g = groups.get(key)
        if not g or key[0] not in (None,) + DAUGHTERS or len(key[1]) != 1 or any(len(f.words) > 1 for f in g):
            continue
        word = key[1][0]
        if any(f.title not in (None,) + DAUGHTERS for f in g):
            continue
        n = sum(f.count for f in g)
        if key in received or n < MIN_MENTIONS:  # (not "Betsy" three times, a maid beside Elizabeth)
            continue
        into = [k for k, h in groups.items() if k != key and sum(f.count for f in h) >= n
                and any(_pet_of(word, w, all(len(f.words) == 1 for f in h)) for w in firsts(h))]
        if not into and not _known(word):  # a formal name no list knows, used less than its pet ("Roxana", "Roxy")
            into = [k for k, h in groups.items() if k != key and len(k[1]) == 1 and k[0] is None
                    and sum(f.count for f in h) >= n and not _known(k[1][0]) and _pet_of(k[1][0], word, True)]
        if len(into) > 1:  # of several, the one called by a first name alone ("Sammy": Sam Weller, not Samuel
            into = [k for k in into if any(called_alone(f, firsts(groups[k])) for f in groups[k])]  # Pickwick)
        if len(into) != 1:
            continue
        s, t = sex(g), sex(groups[into[0]])
        if s and t and s != t:
            continue
        groups[into[0]].extend(groups.pop(key))
        received.add(into[0])


def _fold_surnames(groups: dict, by_last: dict, by_first: dict, minor: set, sex_of: dict, titles_of: dict,
                   counts: Counter, firsts_of: dict) -> None:
    """A man's surname entry ("Venn", "Mr. Venn": 157 mentions) joins the one man the book names in
    full with it ("Diggory Venn", 45) where no woman of that surname is named as often as a tenth of
    it (a wife "Mrs. Venn" 3 times), the titles agree ("Mr. Elliot" is not Sir Walter Elliot; "Baron
    Front-de-Boeuf" is the Baron Reginald Front-de-Boeuf the book writes in full) and the
    book does not call that man "Mr." with his first name to tell him from a "Mr. Blake" ("Mr. Franklin")."""
    for key in list(groups):
        g = groups.get(key)
        if not g or key in by_last.get(key[1][-1] if key[1] else "", set()):
            continue
        words = {f.words for f in g}
        if len(words) != 1 or len(next(iter(words))) != 1:
            continue
        word = next(iter(words))[0]
        titles = {f.title for f in g if f.title}
        if word in by_first or any(t not in MALE for t in titles):
            continue
        n = sum(f.count for f in g)
        women = sum(counts[(t, (word,))] for t in FEMALE)
        owners = by_last.get(word, set()) - minor
        if len(owners) != 1 or women >= 0.1 * n:
            continue
        e = next(iter(owners))
        if e == key or sex_of.get(e) not in (None, "m") or e not in groups \
                or _told_apart(counts, word, firsts_of.get(e, set()), n):
            continue
        theirs = _classes(titles_of.get(e, set()))
        if not all((_classes({t}) <= {"Mr"} and theirs <= {"Mr"}) or (t in RANKS and theirs <= {t}) or t in theirs
                   for t in titles):  # ("Baron Front-de-Boeuf" is Baron Reginald Front-de-Boeuf)
            continue
        groups[e].extend(groups.pop(key))


def _fold_womens_titles(groups: dict, by_last: dict, sex_of: dict, counts: Counter, minor: set) -> None:
    """A woman's title with a surname ("Madame Olenska", "Countess Olenska") joins the one person named in full
    with that surname, a woman, where no man is called by it: Ellen Olenska, whose husband the book names
    otherwise (not "Mrs. Harville" beside Fanny Harville, Captain Harville's sister, nor a mother, "Madame
    Reuter", beside the daughter the book titles "Mdlle. Reuter")."""
    for key in [k for k in groups if k[0] in FEMALE and k[0] not in DAUGHTERS and len(k[1]) == 1]:
        word = key[1][0]
        owners = by_last.get(word, set()) - minor
        if len(owners) != 1 or key not in groups or any(counts[(t, (word,))] for t in MALE):
            continue
        e = next(iter(owners))
        if sex_of.get(e) != "f" or e not in groups or e == key or any(f.title in DAUGHTERS for f in groups[e]):
            continue  # ("Madame Reuter" is the mother of "Mdlle. Reuter", Zoraide Reuter)
        groups[e].extend(groups.pop(key))


def _fold_ranks(groups: dict, by_last: dict, sex_of: dict) -> None:
    """"Mr. X" joins the military or police ranks of that surname ("Captain" and "Lieutenant Maldon" beside
    "Mr. Maldon", "Superintendent Seegrave" beside "Mr. Seegrave") where the book names no man X in full:
    one man, called by his rank or plainly ("Mr. Wentworth", a curate, stays apart from Captain Frederick
    Wentworth; "Dr. Johnson", the lexicographer, from "Mr. Johnson", a shopkeeper)."""
    for key in [k for k in groups if k[0] == "Mr" and len(k[1]) == 1]:
        word = key[1][0]
        ranks = [k for k in groups if k[0] in RANKS and k[0] not in ("Dr", "Cardinal") and k[1] == (word,)]
        if not ranks or any(sex_of.get(e) != "f" for e in by_last.get(word, ())) or key not in groups:
            continue
        big, *small = sorted([key, *ranks], key=lambda k: -sum(f.count for f in groups[k]))
        for k in small:
            groups[big].extend(groups.pop(k))


def _told_apart(counts: Counter, surname: str, firsts: set, n: int) -> bool:
    """Whether the book calls the man named in full `firsts` `surname` "Mr." with his given name to tell him
    from "Mr. `surname`" (`n` mentions): half as often or more ("Mr. Franklin" 400 beside "Mr. Blake" 150; not
    "Mr. Caleb" 3 beside "Mr. Balderstone" 17), or three times where a "Mrs." of the name says "Mr." is her
    husband ("Mr. Richard" 6 times beside "Mr. Bradshaw" 225 and "Mrs. Bradshaw" 52 in Ruth: his son; not "Mr.
    Robert" for Robert Audley, whose uncle is "Sir Michael")."""
    mr = sum(counts[("Mr", (first,))] for first in firsts)
    return mr >= max(3, 0.5 * n) or (mr >= 3 and counts[("Mrs", (surname,))] >= max(3, 0.1 * n))


def _classes(titles: set) -> set:
    """Titles that say the same ("Miss", "Mlle", "Mademoiselle"; "Mr", "Monsieur") as one."""
    return {"Miss" if t in DAUGHTERS else "Mr" if t in ("Mr", "Monsieur") else t for t in titles}


def _given_sexes(forms: dict[tuple, Form], by_first: dict) -> dict[str, str]:
    """First names whose sex the book tells by a title before them ("Miss Julia", "Mr. Edmund Bertram",
    "Sir John"; not a wife's title: "Mrs. John Knightley"), where it tells one sex only."""
    seen = defaultdict(Counter)
    for f in forms.values():
        if f.title and f.title not in WIVES and f.words[0] in by_first and (f.title in MALE or f.title in FEMALE):
            seen[f.words[0]]["m" if f.title in MALE else "f"] += f.count
    return {w: s for w, c in seen.items() for s, n in c.items() if n >= 0.75 * sum(c.values())}  # ("Count
    # Katrine" once beside "Miss Katrine" 17 times)


def _sex(f: Form, given: dict[str, str] | None = None) -> str | None:
    """"m" or "f" by a name's title, else its first name (as the book titles it, else as given names
    go: qa.given_names), else the pronouns after its mentions; None when none of these tells."""
    if f.title in MALE or f.title in FEMALE:
        return "m" if f.title in MALE else "f"
    if len(f.words) >= 2:
        s = (given or {}).get(f.words[0]) or given_sex(f.words[0])
        if s:
            return s
    if f.he >= max(2, 2 * f.she):
        return "m"
    if f.she >= max(2, 2 * f.he):
        return "f"
    return None


def _one_of(keys: set, sex: str, sex_of: dict, weight: Counter | None = None) -> set:
    """The one full name of `keys` (entries sharing a surname), or the one of them of `sex` when every
    other one's sex is known ("Miss Bertram" stays apart from Julia Bertram when her sister Maria's
    is not); with `weight`, of several of that sex the one the book names three times as often as
    any other."""
    if len(keys) <= 1:  # a rank only a man's ("Captain Harville" is not his dead sister Fanny Harville)
        return {k for k in keys if sex_of.get(k) in ((sex,) if sex == "m" else (None, sex))}
    same = sorted((k for k in keys if sex_of.get(k) == sex), key=lambda k: (-(weight or {}).get(k, 0), str(k)))
    if not same or not all(sex_of.get(k) is not None for k in keys):
        return set()
    if len(same) == 1 or (weight and weight[same[0]] >= 3 * max(1, weight[same[1]])):
        return {same[0]}
    return set()


def _split_by_nearest(form: Form, owners: list[list[Form]]) -> list[Form]:
    """`form`'s mentions shared among `owners`: each goes to the owner named last before it (or,
    before any, first after it)."""
    marks = sorted((p, i) for i, g in enumerate(owners) for f in g if f.words[0] == form.words[0]
                   for p in f.positions)  # where each was named in full ("Jane Fairfax", "Jane Bates")
    at = [p for p, _ in marks]
    parts = [Form(form.title, form.words, shown=form.shown.copy()) for _ in owners]
    for pos in form.positions:
        j = bisect_right(at, pos) - 1
        i = marks[j][1] if j >= 0 else (marks[0][1] if marks else 0)
        parts[i].count += 1
        parts[i].positions.append(pos)
        parts[i].first = pos if parts[i].first is None else parts[i].first
    return parts


def _kind(group: list[Form], classes: Counter) -> str | None:
    """person, place, name, or None for no one (a common noun: "the Musketeers", "his Eminence")."""
    n = sum(f.count for f in group)
    titled = sum(f.count for f in group if f.title)
    person = sum(f.person for f in group)
    place = sum(f.place for f in group)
    article = sum(f.article for f in group)
    if any(f.words[-1] in PLACE_WORDS or (f.words[0] in PLACE_WORDS and not f.title
                                          and any(" of " in w for w in f.shown)) for f in group) and not (
            all(len(f.words) == 1 for f in group) and titled >= max(2, 0.1 * n)):  # ("Mr. Square", a tutor)
        return "place"
    if all(len(f.words) == 1 and not f.title for f in group) and sum(f.owned for f in group) >= 0.5 * n:
        return "place"  # "Wolf's Crag" (76 times), a castle: a name's second word after a possessive
    bang = sum(f.bang for f in group)
    if article >= 0.5 * n and sum(f.cut for f in group) >= 0.5 * n:
        return None  # "the Grand Master", "the Disinherited Knight": an epithet's first word, no one's name
    if all(len(f.words) == 1 and not f.title for f in group) and (bang >= 0.9 * n or bang >= 0.5 * n > person):
        return None  # "Mordioux!": an oath (a name called out is also written without "!")
    if all(len(f.words) == 1 and not f.title and not _known(f.words[0]) for f in group) \
            and sum(f.opens for f in group) >= 0.5 * n:
        return None  # "'Pardi,' cried Madame Duval", "'Nonsense, Margaret'": an exclamation opening speech
    if titled >= max(2, 0.1 * n):
        return "person"
    if all(len(f.words) == 1 and not f.title for f in group) and classes.get(group[0].words[0], 0) >= 0.2 * n:
        return None  # "the Musketeer" of "the Musketeers": a kind of person, not a name
    if article >= 0.3 * n:  # "the Hatter" is someone when he speaks and acts; "the Louvre" a place
        if person >= max(2, 0.1 * n):  # ... but "the Mavericks" a regiment, a family, a people
            word = group[0].words[0]
            plural = len(group) == 1 and word.endswith("s") and not word.endswith(("ss", "us", "is", "os"))
            return None if plural and article >= 0.8 * n else "person"
        return "place" if place >= 0.2 * n else None
    in_full = sum(f.count for f in group if len(f.words) >= 2)
    full = in_full >= 0.05 * n and (in_full >= 2 or n < 20)  # not "Rousseau of Egdon" once in 98 "Egdon"s
    given = not group[0].title and given_sex(group[0].words[0])  # "to Thomas", "from Frederick": seldom a place
    if place >= max(2, (0.5 if given else 0.3 if full else 0.2) * n) and place > person:
        return "place"
    if any(f.title in MALE or f.title in FEMALE for f in group):
        return "person"  # "Flamborough" 5 times beside "Mr. Flamborough" once
    if all(len(f.words) == 1 and not f.title for f in group) and given_sex(group[0].words[0]):
        return "person"  # a given name used alone: a first-person narrator and the narrator's family, never
        # "said X" ("Deborah", "George" in The Vicar of Wakefield), a play's part ("Agatha", "Amelia")
    if person >= max(2, 0.05 * n) or full:
        return "person"
    return "name"


def cast(text: str, skip_spans: Sequence[tuple[int, int]] = ()) -> list[dict]:
    """The book's people and places, most mentioned first: {name, kind, mentions, first, aliases,
    positions} (first: char offset of the first mention outside `skip_spans`; aliases: the other
    forms, most used first; positions: every mention's char offset)."""
    out = []
    plural = Counter(w[:-1] for w in _WORD.findall(text) if w.endswith("s") and w[:1].isupper())
    lowered = Counter(w for w in _WORD.findall(text) if w[:1].islower() and w.endswith("s"))
    classes = Counter({w: n + lowered.get(w.lower() + "s", 0) for w, n in plural.items()})
    for group in merge(mentions(text, skip_spans)):
        n = sum(f.count for f in group)
        if n < MIN_MENTIONS:
            continue
        # a full name, untitled first ("Lucy Steele"); else the form used most ("Mrs. Dashwood")
        group.sort(key=lambda f: (f.count < 0.05 * n, -len(f.words), f.title is not None and len(f.words) > 1,
                                  -f.count))  # not a form seen twice beside hundreds ("d'Artagnan Romances")
        canon = group[0]
        rest = sorted(group[1:], key=lambda f: -f.count)
        kind = _kind(group, classes)
        if kind is None or all(w in TITLE_WORDS for f in group for w in f.words):
            continue  # no one, or a title alone ("the Major", "Baronet", "Reverend Colonel")
        named = any(f.title for f in group) or given_sex(canon.words[0]) is not None \
            or sum(f.person for f in group) >= 2  # a title, a given name, or speech and acts: someone
        out.append({"name": canon.text, "kind": kind, "mentions": n, "named": named,
                    "first": min(f.first for f in group if f.first is not None),
                    "aliases": [f.text for f in rest], "positions": sorted(p for f in group for p in f.positions)})
    out.sort(key=lambda o: (-o["mentions"], o["name"]))
    out = out[:MAX_ENTRIES]
    named = sum(o.pop("named") for o in out)
    # a manual, a paper or a poem that capitalises its nouns has no cast: its "names" ("Returns",
    # "Invariant Sections", "Earth") have no title, no given name and no speech (under 5% of them
    # do there; 40% or more in every novel, memoir and essay we read)
    return out if named >= min(2, len(out)) and named >= 0.2 * len(out) else []


def introducing_sentence(text: str, pos: int) -> tuple[int, int]:
    """The sentence around `pos`, as `qa.reader.sentence_spans` (ask's splitter) cuts the text near it."""
    lo = max(0, text.rfind("\n\n", 0, pos))
    hi = text.find("\n\n", pos)
    hi = len(text) if hi < 0 else hi
    if pos - lo > 4000:  # a paragraph of a whole page: split from a little before
        lo = pos - 2000
    spans = sentence_spans(text[lo:hi])
    for i, (a, b) in enumerate(spans):
        if lo + a <= pos < lo + b:
            # a sentence that opens in lower case goes on from the one before: "'Serpent!' | screamed
            # the Pigeon." (speech cut at its "!'") introduced the Pigeon as "screamed the Pigeon."
            j = i
            while j > 0 and i - j < 2 and text[lo + spans[j][0]:lo + spans[j][1]].lstrip()[:1].islower():
                j -= 1
            a, b = lo + spans[j][0], lo + b
            return a + (len(text[a:b]) - len(text[a:b].lstrip())), b
    return pos, min(len(text), pos + 200)
