"""Question/answer training data mined from the corpora's own structure (no hand labels, no downloads).

Command: ``python -m drt_core.mine --corpora ../shared/corpora --data data [--json]``

The model should learn to answer what readers ask of a long document: definitions and statements
(Stacks Project LaTeX), who a character is, who said something, facts stated in the text (sums,
years, counts, places) and "find the passage that says ...". Every item is a verbatim span of the
document (`text[ans_start:ans_end] == answer`) with a gold evidence passage of 100-400 characters
that contains it, so training can supervise both the answer and (optionally) the retrieval.

Modules (docs/miners.md has the templates and real examples):

* `items`: the item (`QAItem`), the limits, the question templates: every question type has
  "train" and "heldout" phrasings (`TEMPLATES`, disjoint); training items use the train phrasings,
  validation items draw from both and record which (`phrasing` in the jsonl), so an evaluation can
  tell learning the task from learning the templates.
* `spans`: what the miners share (answer spans, gold passages, "find" items, sampling).
* `stacks`: `mine_stacks`, Stacks Project LaTeX (definitions, statements, slogans, quotes).
* `book`: `mine_book`, prose and verse (characters, speakers, numbers, places, quotes), and `plays`
  (``shakespeare/``: the "Persons represented" list and the speech headings).
* `build`: the files (`build_qa_data`: OUT/qa/{split}.bin, .jsonl, meta.json) and the command.

Answers keep the document's line wrapping (they are exact slices). The prompt format stops an answer
at a newline (prompts.STOP_TEXT), so the generation target is `items.answer_target(answer)`: the
answer with its whitespace runs collapsed to single spaces (written as "target" in the jsonl).
"""
