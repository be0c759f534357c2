"""qa.cast (2026-12-08): how a name is used tells a person (someone called by it), a pet name its
formal name, a father his son; names with "van der" and "M’"."""

from __future__ import annotations

from qa.cast import cast


def entries(text: str) -> dict[str, dict]:
    return {o["name"]: o for o in cast(text)}


def owners(text: str) -> dict[str, str]:
    """Each form of the text's cast -> the name of the entry it is in."""
    return {f: o["name"] for o in cast(text) for f in [o["name"], *o["aliases"]]}


def acts(name: str, n: int = 6, pronoun: str = "she") -> str:
    return " ".join(f"{name} said so; {pronoun} rose. Then {name} sat." for _ in range(n // 2))


def test_a_given_name_used_alone_or_a_name_titled_once_is_a_person():
    """The Tenant of Wildfell Hall and The Vicar of Wakefield: a first-person narrator and the narrator's
    family ("George", "Deborah") are never "said George", only called so ("Yes, George."): they were listed
    as other names, and so was "Flamborough" (5 mentions) beside "Mr. Flamborough" once. A word called
    out that is no given name ("Well, Mamma." "Dublin, Oct. 5.") is no one's name."""
    town = " ".join("We went to Wakefield. We came from Wakefield." for _ in range(3))
    called = " ".join(f"'Come, {n}, come.' 'Yes, {n}.' 'Hush, {n}!'" for n in ("George", "Deborah", "Mamma", "Oct")
                      for _ in range(2))
    people = acts("Sophia") + acts("Mr. Thornhill", pronoun="he") + acts("Moses", pronoun="he")
    farmer = " I met Flamborough. Flamborough was there. We saw Flamborough. Flamborough and I. Mr. Flamborough."
    cast_ = entries(people + " " + town + " " + called + " I met George and Deborah again. Deborah sang." + farmer)
    assert cast_["George"]["kind"] == "person" and cast_["Deborah"]["kind"] == "person"
    assert cast_["Flamborough"]["kind"] == "person"
    assert "Mamma" not in cast_ and "Oct" not in cast_ and cast_["Wakefield"]["kind"] == "place"


def test_a_pet_name_used_alone_joins_its_formal_name():
    """Under the Greenwood Tree (walk 12): "Jim" and "Jimmy" one boy split; "Reub" under other names beside
    "Reuben"; The Vicar of Wakefield: "Sophy" (8) beside "Sophia" (28), "Livy" beside "Olivia". A name that
    only starts like a given name is another ("Johnson" is not John's), two given names two people ("Eli",
    "Eliza"), and a pet name seen under five times joins no one ("Betsy" three times, a maid)."""
    text = " ".join([acts("Reuben Dewy", 6, "he"), acts("Reuben", 8, "he"), acts("Reub", 6, "he"),
                     acts("Jim", 10, "he"), acts("Jimmy", 6, "he"), acts("Sophia", 10), acts("Sophy", 6),
                     acts("Olivia", 10), acts("Livy", 6), acts("Miss Livy", 4), acts("John", 8, "he"),
                     acts("Johnson", 6, "he"),
                     acts("Eliza", 8), acts("Eli", 6, "he"), acts("Elizabeth", 10), acts("Betsy", 2)])
    owner = owners(text)
    assert owner["Reub"] == owner["Reuben"] == owner["Reuben Dewy"]
    assert owner["Jim"] == owner["Jimmy"] and owner["Sophy"] == owner["Sophia"]
    assert owner["Livy"] == owner["Miss Livy"] == owner["Olivia"]  # (as the book titles her: "Miss Livy")
    assert owner["Johnson"] != owner["John"] and owner["Eli"] != owner["Eliza"]
    assert "Betsy" not in owner.get("Elizabeth", "")


def test_mr_beside_a_mrs_and_a_son_called_mr_with_his_given_name_is_the_father():
    """Ruth: "Mr. Bradshaw" (225 mentions) joined his son Richard Bradshaw, whom the book calls "Mr.
    Richard" (6) to tell him from his father, husband of "Mrs. Bradshaw" (52): both main characters were
    lost. Without a "Mrs." the one man named in full is still "Mr." ("Mr. Audley" is Robert Audley, whom
    servants call "Mr. Robert")."""
    text = " ".join([acts("Mr. Bradshaw", 60, "he"), acts("Mrs. Bradshaw", 8), acts("Richard Bradshaw", 4, "he"),
                     acts("Richard", 10, "he"), acts("Mr. Richard", 4, "he")])
    owner = owners(text)
    assert owner["Mr. Bradshaw"] != owner["Richard Bradshaw"] == owner["Mr. Richard"] == owner["Richard"]
    text = " ".join([acts("Mr. Audley", 50, "he"), acts("Robert Audley", 6, "he"), acts("Mr. Robert", 4, "he"),
                     acts("Sir Michael Audley", 6, "he")])
    owner = owners(text)
    assert owner["Mr. Audley"] == owner["Robert Audley"]


def test_miss_with_a_surname_joins_a_woman_the_book_titles_miss_in_full():
    """The Vicar of Wakefield: "Miss Wilmot" (16) stood apart from "Miss Arabella Wilmot", whom the book
    calls "Arabella" alone only twice (a young woman named by her first name was asked for)."""
    text = " ".join([acts("Miss Wilmot", 12), acts("Miss Arabella Wilmot", 4), acts("Arabella", 2),
                     acts("Mr. Wilmot", 6, "he")])
    owner = owners(text)
    assert owner["Miss Wilmot"] == owner["Miss Arabella Wilmot"] != owner["Mr. Wilmot"]


def test_van_der_and_m_apostrophe_belong_to_the_name():
    """The Age of Innocence: "Mr. Henry van der Luyden" was "Luyden Newland" and "Luyden"; Hard Times:
    "Mr. M’Choakumchild" was "Choakumchild"."""
    text = " ".join([acts("Mr. Henry van der Luyden", 6, "he"), acts("Henry", 4, "he"),
                     acts("Mr. M’Choakumchild", 6, "he")])
    names = set(owners(text))
    assert "Mr. Henry van der Luyden" in names and "Mr. M’Choakumchild" in names
    assert "Luyden" not in names and "Choakumchild" not in names


def test_a_first_name_used_alone_joins_a_titled_full_name_seen_twice():
    """Agnes Grey: "Matilda" (36 mentions) stood apart from "Miss Matilda Murray" (twice), as a heading's
    "Dobbin Licked" is kept from "Dobbin": a full name written with a title is no heading."""
    text = " ".join([acts("Matilda", 30), acts("Miss Matilda Murray", 2), acts("Miss Murray", 10),
                     acts("Rosalie Murray", 6), acts("Mrs. Murray", 6)])
    owner = owners(text)
    assert owner["Matilda"] == owner["Miss Matilda Murray"]


def test_an_exclamation_opening_speech_is_no_one_and_a_street_is_a_place():
    """Evelina: "'Pardi,' cried Madame Duval" (12 times) made "Pardi" a person; "Queen Ann Street" (the
    letters' address, "street" being often written in lower case there) a "Queen Ann"."""
    text = " ".join([acts("Madame Duval", 10), " ".join("'Pardi,' cried Madame Duval." for _ in range(8)),
                     "Queen Ann Street, April 5. I walked in the street; the street was wet. " * 6])
    cast_ = entries(text)
    assert "Pardi" not in cast_ and "Queen Ann" not in cast_
    assert cast_["Queen Ann Street"]["kind"] == "place"


def test_a_word_written_before_titled_surnames_is_a_title():
    """Agnes Grey: the cottagers' "Maister Weston" (6) and "Maister Hatfield" (5) were entries of their own
    (or the rector's name) beside "Mr. Weston" and "Mr. Hatfield"; a given name before two surnames
    used alone more often stays a name ("Pitt Crawley", "Pitt Binkie", "Pitt")."""
    text = " ".join([acts("Mr. Weston", 20, "he"), acts("Mr. Hatfield", 20, "he"), acts("Maister Weston", 6, "he"),
                     acts("Maister Hatfield", 6, "he"), acts("Edward Weston", 4, "he")])
    owner = owners(text)
    assert owner["Mr. Weston"] == owner["Edward Weston"] and "Maister Weston" not in owner
    assert owner["Mr. Hatfield"] != owner["Mr. Weston"] and not any(f.startswith("Maister") for f in owner)
    text = " ".join([acts("Pitt", 40, "he"), acts("Pitt Crawley", 10, "he"), acts("Pitt Binkie", 6, "he"),
                     acts("Mr. Crawley", 10, "he"), acts("Lord Binkie", 6, "he")])
    assert "Pitt Binkie" in owners(text)


def test_mr_with_a_surname_two_men_are_named_in_full_with_is_no_one():
    """Washington Square, Mansfield Park, Vanity Fair: "Mr. Townsend" (Morris or Arthur Townsend), "Mr.
    Bertram" (Tom or Edmund), "Mr. Crawley" were entries no reader's list could own; the surname alone
    then joined "Lady Bertram". With one man of the name "Mr." still joins him."""
    text = " ".join([acts("Mr. Townsend", 30, "he"), acts("Morris Townsend", 10, "he"),
                     acts("Arthur Townsend", 6, "he"), acts("Lady Townsend", 20), acts("Townsend", 6, "he")])
    owner = owners(text)
    assert "Mr. Townsend" not in owner and "Townsend" not in owner and "Lady Townsend" in owner
    owner = owners(" ".join([acts("Mr. Townsend", 30, "he"), acts("Morris Townsend", 10, "he")]))
    assert owner["Mr. Townsend"] == owner["Morris Townsend"]


def test_a_surname_with_a_title_joins_the_one_man_written_in_full_with_that_title():
    """Ivanhoe: "Front-de-Boeuf" (164 mentions, once "Baron Front-de-Boeuf") stood apart from "Baron
    Reginald Front-de-Boeuf"; Twenty Years After: "Cromwell" and "Mr. Cromwell" from "Monsieur Oliver
    Cromwell"."""
    he = [acts("Reginald Front-de-Boeuf", 10, "he"), acts("Baron Reginald Front-de-Boeuf", 2, "he"),
          acts("Front-de-Boeuf", 40, "he"), acts("Baron Front-de-Boeuf", 2, "he"), acts("Sir Brian", 10, "he")]
    owner = owners(" ".join(he))
    assert owner["Front-de-Boeuf"] == owner["Reginald Front-de-Boeuf"] == owner["Baron Front-de-Boeuf"]


def test_a_first_name_alone_is_not_a_double_given_name():
    """Agnes Grey: "Mary" (Agnes's sister) joined "Mary Ann" (a pupil, never called anything else), and
    both main characters were lost: two given names of one sex, the second no one's surname, are one
    name."""
    text = " ".join([acts("Mary Ann", 20), acts("Mary", 20), acts("Agnes Grey", 6), acts("Tom Bloomfield", 6, "he")])
    owner = owners(text)
    assert owner["Mary"] != owner["Mary Ann"]
    assert owners(acts("Mary Crawford", 6) + " " + acts("Mary", 10))["Mary"] == "Mary Crawford"


def test_a_plural_always_after_the_is_no_one():
    """Kim: "the Mavericks" (a regiment; "said the Mavericks") was a person; "the Hatter" stays one."""
    text = " ".join("'Go,' said the Mavericks. The Mavericks smiled. I saw the Mavericks." for _ in range(4))
    text += " " + " ".join("'No,' said the Hatter. The Hatter smiled. I saw the Hatter." for _ in range(4))
    cast_ = entries(text + " " + acts("Alice", 10))
    assert "Mavericks" not in cast_ and cast_["Hatter"]["kind"] == "person"


def test_a_given_name_given_to_someone_is_no_place():
    """Wives and Daughters, Mansfield Park: "Thomas" (15 mentions: "gave it to Thomas") and "Frederick"
    were typed places; a given name is a place only where half its mentions are after "in", "to" and the
    like, not a third."""
    text = "He ran to Thomas. A letter came from Thomas. Thomas was glad. Thomas was tall. Thomas slept. " * 3
    text += " " + " ".join(["We went to Bath. In Bath it rained. From Bath we came."] * 3)
    cast_ = entries(text + " " + acts("Mrs. Gibson", 10))
    assert cast_["Thomas"]["kind"] == "person" and cast_["Bath"]["kind"] == "place"


def test_a_surname_ending_in_s_beside_a_given_name_is_no_plural():
    """The Vicar of Wakefield: "Mr. Williams" and "Williams" (farmer Williams, a main character) were read
    as the plural of "Sir William"; "the Miss Musgroves" and "the Steeles" stay families."""
    text = " ".join([acts("Sir William", 20, "he"), acts("Mr. Williams", 4, "he"), acts("Williams", 6, "he"),
                     acts("Mr. Musgrove", 10, "he"), acts("the Miss Musgroves", 6), acts("Mr. Steele", 6, "he"),
                     acts("the Steeles", 6)])
    owner = owners(text)
    assert owner["Williams"] == owner["Mr. Williams"] != owner["Sir William"]
    assert "Miss Musgroves" not in owner and "Steeles" not in owner


def test_german_and_italian_titles_are_titles():
    """Howards End: "Fraulein Mosebach" stood apart from Frieda Mosebach; Hard Times: "Signor Jupe" (Sissy's
    father, a main character) was a first name "Signor" of a full name."""
    text = " ".join([acts("Frieda Mosebach", 6), acts("Frieda", 10), acts("Fraulein Mosebach", 6),
                     acts("Signor Jupe", 6, "he"), acts("Sissy Jupe", 10)])
    owner = owners(text)
    assert owner["Fraulein Mosebach"] == owner["Frieda Mosebach"] and owner["Signor Jupe"] != owner["Sissy Jupe"]


def test_a_full_name_in_the_plural_is_a_family_not_a_second_person():
    """The Age of Innocence: "the Newland Archers" (the couple, 4 times) was a second full name with
    "Newland", which then split "Newland" (101 mentions) from Newland Archer."""
    text = " ".join([acts("Newland Archer", 10, "he"), acts("Newland", 20, "he"),
                     "They dined with the Newland Archers. The Newland Archers came. " * 3])
    owner = owners(text)
    assert owner["Newland"] == owner["Newland Archer"] and "Newland Archers" not in owner


def test_a_name_used_alone_far_more_than_with_titles_of_both_sexes_is_a_name_of_its_own():
    """Little Women (unscored): "Jo" (1223 mentions) was no one, left ambiguous between "Miss Jo" (5),
    "Dr. Jo" and "Sister Jo" as a surname between "Mr." and "Mrs." is."""
    text = " ".join([acts("Jo", 60), acts("Miss Jo", 2), acts("Dr. Jo", 2), acts("Meg", 20)])
    assert entries(text)["Jo"]["kind"] == "person"


def test_names_from_books_outside_the_lists():
    """Unscored books: Tom Jones's "Jones" (1274 mentions) joined "Messieurs Jones", a plural title, and
    "Mr. Square" (a tutor) was a place for his name's last word; The Adventures of Sherlock Holmes'
    "McCarthy" was "Carthy"."""
    text = " ".join([acts("Tom Jones", 10, "he"), acts("Jones", 30, "he"), acts("Messieurs Jones", 2, "he"),
                     acts("Mr. Square", 10, "he"), acts("Square", 6, "he"), acts("Mr. McCarthy", 6, "he")])
    owner = owners(text)
    assert owner["Jones"] == owner["Tom Jones"] and "Messieurs Jones" not in owner
    cast_ = entries(text)
    assert cast_[owner["Square"]]["kind"] == "person" and "Mr. McCarthy" in owner and "Carthy" not in owner


def test_a_pet_name_of_two_people_joins_the_one_called_by_a_first_name():
    """The Pickwick Papers (unscored): "Sammy" (186 mentions, what his father calls Sam Weller) stood
    apart: both Samuel Weller and Samuel Pickwick were named in full. Sam is called "Sam" alone;
    Mr. Pickwick is never "Samuel". David Copperfield's "Davy" is David."""
    text = " ".join([acts("Mr. Pickwick", 40, "he"), acts("Samuel Pickwick", 4, "he"), acts("Sam Weller", 6, "he"),
                     acts("Samuel Weller", 4, "he"), acts("Sam", 30, "he"), acts("Sammy", 10, "he"),
                     acts("David Copperfield", 6, "he"), acts("David", 10, "he"), acts("Davy", 8, "he")])
    owner = owners(text)
    assert owner["Sammy"] == owner["Sam Weller"] != owner["Samuel Pickwick"] and owner["Davy"] == owner["David"]


def test_a_sentence_adverb_is_no_name():
    """The Vicar of Wakefield's "Besides", The Return of the Native's "Moreover", Great Expectations'
    "Hereupon Startop": a sentence's first word, capitalised, taken as a name or a name's first word."""
    text = " ".join(["Besides, it rained. Moreover, it was cold. Hereupon Startop laughed."] * 6)
    names = set(owners(text + " " + acts("Startop", 6, "he")))
    assert not names & {"Besides", "Moreover", "Hereupon", "Hereupon Startop"} and "Startop" in names


def test_a_given_name_left_out_as_a_word_is_a_name_before_a_family_that_speaks():
    """The Return of the Native: "Christian Cantle" (Grandfer Cantle's son, a main character, "Christian"
    126 times) was no one, "Christian" being left out as a faith's adjective; "Christian Kings" in a
    treatise stay no one."""
    text = " ".join([acts("Grandfer Cantle", 10, "he"), acts("Christian Cantle", 4, "he"), acts("Christian", 20, "he"),
                     acts("Thomasin", 10)])
    assert owners(text)["Christian"] == owners(text)["Christian Cantle"]
    treatise = "The Christian Kings ruled. Christian Kings are many. Of Christian Kings I speak. " * 3
    assert "Christian Kings" not in owners(treatise + acts("Thomasin", 10))
