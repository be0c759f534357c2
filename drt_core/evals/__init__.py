"""The model's evaluations, streamed through the engine as the app reads a document: NIAH accuracy
(`niah`: `drt-reader eval niah`) and perplexity (`ppl`: `eval ppl`), on the harness they share
(`harness`: models, fresh states, token sources, peak memory) with the length syntax of every
evaluation and bench (`lengths`: 4k, 64k, 1m). The parsers are `cli`'s. The needles are training's
(drt_core.train.tasks.needles): a model is asked the way it was taught."""
