"""What a question asks for and whether the best passage holds it (qa.abstain.asked_kind, holds_kind)."""

from qa.abstain import asked_kind, holds_kind


def test_the_kinds_a_question_asks_for():
    assert asked_kind("In what year was the mill built?") == "year"
    assert asked_kind("How many acres did he buy?") == "number"
    assert asked_kind("What was the name of Lady Verinder's favourite canary?") == "name"
    assert asked_kind("What was Mr. Dawson's Christian name?") == "name"
    assert asked_kind("What is the real name of the beggar Irus?") == "name"
    assert asked_kind("Under what name was Milady known?") == "name"
    # "called" asks for a term as often as a name: no kind; nor does a question that only mentions a name
    assert asked_kind("In a 2-category, what is the composition of 2-morphisms called?") is None
    assert asked_kind("Why did she sign the letter in her own name?") is None
    assert asked_kind("Who is Fancy Day?") is None


def test_a_name_question_needs_a_name_the_question_does_not_give():
    q = "What was the name of Lady Verinder's favourite canary?"
    assert not holds_kind("name", "In the breakfast-room I found my aunt's favourite canary singing in his cage.", q)
    # a sentence opened by a function word, a title and "I" are no names; the question's own words neither
    assert not holds_kind("name", "But I found Lady Verinder there. The canary sang.", q)
    assert holds_kind("name", "The canary, whom she called Dick, sang in his cage.", q)
    assert holds_kind("name", "Sandy had a free wife who lived about four miles away.",
                      "What was the name of the free wife of the slave?")
    # the other kinds do not read the question
    assert holds_kind("year", "built in 1790") and not holds_kind("number", "built of grey stone")
