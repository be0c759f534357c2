"""What a question asks for and whether the best passage holds it (qa.abstain.asked_kind, holds_kind)."""

from qa.abstain import asked_kind, holds_kind


def test_the_kinds_a_question_asks_for():
    assert asked_kind("In what year was the mill built?") == "year"
    assert asked_kind("How many acres did he buy?") == "number"
    assert asked_kind("What was the name of Lady Verinder's favourite canary?") == "name"
    assert asked_kind("What was Mr. Dawson's Christian name?") == "name"
    assert asked_kind("What is the real name of the beggar Irus?") == "name"
    assert asked_kind("Under what name was Milady known?") == "name"
    assert asked_kind("What were the names of the two ladies in New York who gave the money?") == "name"
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


def test_what_names_no_one_given_the_documents_words():
    from qa.abstain import DocVocabulary

    book = DocVocabulary([
        "Moreover, the road was long. Moreover, it rained. However, we went on. The rain was pouring. "
        "Pouring the tea, she smiled. We met an Irishman on Saturday. The Trenors dined at home, and Mrs. Trenor "
        "spoke. Rose came in, and we talked with Rose. Rose rose from her chair. Rose sang; we heard Rose. "
        "Rose left."])
    q = "What was the name of the driver on the River road?"
    common = frozenset({"moreover", "however", "the", "rose"})  # the model's common words (common_words.txt)
    # a common word opening a sentence that the book never capitalises inside one, or mostly writes in lower case
    assert not holds_kind("name", "Moreover, the system is bound to bankrupt the tenant.", q, book, common)
    assert not holds_kind("name", "Pouring the tea, she smiled at the driver.", q, book)
    # without the common words (or the book's) the opening "Moreover" is taken for a name, as before; a name
    # seen once, opening a sentence, is one ("Tomlinson was willing to marry your sister", Doctor Thorne)
    assert holds_kind("name", "Moreover, the system is bound to bankrupt the tenant.", q, book)
    assert holds_kind("name", "Moreover, the system is bound to bankrupt the tenant.", q)
    assert holds_kind("name", "Tomlinson was willing to marry your sister.", "Who was willing to marry her?", book,
                      common)
    # peoples, days and the question's own family ("the Trenors'") name no one asked for
    assert not holds_kind("name", "The driver was an Irishman, and came on Saturday.", q, book)
    assert not holds_kind("name", "The party was made up of what Mrs. Trenor called poky people.",
                          "What was the name of the Trenors' butler?", book)
    # a name the book writes inside sentences counts where it opens one, though "rose" is a word too
    assert holds_kind("name", "Rose drove the cart on the River road.", q, book, common)


def test_a_place_is_not_the_name_of_a_person_asked_for():
    from qa.abstain import DocVocabulary

    book = DocVocabulary(["She lived at Christminster. He came from Christminster, and went into Christminster again. "
                          "Sue loved Christminster. Jude spoke to Sue. Sue smiled at him, and Jude went home."])
    q = "What was the name of the undergraduate with whom Sue formed a friendly intimacy?"
    assert not holds_kind("name", "When I was eighteen I formed a friendly intimacy with an undergraduate at "
                                  "Christminster.", q, book)
    assert holds_kind("name", "I formed a friendly intimacy with an undergraduate, Jude.", q, book)
    # unless a place is what the question asks for
    assert holds_kind("name", "She lived at Christminster.", "What was the name of the town where Sue lived?", book)
