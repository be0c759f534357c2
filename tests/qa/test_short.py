"""The bold short answer for questions that ask for an amount (qa.short.count_answer)."""

from qa.short import count_answer


def test_how_many_takes_the_amount_before_the_questions_noun():
    assert count_answer("How many acres did Uncle Bird's household say had been bought?",
                        "We talked of the acres bought,--one hundred and twenty-five acres,--of the new guest-chamber.",
                        "Uncle Bird's household: We talked of the acres bought,--one hundred and twenty-five acres,--"
                        "of the new guest-chamber.") == "one hundred and twenty-five acres"
    assert count_answer("How many tail-feathers may a fantail pigeon carry?",
                        "The fantail has thirty or even forty tail-feathers, instead of twelve or fourteen;") \
        == "thirty or even forty tail-feathers"


def test_how_old_how_much_and_what_year():
    assert count_answer("How old was the baby Hester carried?",
                        "She bore in her arms a child, a baby of some three months old, who winked;",
                        "Hester bore in her arms a child, a baby of some three months old, who winked;") \
        == "some three months old"
    assert count_answer("How much did the image-seller ask for the bust?",
                        "He said she should have them for ten shillings.") == "ten shillings"
    assert count_answer("How much revenue did the Bureau derive?",
                        "a total revenue of nearly half a million dollars derived from black tenants.",
                        "The Bureau leased the lands; a total revenue of nearly half a million dollars derived "
                        "from black tenants.") == "nearly half a million dollars"
    assert count_answer("In what year did the care of the lands pass to the Treasury?",
                        "In 1861 the care of the lands passed to the Treasury, and in 1863 ...") is None  # two years
    assert count_answer("In what year did the care of the lands pass to the Treasury?",
                        "In 1861 the care of the lands passed to the Treasury officials.") == "1861"


def test_no_short_answer_where_the_sentence_is_not_clearly_the_amount():
    # two amounts of the asked form: which one is the answer is not said
    assert count_answer("How many guns did the ship carry?",
                        "our ship having twelve guns, and the rogue eighteen guns.") is None
    # the amount is in the question already, or of another form than asked
    assert count_answer("How many of the fifty sausages were left?", "Of fifty large sausages, ten remained.") is None
    assert count_answer("How old was Lily?", "Lily was nineteen when she went.") is None  # no "years"
    # a question that asks for no amount
    assert count_answer("Who is Lily?", "Lily was nineteen years old.") is None
    # the quote does not name whom the question asks about: an amount about someone else
    assert count_answer("How many children did Wells have?",
                        "I married, and had three children, two sons and one daughter;") is None
    assert count_answer("How many acres did Benton's plantation cover?",
                        "and the eleven hundred acres of the Sennet plantation.") is None
    assert count_answer("How many acres did Benton's plantation cover?",
                        "and the eleven hundred acres of the plantation.",
                        "Benton rode on; and the eleven hundred acres of the plantation.") == "eleven hundred acres"
    # "a" / "an" alone is no number
    assert count_answer("How much did he pay for the hat?", "a summer hat for a dollar") is None
