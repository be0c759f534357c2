"""Plot training curves from run logs: `python -m bench.plot_curves OUT.png RUN_DIR[:LABEL] ... [--keys=loss,ret_loss]`.

Reads RUN_DIR/log.jsonl (one JSON object per step, written by drt_core.train.loop) and draws each logged
quantity of --keys (default: the training loss; smoothed) and the validation loss against steps."""

from __future__ import annotations

import json
import sys
from pathlib import Path


def main(argv: list[str] | None = None) -> int:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    argv = sys.argv[1:] if argv is None else argv
    if len(argv) < 2:
        print(__doc__)
        return 2
    keys = ["loss"]
    for a in [a for a in argv if a.startswith("--keys=")]:
        keys = a.split("=", 1)[1].split(",")
    argv = [a for a in argv if not a.startswith("--keys=")]
    out, runs = argv[0], argv[1:]
    fig, ax = plt.subplots(figsize=(7, 4))
    for spec in runs:
        path, _, label = spec.partition(":")
        recs = [json.loads(l) for l in open(Path(path) / "log.jsonl") if l.strip()]
        recs = [r for r in recs if "loss" in r]
        by_step = {}
        for r in recs:  # a resumed run logs some steps twice: keep the last
            by_step[r["step"]] = r
        steps = sorted(by_step)
        color = None  # the run's val curve takes the colour of its first training curve
        for key in keys:
            ks = [s for s in steps if key in by_step[s]]
            sm, acc = [], None
            for s in ks:
                v = by_step[s][key]
                acc = v if acc is None else 0.9 * acc + 0.1 * v
                sm.append(acc)
            if ks:
                line, = ax.plot(ks, sm, label=f"{label or path} {'train' if key == 'loss' else key} (EMA)")
                color = color or line.get_color()
        vs = [s for s in steps if "val_loss" in by_step[s]]
        if vs:
            ax.plot(vs, [by_step[s]["val_loss"] for s in vs], "o--", color=color, label=f"{label or path} val")
    ax.set_xlabel("step")
    ax.set_ylabel("loss (nats/token)")
    ax.grid(alpha=0.3)
    ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(out, dpi=120)
    print(out)
    return 0


if __name__ == "__main__":
    sys.exit(main())
