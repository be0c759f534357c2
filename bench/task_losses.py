"""Mean loss per task over windows of steps, from a run's log.jsonl.

    drt-reader bench task_losses runs/drt10m-m1/log.jsonl --every 200
    drt-reader bench task_losses OLD/log.jsonl --task cite,single,cite,cite,multikey,cite

A run with --task logs each step's row tasks ("task"); logs written before that need --task, the
cycle the run was given (one row a step: step s trains task (s - 1) mod len). A step whose rows
mix tasks is counted under their joined names. Also lists the steps whose loss exceeds --spike.
"""

import argparse
import json
from collections import defaultdict


def task_of(rec: dict, names: list[str] | None) -> str:
    """The step's logged task, else the cycle's (one row a step), else "all"."""
    return rec.get("task") or (names[(rec["step"] - 1) % len(names)] if names else "all")


def task_losses(records: list[dict], every: int, key: str = "ret_loss", cycle: str | None = None):
    """[(first step, last step, {task: (mean, n)})] over consecutive windows of `every` steps."""
    names = cycle.split(",") if cycle else None
    out, window, lo = [], defaultdict(list), None

    def close(hi: int) -> None:
        out.append((lo, hi, {t: (sum(v) / len(v), len(v)) for t, v in sorted(window.items())}))

    for r in records:
        if "step" not in r or key not in r:
            continue
        lo = r["step"] if lo is None else lo
        window[task_of(r, names)].append(r[key])
        if r["step"] - lo + 1 >= every:
            close(r["step"])
            window, lo = defaultdict(list), None
    if window:
        close(records[-1]["step"])
    return out


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("log")
    ap.add_argument("--every", type=int, default=200)
    ap.add_argument("--key", default="ret_loss", help="ret_loss (default), loss, or any logged number")
    ap.add_argument("--task", default=None, help="the run's --task cycle, for logs without a task field")
    ap.add_argument("--spike", type=float, default=None, help="also list steps whose loss exceeds this")
    a = ap.parse_args(argv)
    records = [json.loads(line) for line in open(a.log) if line.strip()]
    windows = task_losses(records, a.every, a.key, a.task)
    tasks = sorted({t for _, _, d in windows for t in d})
    print("| steps | " + " | ".join(tasks) + " |")
    print("|---" * (len(tasks) + 1) + "|")
    for lo, hi, d in windows:
        print(f"| {lo}-{hi} | " + " | ".join(f"{d[t][0]:.3f} ({d[t][1]})" if t in d else "" for t in tasks) + " |")
    if a.spike is not None:
        names = a.task.split(",") if a.task else None
        spikes = [(r["step"], task_of(r, names), round(r[a.key], 2))
                  for r in records if a.key in r and "step" in r and r[a.key] > a.spike]
        print(f"steps with {a.key} > {a.spike}: {spikes}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
