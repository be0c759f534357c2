"""qa.cast (2026-12-09): titles written short ("Mdlle."), names that hold another ("Frances Evans Henri"),
hyphened names ("Bide-the-Bent"), and the entries a reader can trust."""

from __future__ import annotations

from qa.cast import cast


def owners(text: str) -> dict[str, str]:
    """Each form of the text's cast -> the name of the entry it is in."""
    return {f: o["name"] for o in cast(text) for f in [o["name"], *o["aliases"]]}


def acts(name: str, n: int = 6, pronoun: str = "she") -> str:
    return " ".join(f"{name} said so; {pronoun} rose. Then {name} sat." for _ in range(n // 2))


def test_mdlle_is_a_daughters_title():
    """The Professor: "Mdlle." (100 times: "Mdlle. Reuter", "Mdlle. Henri") was read as a name of its own
    (111 mentions, an entry "Mdlle"); it is "Mademoiselle" written short."""
    text = " ".join([acts("Zoraide Reuter", 6), acts("Mdlle. Reuter", 10), acts("Zoraide", 6),
                     acts("Mr. Hunsden", 10, "he")])
    owner = owners(text)
    assert "Mdlle" not in owner and owner["Mdlle. Reuter"] == owner["Zoraide Reuter"]


def test_a_name_a_longer_name_holds_joins_it():
    """The Professor: "Frances Evans Henri" (3), "Frances Henri" (2) and "Frances Evans" (2) were three
    entries, and "Frances" (96) was shared among them; The Bride of Lammermoor's "Colonel Douglas Ashton"
    and "Colonel Sholto Douglas Ashton" two; Vanity Fair's "Reverend Bute Crawley" apart from Bute Crawley.
    Not a longer name that holds two people, nor one with another rank than the shorter's."""
    text = " ".join([acts("Frances Evans Henri", 4), acts("Frances Henri", 2), acts("Frances Evans", 2),
                     acts("Frances", 30), acts("Colonel Douglas Ashton", 6, "he"),
                     acts("Colonel Sholto Douglas Ashton", 2, "he"), acts("Sholto Douglas Ashton", 2, "he"),
                     acts("Reverend Bute Crawley", 6, "he"), acts("Bute Crawley", 6, "he"),
                     acts("Roger Stephen Osborne Hamley", 2, "he"), acts("Roger Hamley", 10, "he"),
                     acts("Osborne Hamley", 10, "he"), acts("Sir Walter Elliot", 10, "he"),
                     acts("William Walter Elliot", 2, "he")])
    owner = owners(text)
    assert owner["Frances"] == owner["Frances Henri"] == owner["Frances Evans"] == owner["Frances Evans Henri"]
    assert owner["Colonel Douglas Ashton"] == owner["Sholto Douglas Ashton"]
    assert owner["Bute Crawley"] == owner["Reverend Bute Crawley"]
    assert owner["Roger Hamley"] != owner["Osborne Hamley"]
    assert owner["Sir Walter Elliot"] != owner.get("William Walter Elliot")


def test_a_title_and_first_name_join_the_one_full_name_written_far_most():
    """The Bride of Lammermoor: "Sir William" (53 mentions) stood apart from Sir William Ashton (73), the
    book naming Sir William Hamilton (3) and Sir William Wallace (2) too."""
    text = " ".join([acts("Sir William Ashton", 40, "he"), acts("Sir William", 20, "he"),
                     acts("Sir William Hamilton", 4, "he"), acts("Lady Ashton", 10)])
    owner = owners(text)
    assert owner["Sir William"] == owner["Sir William Ashton"] != owner.get("Sir William Hamilton")


def test_a_hyphened_name_with_the_inside():
    """The Bride of Lammermoor: "Mr. Bide-the-Bent" (a main character) was "Mr. Bide", no listed person."""
    text = acts("Mr. Bide-the-Bent", 10, "he") + " " + acts("Lucy Ashton", 10)
    owner = owners(text)
    assert "Mr. Bide-the-Bent" in owner and "Mr. Bide" not in owner


def test_a_title_is_shown_as_the_book_writes_it():
    """The Professor writes "M. Vandenhuten" (12 times) and "M. Pelet" (50): the cast showed "Monsieur
    Vandenhuten", a form the book never uses. A title written in full where a short one exists is shown
    short ("Mister O'Hara" is "Mr. O'Hara", one form)."""
    text = " ".join([acts("M. Vandenhuten", 10, "he"), acts("Mdlle. Reuter", 10), acts("Mister O'Hara", 6, "he"),
                     acts("Mr. O'Hara", 4, "he")])
    owner = owners(text)
    assert {"M. Vandenhuten", "Mdlle. Reuter", "Mr. O'Hara"} <= set(owner)
    assert not {"Monsieur Vandenhuten", "Mademoiselle Reuter", "Mister O'Hara"} & set(owner)


def test_mr_joins_the_rank_of_a_surname_no_man_is_named_in_full_with():
    """The Moonstone: "Mr. Seegrave" (14) apart from "Superintendent Seegrave" (37); Lady Audley's Secret:
    "Captain Maldon" (10) and "Lieutenant Maldon" apart from "Mr. Maldon" (29), beside his daughter Helen
    Maldon. Not a man named in full ("Mr. Wentworth", a curate, beside Captain Frederick Wentworth), nor
    "Dr. Johnson" beside "Mr. Johnson"."""
    text = " ".join([acts("Superintendent Seegrave", 20, "he"), acts("Mr. Seegrave", 8, "he"),
                     acts("Mr. Maldon", 16, "he"), acts("Captain Maldon", 6, "he"), acts("Lieutenant Maldon", 2, "he"),
                     acts("Helen Maldon", 6), acts("Captain Frederick Wentworth", 6, "he"),
                     acts("Captain Wentworth", 20, "he"), acts("Mr. Wentworth", 6, "he"), acts("Dr. Johnson", 6, "he"),
                     acts("Mr. Johnson", 6, "he")])
    owner = owners(text)
    assert owner["Mr. Seegrave"] == owner["Superintendent Seegrave"]
    assert owner["Mr. Maldon"] == owner["Captain Maldon"] == owner["Lieutenant Maldon"] != owner["Helen Maldon"]
    assert owner["Mr. Wentworth"] != owner["Captain Wentworth"] and owner["Dr. Johnson"] != owner["Mr. Johnson"]


def test_a_surname_alone_follows_its_titled_mentions_into_a_full_name():
    """The Bride of Lammermoor: "Craigengelt" (90) joined "Mr. Craigengelt", written once, and stood apart
    from "Captain Craigengelt" (26), who had joined Captain John Craigengelt."""
    text = " ".join([acts("Captain John Craigengelt", 2, "he"), acts("Captain Craigengelt", 16, "he"),
                     acts("Craigengelt", 40, "he"), "Mr. Craigengelt came.", acts("Lucy Ashton", 10)])
    owner = owners(text)
    assert owner["Craigengelt"] == owner["Captain Craigengelt"]


def test_a_word_mostly_after_a_names_possessive_is_a_place():
    """The Bride of Lammermoor: "Crag" (76 times, nearly always "Wolf's Crag", a castle) was a person."""
    text = " ".join(["We rode to Wolf's Crag. Wolf's Crag stood there; Wolf's Crag said nothing."] * 4) + " " + \
        acts("Lucy Ashton", 10) + " " + acts("Caleb Balderstone", 10, "he")
    cast_ = {o["name"]: o for o in cast(text)}
    assert cast_["Crag"]["kind"] == "place"


def test_squire_is_a_mans_title():
    """Wives and Daughters: "the Squire" (258 mentions, a main character) was a name used twenty times as
    often as its full forms "Squire Hamley" and "Squire Stephen" (an ancestor, once), which joined it, and
    "Stephen" with them: one entry of two people."""
    text = " ".join([acts("the Squire", 80, "he"), "Squire Hamley came. Squire Hamley went.",
                     "Squire Stephen built it.", acts("Stephen", 6, "he"), acts("Molly Gibson", 10),
                     acts("Roger Hamley", 10, "he")])
    owner = owners(text)
    assert owner["Squire"] != owner["Stephen"]


def test_a_title_inside_an_abbreviation_is_none():
    """Mansfield Park: "H.M. Sloop Thrush" gave "M. Thrush", a Monsieur Thrush."""
    text = "He was made lieutenant of H.M. Thrush. " * 6 + acts("Fanny Price", 10) + " " + acts("M. Pelet", 6, "he")
    assert "M. Thrush" not in owners(text) and "M. Pelet" in owners(text)


def test_a_first_name_alone_is_not_a_king_named_in_full_no_more_than_another():
    """The Bride of Lammermoor: "Henry" (Henry Ashton, Lucy's brother) was shared with Henry VIII, named in
    full once or twice; Vanity Fair's "George" with George IV. Where the king is named in full more, the
    name alone is still shared, each mention the one's named last before it ("Louis" in Dumas: Louis XIV
    beside Louis de Conde)."""
    text = " ".join([acts("Henry Ashton", 4, "he"), "Henry VIII reigned. Henry VIII died.", acts("Henry", 20, "he"),
                     acts("Louis de Conde", 2, "he"), acts("Louis XIV", 20, "he"), acts("Louis", 20, "he")])
    owner = owners(text)
    assert owner["Henry"] == owner["Henry Ashton"] and owner["Louis"] == owner["Louis XIV"]


def test_no_name_from_the_start_of_a_hyphened_word():
    """Ivanhoe: "Front-de-Boeuf's" (a possessive, not read) gave "Front" (12 mentions); Cranford's "Mrs
    Fitz-Adam's" "Mrs. Fitz"."""
    text = " ".join([acts("Front-de-Boeuf", 10, "he"), "Front-de-Boeuf's men came. " * 6, acts("Mrs. Fitz-Adam", 6),
                     "Mrs. Fitz-Adam's house. " * 6])
    owner = owners(text)
    assert "Front" not in owner and "Mrs. Fitz" not in owner and "Mrs. Fitz-Adam" in owner


def test_a_place_word_of_a_name_is_a_place():
    """My Lady Ludlow: "Castle of Monkshaven" (13, with "Monkshaven") was a person."""
    text = " ".join(["They rode to the Castle of Monkshaven. The Castle of Monkshaven stood; it came down."] * 4) + \
        " " + acts("Monkshaven", 4, "it") + " " + acts("Lady Ludlow", 10)
    cast_ = {o["name"]: o for o in cast(text)}
    assert cast_["Castle of Monkshaven"]["kind"] == "place"


def test_a_first_name_alone_is_not_shared_with_a_name_written_once_beside_one_written_often():
    """Mansfield Park: "Tom" (Tom Bertram, named in full 68 times) was shared with Tom Oliver, named in
    full once or twice: "Tom Oliver / Tom" was a wrong entry, and Tom Bertram lost mentions."""
    text = " ".join([acts("Tom Bertram", 30, "he"), "Tom Oliver came. Tom Oliver went.", acts("Tom", 20, "he"),
                     acts("Fanny Price", 10)])
    owner = owners(text)
    assert owner["Tom"] == owner["Tom Bertram"] and owner.get("Tom Oliver") != owner["Tom"]


def test_monsieur_with_a_surname_is_read_as_mr():
    """My Lady Ludlow: "Monsieur de Crequy" (12) stood apart from Clement de Crequy, the one man of the name
    named in full, as "Mr. X" would not beside "Mrs. X" where the father is titled otherwise ("Count de
    Crequy"). A "Madame" of the name a quarter as frequent makes "Monsieur" the family's father, as "Mrs."
    does "Mr."."""
    text = " ".join([acts("Clement de Crequy", 6, "he"), acts("Monsieur de Crequy", 10, "he"),
                     acts("Count de Crequy", 6, "he"), acts("Madame de Crequy", 8), acts("Lady Ludlow", 10),
                     acts("Jean Morin", 6, "he"), acts("Monsieur Morin", 10, "he"), acts("Madame Morin", 6)])
    owner = owners(text)
    assert owner["Monsieur de Crequy"] == owner["Clement de Crequy"] != owner["Count de Crequy"]
    assert owner["Monsieur Morin"] != owner["Jean Morin"]


def test_a_womans_title_joins_the_one_woman_named_in_full_where_no_man_bears_the_name():
    """The Age of Innocence: Ellen Olenska (102), "Madame Olenska" (132) and "Countess Olenska" (58) were three
    entries; her husband is "Count Olenski". Not a mother beside a daughter titled "Miss" ("Madame Reuter",
    "Mdlle. Reuter"), nor a wife beside a man of the name ("Mrs. Harville", Captain Harville)."""
    text = " ".join([acts("Ellen Olenska", 10), acts("Madame Olenska", 10), acts("Countess Olenska", 6),
                     acts("Zoraide Reuter", 6), acts("Zoraide", 6), acts("Mdlle. Reuter", 10), acts("Madame Reuter", 6),
                     acts("Fanny Harville", 6), acts("Captain Harville", 10, "he"), acts("Mrs. Harville", 6)])
    owner = owners(text)
    assert owner["Madame Olenska"] == owner["Countess Olenska"] == owner["Ellen Olenska"]
    assert owner["Madame Reuter"] != owner["Zoraide Reuter"] and owner["Mrs. Harville"] != owner["Fanny Harville"]


def test_mr_with_a_first_name_a_few_times_does_not_tell_a_man_from_mr_with_his_surname():
    """The Bride of Lammermoor: "Mr. Balderstone" (17) stood apart from Caleb Balderstone, whom the book calls
    "Mr. Caleb" three times: not the "Mr. Franklin" (400) the Moonstone writes to tell Franklin Blake from his
    father, "Mr. Blake" (150)."""
    text = " ".join([acts("Caleb Balderstone", 10, "he"), acts("Caleb", 40, "he"), acts("Mr. Caleb", 4, "he"),
                     acts("Mr. Balderstone", 14, "he"), acts("Franklin Blake", 6, "he"), acts("Mr. Franklin", 40, "he"),
                     acts("Mr. Blake", 16, "he"), acts("Lucy Ashton", 10)])
    owner = owners(text)
    assert owner["Mr. Balderstone"] == owner["Caleb Balderstone"] and owner["Mr. Blake"] != owner["Franklin Blake"]


def test_miss_with_the_surname_of_two_sisters_each_named_as_often_is_no_one():
    """Howards End: "Miss Schlegel" (75) is Margaret or Helen Schlegel (637 and 460 mentions), and was an entry
    of its own. Not where the other women of the name are named far less than "Miss X" (Vanity Fair's Miss
    Crawley, 215, beside Rose and Violet Crawley)."""
    text = " ".join([acts("Margaret Schlegel", 4), acts("Margaret", 30), acts("Helen Schlegel", 4), acts("Helen", 30),
                     acts("Miss Schlegel", 20), acts("Miss Crawley", 30), acts("Rose Crawley", 4),
                     acts("Violet Crawley", 4), acts("Henry Wilcox", 10, "he")])
    owner = owners(text)
    assert "Miss Schlegel" not in owner and "Miss Crawley" in owner


def test_miss_with_a_surname_is_the_sister_never_called_miss_with_her_first_name():
    """The Tenant of Wildfell Hall: "Miss Millward" (13) is Mary Millward, the elder; the book calls her
    sister "Miss Eliza" (12), and "Miss Millward" joined Eliza, so Eliza Millward (main) was a wrong entry.
    Not a mother named seldom ("Miss Verinder" is Rachel, "Miss Rachel", beside Julia Verinder)."""
    text = " ".join([acts("Eliza Millward", 20), acts("Eliza", 30), acts("Miss Eliza", 12), acts("Miss Millward", 12),
                     acts("Mary Millward", 6), acts("Mary", 6), acts("Mr. Millward", 10, "he"),
                     acts("Rachel Verinder", 8), acts("Rachel", 60), acts("Miss Rachel", 40), acts("Miss Verinder", 30),
                     acts("Julia Verinder", 4), acts("Lady Verinder", 10)])
    owner = owners(text)
    assert owner["Miss Millward"] == owner["Mary Millward"] != owner["Eliza Millward"]
    assert owner["Miss Verinder"] == owner["Rachel Verinder"]


def test_a_womans_title_before_a_mans_given_name_is_his_wife():
    """The Custom of the Country: "Countess Raymond de Chelles" (Undine, his wife) joined Raymond de Chelles,
    and his entry held two people, as "Mrs. John Knightley" would have joined John Knightley."""
    text = " ".join([acts("Raymond de Chelles", 10, "he"), acts("Raymond", 20, "he"),
                     acts("Countess Raymond de Chelles", 6), acts("Undine Spragg", 10), acts("Undine", 30)])
    owner = owners(text)
    assert owner["Raymond"] == owner["Raymond de Chelles"] != owner.get("Countess Raymond de Chelles")


def test_a_name_after_st_is_no_one():
    """Pudd'nhead Wilson: "St. Louis" (15), a town, read "Louis", a person entry of no one in the book."""
    town = " ".join("He came from St. Louis, he said. He went to St Louis; we saw St. Louis." for _ in range(8))
    text = " ".join([acts("Tom Driscoll", 10, "he"), acts("Tom", 20, "he"), town])
    owner = owners(text)
    assert "Louis" not in owner and "Tom" in owner


def test_a_surname_of_a_family_named_in_full_is_no_first_name_of_a_heading():
    """Pudd'nhead Wilson: a chapter heading's "Driscoll Spares His Slaves" (once) made "Driscoll" (10 times
    alone) a first name, and "Driscoll Spares" a person entry, beside Tom and Percy Driscoll named in full."""
    text = " ".join([acts("Tom Driscoll", 14, "he"), acts("Percy Driscoll", 6, "he"), acts("Mr. Driscoll", 8, "he"),
                     acts("Driscoll", 10, "he"), "\n\nCHAPTER 2 -- Driscoll Spares His Slaves\n\n",
                     acts("Roxy", 20)])
    owner = owners(text)
    assert "Driscoll Spares" not in owner and "Spares" not in owner.get("Driscoll", "")  # (Mr. Driscoll is either)


def test_judge_is_a_mans_rank():
    """Pudd'nhead Wilson: "Judge Driscoll" (31 times), a main character, was read "Driscoll" and lost among the
    Driscolls; "the Judge" is the one judge the book names."""
    text = " ".join([acts("Judge Driscoll", 20, "he"), acts("Tom Driscoll", 14, "he"), acts("Percy Driscoll", 6, "he"),
                     acts("the Judge", 6, "he"), acts("Roxy", 20), "A judge is a judge; the judge came." * 8])
    owner = owners(text)  # (the book writes "judge" in lower case often)
    assert owner["Judge Driscoll"] == owner["Judge"] != owner["Tom Driscoll"]


def test_a_pet_name_no_list_knows_joins_the_formal_name_it_starts():
    """Pudd'nhead Wilson: "Roxy" (67) and "Roxana" (23), one woman, were two entries: neither name is in
    qa.given_names, and the formal name is used less than the pet name. Two names that start alike without a
    pet ending stay apart ("Rowena", "Rowan")."""
    text = " ".join([acts("Roxy", 40), acts("Roxana", 14), acts("Rowena", 10), acts("Rowan", 10, "he"),
                     acts("Tom Driscoll", 10, "he")])
    owner = owners(text)
    assert owner["Roxana"] == owner["Roxy"] and owner["Rowena"] != owner["Rowan"]


def test_a_people_or_a_faith_is_no_one():
    """The Master of Ballantrae: "Hindu" (Secundra Dass, called so) and Kim's peoples were person entries, as
    "Frenchman" or "Quaker" would have been but for the list of words that name no one."""
    text = " ".join([acts("Secundra Dass", 10, "he"), acts("Hindu", 10, "he"), acts("Yankee", 8, "he"),
                     acts("Mussulman", 8, "he"), acts("Henry Durie", 10, "he")])
    owner = owners(text)
    assert not {"Hindu", "Yankee", "Mussulman"} & set(owner) and "Secundra Dass" in owner
