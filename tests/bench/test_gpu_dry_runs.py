"""CPU dry runs of the paths only a lent GPU takes, at tiny shapes, on every CPU (issue 59, item 1).

bench/gpu.sh and bench/gpu_train.sh run once in a 15-minute loan: a crash there costs the loan. Their
quick mode (GPU_SH_QUICK=1) runs every step of the script on the CPU: the batch sizing
(`bench.train --fit-batch`, with a memory budget in place of the card's), bf16 autocast training
(`--bf16 on`, native units or not), the GCA benchmark, prefill, and the checkpoint's split into bf16
shards and its join back here. FSDP2's bf16 mixed precision has its own test in
tests/drt_core/train/test_fsdp.py; the Triton kernels' compiled path in
tests/kernels/test_triton_gca.py::test_gpu_block_choices_compile_for_cuda.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from tests.drt_core.record_golden import build_token_dir

ROOT = Path(__file__).resolve().parents[2]


def _script(name: str, tmp_path: Path, **env) -> subprocess.CompletedProcess:
    env = {**os.environ, "GPU_SH_QUICK": "1", "OUT": str(tmp_path / "out"), "PY": sys.executable,
           "OMP_NUM_THREADS": "2", "HF_HUB_OFFLINE": "1", **env}
    proc = subprocess.run(["bash", str(ROOT / "bench" / name)], cwd=ROOT, env=env, capture_output=True,
                          text=True, timeout=300)
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-3000:]
    return proc


def test_gpu_sh_runs_every_step_on_the_cpu(tmp_path):
    _script("gpu.sh", tmp_path)
    out = tmp_path / "out"
    steps = (out / "steps.txt").read_text()
    for step in ("pytest.txt", "gca.json", "train.json", "prefill.json"):
        assert f"{step}: rc 0" in steps, steps
    assert "training batch 2 x 252 (bench.train --fit-batch)" in steps  # sized, then capped at 2
    train = json.loads((out / "train.json").read_text())
    assert train["bf16"] is True and train["args"]["batch"] == 2 and train["train"]["steps"] >= 2
    assert json.loads((out / "prefill.json").read_text())
    report = (out / "gpu.md").read_text()
    assert "Training, preset tiny, 252 tokens x batch 2, bf16 True" in report
    assert "Prefill, drt preset tiny on cpu" in report


def test_gpu_train_sh_trains_splits_and_joins_on_the_cpu(tmp_path):
    from bench.gpu_ckpt import join
    from drt_core.modeling import DRTForCausalLM

    data = build_token_dir(tmp_path / "data")
    _script("gpu_train.sh", tmp_path, DATA=str(data), RUN=str(tmp_path / "run"))
    out = tmp_path / "out"
    assert (out / "batch.txt").read_text().startswith("batch 2 x 504 tokens")
    steps = (out / "steps.txt").read_text()
    assert "train: rc 0" in steps, steps
    log = subprocess.run(["gzip", "-dc", str(out / "log.jsonl.gz")], capture_output=True, text=True, check=True)
    recs = [json.loads(line) for line in log.stdout.splitlines()]
    assert len(recs) >= 2 and all(r["loss"] == r["loss"] for r in recs)  # finite, not NaN
    model = DRTForCausalLM.from_pretrained(join(out / "ckpt", tmp_path / "joined"))
    assert model.config.hidden_size == 64
