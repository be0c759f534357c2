"""The fine-tuning tasks (`train --task`), one module each, and what evaluation reuses of them:

* `needles`: seeded needle-in-a-haystack examples over real haystack tokens (`single`, `multikey`,
  `2hop`; spec §5.3), their retrieval targets and hard negatives; `eval niah` asks the same ones.
* `phrasings`: what the needles and questions say (8 phrasings a family: 6 for training, 2 held out).
* `repeat`: the copy warm-up (passages repeated beyond the self-attention window).
* `cite`: Stacks Project citations (a \\ref's chunk should retrieve its \\label's).
* `questions`: reading comprehension, a document's window and a question mined from it (`qa`).
* `common`: `TooShort`, seeded generators, the tokenizer.

Every builder takes a seed or a `random.Random`, never the global RNG: the same inputs give the
same example, token for token. The rows of a training batch are drawn by drt_core.train.batches."""
