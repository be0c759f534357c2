"""Questions, answers and summaries over an ingested document: ask (evidence, quote, abstention,
the answer reader), summary and outline, the conversation export, and their evaluations against
the plain baselines (eval_qa, eval_summary). It reads the library that ingest/ fills and asks the
engine through the `Engine` protocol (qa/protocol.py)."""
