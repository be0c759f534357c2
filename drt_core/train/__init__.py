"""Training, apart from serving: the corpora and their token files (data), the fine-tuning tasks
(tasks), the batches (batches), the model a run trains and its optimiser groups (model), the
training loop (loop) with its checkpoints (checkpoint), its plan and memory estimate (plan), its
settings (options: TrainConfig; recipes: the presets' named recipes) and what training adds to the
forward (objective). Serving (drt_core's model and engine) never imports this package; the
evaluations (drt_core.evals) and the question miner (drt_core.mine) build on it."""
