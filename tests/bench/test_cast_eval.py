from bench.cast_eval import parse_sets, score_book


def test_sets_carry_their_own_documents_root():
    assert parse_sets(["a.jsonl", "b.jsonl@."], "../shared") == [("a.jsonl", "../shared"), ("b.jsonl", ".")]


def test_a_split_person_and_a_merged_entry_are_wrong():
    rec = {"main": [{"name": "Robert Audley", "aliases": ["Robert", "Mr. Audley"]}],
           "persons": [{"name": "Sir Michael Audley", "aliases": ["Sir Michael"]}],
           "not_persons": [{"name": "Audley Court", "kind": "place"}]}
    entries = [{"name": "Robert Audley", "kind": "person", "mentions": 9, "aliases": ["Robert"]},
               {"name": "Mr. Audley", "kind": "person", "mentions": 5, "aliases": []},  # Robert again: split
               {"name": "Sir Michael Audley", "kind": "person", "mentions": 4, "aliases": ["Robert"]},  # merged
               {"name": "Audley Court", "kind": "place", "mentions": 3, "aliases": []}]
    b = score_book(entries, rec)
    assert (b["right"], b["person_entries"], b["main_found"], b["places_listed"]) == (1, 3, 1, 1)
