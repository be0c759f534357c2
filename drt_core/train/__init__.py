"""Training apart from serving: the corpora and their token files (data), the fine-tuning tasks
(tasks), questions mined from text (mine), the training loop with its memory plan (loop) and the
NIAH and perplexity evaluations (evaluate). Serving (drt_core's model and engine) never imports
this package; it imports them."""
