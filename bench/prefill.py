"""Prefill benchmark: `drt-reader bench prefill [--json]` or `python -m bench.prefill`.

Measures how fast the streaming engine (drt_core.engine) reads a long token stream and how much
memory it needs, for
    drt              the DRT, chunk memory in the memmap tier (fp16 K/V on disk, what `ingest` uses),
                     checkpointed every 8 blocks as ingest does;
    sliding_window   the sliding-window baseline of about the same size ("Base LM +2 layers");
    full_attention   the full-attention baseline through the engine (a KV ring of
                     Stream.full_attention_capacity = 65536 positions, attended in full every block);
    full_attention_kv  the same weights with a growing KV cache that only attends to the positions
                     filled so far (the best case for full attention on CPU; bench-local loop,
                     checked against the batch model's logits in tests/drt_core/evals/test_evals.py),
    drt_eager        on request (--archs): the DRT with its retrieval groups run at every position, as
                     before they were deferred (Engine.prefill defer_upper=False; `drt` defers them to
                     the last positions and runs them there, once, inside its timing);
    landmark         Landmark Attention (drt_core/landmark.py), on request (--archs): every position's
                     K/V kept in RAM, each token's landmark query scored against every earlier block;
                     up to --landmark-max (default 256K: its memory grows with the stream),
at 16K, 64K, 256K and 1M tokens (K = 1024), in ONE run. Each model x length is measured in a fresh
subprocess, so peak RSS (ru_maxrss: anonymous + file-backed pages, memmaps included) is per
measurement (--repeat R: R fresh processes, the fastest reported with the highest peak RSS of the R).
Full attention beyond its capacity is reported as n/a, not run; full_attention_kv is
quadratic and is only run up to --fa-max (default 64K).

Each measurement runs with OMP_WAIT_POLICY=PASSIVE (unless set): on a machine shared with other
work (here: a training run on the same 2 cores), spinning OpenMP threads cost this engine about 5x
in throughput; passive waiting also makes the CPU-time figures count work, not spinning.

Models are randomly initialised (seed 0) from the `tiny` preset (--preset): timing does not depend
on the weights. Tokens are real text: the first L tokens of data/books/train.bin (tiled if shorter).

Reported per measurement: tokens/s (wall clock, first block excluded as warm-up), tokens per CPU
second (process user+sys time: less sensitive to other load on the machine), tokens/s over the
final 16 blocks (the marginal speed at that length), peak RSS, RSS after loading the model, and
for the memmap tier the disk bytes per token (allocated blocks, preallocation included). Then the
ratios the issue asks for: RSS(1M)/RSS(64K), tok/s(1M)/tok/s(16K), DRT/sliding-window throughput,
DRT/full-attention throughput at 64K.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import shutil
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
DEFAULT_TOKENS = ROOT / "data" / "books" / "train.bin"
ARCHS = ("drt", "sliding_window", "full_attention", "full_attention_kv")
OPTIONAL_ARCHS = ("landmark", "drt_eager")  # measured when --archs names them


from drt_core.evals.lengths import parse_length  # noqa: E402  (one length syntax: 4k, 1m)


def fmt_length(n: int) -> str:
    for suf, u in (("m", 1024**2), ("k", 1024)):
        if n % u == 0:
            return f"{n // u}{suf.upper()}"
    return str(n)


# ----------------------------------------------------------------------------------------------
# the worker: one model x one length, in its own process


class _RssSampler:
    """Samples RssAnon / RssFile of this process every `dt` seconds; keeps the maxima (MB)."""

    def __init__(self, dt: float = 0.1):
        self.dt, self.anon, self.file = dt, 0.0, 0.0
        self._stop = threading.Event()
        self._t = threading.Thread(target=self._loop, daemon=True)

    def sample(self):
        try:
            with open("/proc/self/status") as f:
                for line in f:
                    if line.startswith("RssAnon:"):
                        self.anon = max(self.anon, int(line.split()[1]) / 1024)
                    elif line.startswith("RssFile:"):
                        self.file = max(self.file, int(line.split()[1]) / 1024)
        except OSError:
            pass

    def _loop(self):
        while not self._stop.wait(self.dt):
            self.sample()

    def __enter__(self):
        self._t.start()
        return self

    def __exit__(self, *exc):
        self._stop.set()
        self._t.join()
        self.sample()


def _rss_now_mb() -> float:
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
    return float("nan")


def _disk_bytes(d: Path) -> int:
    """Bytes actually allocated under d (st_blocks: the memmap files are sparse when grown)."""
    return sum(p.stat().st_blocks * 512 for p in d.rglob("*") if p.is_file())


def _tokens(path: Path, n: int):
    import numpy as np

    src = np.memmap(path, dtype=np.uint16, mode="r")
    if src.size >= n:
        return np.asarray(src[:n], dtype=np.int64)
    reps = -(-n // src.size)
    return np.tile(np.asarray(src, dtype=np.int64), reps)[:n]


def fa_growing_prefill(model, ids, block: int = 1024, on_block=None):
    """Full-attention prefill with a growing KV cache (keys [0, pos) only): the model's own layers
    (RoPE, SDPA), so the hidden states equal the batch forward's. Returns the final hidden state
    of the last block (for checks)."""
    import torch
    import torch.nn.functional as F

    from drt_core.attention import apply_rope, rope_cos_sin

    cfg = model.config
    H, d, D = cfg.num_heads, cfg.head_dim, cfg.hidden_size
    L = len(ids)
    ids_t = torch.as_tensor(ids, dtype=torch.long)
    kc = [torch.empty(1, H, L, d) for _ in model.layers]
    vc = [torch.empty(1, H, L, d) for _ in model.layers]
    x = None
    with torch.no_grad():
        for s in range(0, L, block):
            e = min(L, s + block)
            T = e - s
            x = model.embed(ids_t[s:e][None])
            cos, sin = rope_cos_sin(e, d, cfg.rope_theta, x.device)
            cos, sin = cos[s:], sin[s:]
            q_pos = torch.arange(s, e)
            mask = torch.arange(e)[None, :] <= q_pos[:, None]  # [T, e] causal
            for li, layer in enumerate(model.layers):
                q, k, v = layer.attn._split(layer.norm1(x))
                q, k = apply_rope(q, cos, sin), apply_rope(k, cos, sin)
                kc[li][:, :, s:e], vc[li][:, :, s:e] = k, v
                o = F.scaled_dot_product_attention(q, kc[li][:, :, :e], vc[li][:, :, :e], attn_mask=mask)
                x = x + layer.attn.o(o.transpose(1, 2).reshape(1, T, D))
                x = x + layer.mlp(layer.norm2(x))
            if on_block is not None:
                on_block(e)
    return x


def worker(arch: str, length: int, preset: str, tokens: Path, tmp_dir: str | None, block_chunks: int,
           device: str = "cpu", model_dir: str | None = None) -> dict:
    import torch

    from drt_core.hf_config import DRTConfig
    from drt_core.engine import Engine
    from drt_core.modeling import DRTForCausalLM
    from kernels.gca import resolve_backend

    torch.manual_seed(0)
    model_arch = {"full_attention_kv": "full_attention", "drt_eager": "drt"}.get(arch, arch)
    if model_dir:  # a checkpoint with its own config (the shipped model: lexical scores, preamble)
        model = DRTForCausalLM.from_pretrained(model_dir).eval().to(device)
        cfg = model.config
        if cfg.arch != model_arch:
            raise SystemExit(f"bench.prefill: --model {model_dir} is arch {cfg.arch!r}, not {model_arch!r}")
    else:
        cfg = DRTConfig.from_preset(preset, arch=model_arch)
        model = DRTForCausalLM(cfg).eval().to(device)
    params = sum(p.numel() for p in model.parameters())
    ids = _tokens(tokens, length)
    rss0 = _rss_now_mb()
    marks: list[tuple[int, float, float]] = []  # (tokens done, wall, cpu) after each block

    def mark(done: int):
        marks.append((done, time.perf_counter(), time.process_time()))

    out = {"arch": arch, "length": length, "preset": preset, "params": params, "threads": torch.get_num_threads(),
           "device": device}
    state_dir = None
    with _RssSampler() as rs:
        mark(0)
        if arch == "full_attention_kv":
            if device != "cpu":
                raise SystemExit("bench.prefill: full_attention_kv runs on the CPU only")
            fa_growing_prefill(model, ids, block=block_chunks * 64, on_block=mark)
            tier = "growing KV cache (RAM)"
        else:
            eng = Engine(model, None, device=device, fingerprint=f"bench-{arch}")
            if cfg.uses_chunks:
                state_dir = Path(tempfile.mkdtemp(prefix="drt-bench-", dir=tmp_dir))
                state = eng.new_state(state_dir)
                tier = f"memmap ({eng.memory_dtype.name} K/V)"
            else:
                state = eng.new_state(None)
                tier = {"sliding_window": "sliding-window KV ring",
                        "landmark": "every position's K/V (RAM, growing)"}.get(
                    arch, f"KV ring of {eng.stream.full_attention_capacity} positions")
            for p in eng.prefill(state, ids, block_chunks=block_chunks, defer_upper=arch != "drt_eager"):
                if device != "cpu":  # (numpy ids: no 1M-int list)
                    torch.cuda.synchronize()
                mark(p.done_tokens)
            if state.carry.upper_stale:  # the deferred groups, as the first question runs them: timed too
                eng.stream.catch_up(state)
                mark(len(ids))
            if cfg.uses_chunks:
                out["gca_backend"] = resolve_backend(cfg.gca_backend, torch.device(device))
                t = state.transfers
                out["transfers"] = {"gathers": t.gathers, "chunks": t.chunks, "bytes": t.bytes, "reused": t.reused}
            if state_dir is not None:
                out["chunks"] = state.n_chunks
                out["disk_bytes"] = _disk_bytes(state_dir)
                out["disk_bytes_per_token"] = out["disk_bytes"] / length
                used = state.memory.n * (4 * cfg.hidden_size + 2 * (cfg.chunk_size - 1) * cfg.hidden_size
                                         * state.memory.dtype.itemsize + 2 * 4 * cfg.num_groups * cfg.chunk_topk)
                out["disk_bytes_per_token_used"] = used / length
    if state_dir is not None:
        shutil.rmtree(state_dir, ignore_errors=True)
    # marks[0] is the start; the first block is warm-up
    (n0, w0, c0), (n1, w1, c1), (nN, wN, cN) = marks[0], marks[min(1, len(marks) - 1)], marks[-1]
    if len(marks) > 2:
        tps, cps = (nN - n1) / (wN - w1), (nN - n1) / max(cN - c1, 1e-9)
    else:
        tps, cps = (nN - n0) / (wN - w0), (nN - n0) / max(cN - c0, 1e-9)
    # the speed over the first 16 blocks after warm-up (head) and over the last 16 (tail), in the same
    # process: tail/head at 1M compares the speed at ~1M tokens with the speed at ~16K tokens
    head_a, head_b = marks[min(1, len(marks) - 1)], marks[min(17, len(marks) - 1)]
    tail_a = marks[max(0, len(marks) - 17)]

    def rate(a, b, i):
        return (b[0] - a[0]) / max(b[i] - a[i], 1e-9)

    out.update(
        tier=tier,
        seconds=wN - w0,
        cpu_seconds=cN - c0,
        tokens_per_s=tps,
        tokens_per_cpu_s=cps,
        tokens_per_s_head=rate(head_a, head_b, 1),
        tokens_per_cpu_s_head=rate(head_a, head_b, 2),
        tokens_per_s_tail=rate(tail_a, marks[-1], 1),
        tokens_per_cpu_s_tail=rate(tail_a, marks[-1], 2),
        tail_tokens=nN - tail_a[0],
        rss_after_load_mb=rss0,
        peak_rss_mb=resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024,
        peak_rss_anon_mb=rs.anon,
        peak_rss_file_mb=rs.file,
    )
    return out


# ----------------------------------------------------------------------------------------------
# the driver


def ratios(rows: list[dict]) -> dict:
    by = {(r["arch"], r["length"]): r for r in rows if r.get("status") == "ok"}
    K = 1024
    out: dict = {}

    def get(a, n, key):
        r = by.get((a, n))
        return None if r is None else r[key]

    def ratio(x, y):
        return None if x is None or y is None or not y else x / y

    for a in ("drt", "sliding_window"):
        out[f"{a}_rss_1m_over_64k"] = ratio(get(a, K * K, "peak_rss_mb"), get(a, 64 * K, "peak_rss_mb"))
        out[f"{a}_toks_1m_over_16k"] = ratio(get(a, K * K, "tokens_per_s"), get(a, 16 * K, "tokens_per_s"))
        out[f"{a}_cpu_toks_1m_over_16k"] = ratio(get(a, K * K, "tokens_per_cpu_s"), get(a, 16 * K, "tokens_per_cpu_s"))
        # within the 1M run: speed over its last 16 blocks / speed over its first 16 (after warm-up)
        out[f"{a}_1m_run_tail_over_head"] = ratio(get(a, K * K, "tokens_per_s_tail"),
                                                  get(a, K * K, "tokens_per_s_head"))
        out[f"{a}_1m_run_tail_over_head_cpu"] = ratio(get(a, K * K, "tokens_per_cpu_s_tail"),
                                                      get(a, K * K, "tokens_per_cpu_s_head"))
    lengths = sorted({n for _, n in by})
    out["drt_over_sliding_window"] = {
        fmt_length(n): ratio(get("drt", n, "tokens_per_s"), get("sliding_window", n, "tokens_per_s"))
        for n in lengths}
    out["drt_over_sliding_window_cpu"] = {
        fmt_length(n): ratio(get("drt", n, "tokens_per_cpu_s"), get("sliding_window", n, "tokens_per_cpu_s"))
        for n in lengths}
    out["drt_over_drt_eager"] = {
        fmt_length(n): ratio(get("drt", n, "tokens_per_s"), get("drt_eager", n, "tokens_per_s"))
        for n in lengths if get("drt_eager", n, "tokens_per_s")}
    for fa in ("full_attention", "full_attention_kv"):
        out[f"drt_over_{fa}_64k"] = ratio(get("drt", 64 * K, "tokens_per_s"), get(fa, 64 * K, "tokens_per_s"))
        out[f"drt_over_{fa}_64k_cpu"] = ratio(get("drt", 64 * K, "tokens_per_cpu_s"),
                                              get(fa, 64 * K, "tokens_per_cpu_s"))
    targets = {
        "rss_1m_le_1.2x_64k": (out["drt_rss_1m_over_64k"], lambda v: v <= 1.2),
        "toks_1m_within_15pct_of_16k": (out["drt_toks_1m_over_16k"], lambda v: v >= 0.85),
        "drt_ge_0.75x_sliding_window_at_1m": (out["drt_over_sliding_window"].get("1M"), lambda v: v >= 0.75),
        "drt_ge_10x_full_attention_at_64k": (out["drt_over_full_attention_64k"], lambda v: v >= 10),
        "drt_ge_10x_full_attention_kv_at_64k": (out["drt_over_full_attention_kv_64k"], lambda v: v >= 10),
    }
    out["targets"] = {k: (None if v is None else bool(f(v))) for k, (v, f) in targets.items()}
    return out


def _fmt(v, nd=0):
    if v is None:
        return "-"
    return f"{v:,.{nd}f}"


def format_table(res: dict) -> str:
    weights = f"model {res['model']}" if res.get("model") else f"preset {res['preset']} (random init)"
    lines = [f"prefill benchmark: {res['machine']}; {weights}; tokens: {res['tokens']}",
             "",
             "| model | params | tokens | tier | tok/s | tok/CPU-s | tok/s first / last 16 blocks | peak RSS MB "
             "| RSS after load MB | disk B/token | seconds |",
             "|---|---|---|---|---|---|---|---|---|---|---|"]
    for r in res["rows"]:
        if r.get("status") != "ok":
            lines.append(f"| {r['arch']} | {_fmt(r.get('params'))} | {fmt_length(r['length'])} | - | {r['status']} "
                         "| - | - | - | - | - | - |")
            continue
        lines.append(
            f"| {r['arch']} | {_fmt(r['params'])} | {fmt_length(r['length'])} | {r['tier']} "
            f"| {_fmt(r['tokens_per_s'])} "
            f"| {_fmt(r['tokens_per_cpu_s'])} | {_fmt(r['tokens_per_s_head'])} / {_fmt(r['tokens_per_s_tail'])} "
            f"| {_fmt(r['peak_rss_mb'])} "
            f"| {_fmt(r['rss_after_load_mb'])} | {_fmt(r.get('disk_bytes_per_token'))} | {_fmt(r['seconds'], 1)} |")
    rt = res["ratios"]
    lines += ["", "ratios:"]
    for k, v in rt.items():
        if isinstance(v, dict):
            v = ", ".join(f"{a}: {_fmt(b, 2) if not isinstance(b, bool) else b}" for a, b in v.items())
        elif isinstance(v, float):
            v = f"{v:.3f}"
        lines.append(f"  {k}: {v}")
    return "\n".join(lines)


def machine_name() -> str:
    from bench.machine import cpu_model

    return f"{cpu_model()}, {os.cpu_count()} CPUs"


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="bench.prefill", description=__doc__.splitlines()[0])
    p.add_argument("--lengths", default="16k,64k,256k,1m", help="token counts, K = 1024 (default 16k,64k,256k,1m)")
    p.add_argument("--archs", default=",".join(ARCHS), help=f"which models (default {','.join(ARCHS)})")
    p.add_argument("--preset", default="tiny", help="model preset (random init; default tiny)")
    p.add_argument("--model", default=None, help="a checkpoint instead of --preset's random weights (its arch only)")
    p.add_argument("--tokens", default=str(DEFAULT_TOKENS), help="uint16 token file (default data/books/train.bin)")
    p.add_argument("--tmp-dir", default=None, help="where the memmap tier writes (default: the system temp dir)")
    p.add_argument("--block-chunks", type=int, default=16, help="chunks per prefill block (default 16)")
    p.add_argument("--fa-max", default="64k", help="longest length for full_attention_kv (quadratic; default 64k)")
    p.add_argument("--landmark-max", default="256k", help="longest length for landmark (memory grows; default 256k)")
    p.add_argument("--repeat", type=int, default=1,
                   help="measure each model x length this many times (fresh process each); report the fastest, "
                        "and the highest peak RSS (default 1)")
    p.add_argument("--threads", type=int, default=None, help="torch threads in each measurement (default: torch's)")
    p.add_argument("--device", default="cpu",
                   help="torch device of the model (cuda: the engine's GCA runs the Triton kernels; default cpu)")
    p.add_argument("--out", default=None, help="also write the JSON here, updated after every measurement")
    p.add_argument("--json", action="store_true", help="print one JSON object")
    p.add_argument("--worker", nargs=2, metavar=("ARCH", "LENGTH"), help=argparse.SUPPRESS)
    args = p.parse_args(argv)

    if args.worker:
        if args.threads:
            import torch

            torch.set_num_threads(args.threads)
        r = worker(args.worker[0], int(args.worker[1]), args.preset, Path(args.tokens), args.tmp_dir, args.block_chunks,
                   args.device, args.model)
        print(json.dumps(r))
        return 0

    from drt_core.stream import Stream

    try:
        lengths = [parse_length(x) for x in args.lengths.split(",") if x.strip()]
        fa_max = parse_length(args.fa_max)
        lm_max = parse_length(args.landmark_max)
    except (ValueError, KeyError):
        print(f"bench.prefill: error: bad --lengths {args.lengths!r}", file=sys.stderr)
        return 2
    archs = [a.strip() for a in args.archs.split(",") if a.strip()]
    for a in archs:
        if a not in ARCHS + OPTIONAL_ARCHS:
            print(f"bench.prefill: error: unknown arch {a!r} (choose from {', '.join(ARCHS + OPTIONAL_ARCHS)})",
                  file=sys.stderr)
            return 2
    if not Path(args.tokens).exists():
        print(f"bench.prefill: error: token file not found: {args.tokens}", file=sys.stderr)
        return 2
    res = {"machine": machine_name(), "preset": args.preset, "model": args.model, "tokens": args.tokens,
           "lengths": lengths,
           "command": "drt-reader bench prefill " + " ".join(argv if argv is not None else sys.argv[1:]),
           "rows": []}
    for a in archs:
        for n in lengths:
            if a == "full_attention" and n > Stream.full_attention_capacity:
                row = {"arch": a, "length": n,
                       "status": f"n/a: exceeds capacity ({Stream.full_attention_capacity} positions)"}
            elif a == "full_attention_kv" and n > fa_max:
                row = {"arch": a, "length": n, "status": f"not run: quadratic (above --fa-max {fmt_length(fa_max)})"}
            elif a == "landmark" and n > lm_max:
                row = {"arch": a, "length": n,
                       "status": f"not run: memory grows (above --landmark-max {fmt_length(lm_max)})"}
            else:
                cmd = [sys.executable, "-m", "bench.prefill", "--worker", a, str(n), "--preset", args.preset,
                       "--tokens", args.tokens, "--block-chunks", str(args.block_chunks)]
                if args.tmp_dir:
                    cmd += ["--tmp-dir", args.tmp_dir]
                if args.model:
                    cmd += ["--model", args.model]
                if args.threads:
                    cmd += ["--threads", str(args.threads)]
                if args.device != "cpu":
                    cmd += ["--device", args.device]
                # idle OpenMP threads sleep instead of spinning, so CPU time counts work, not waiting
                env = dict(os.environ, OMP_WAIT_POLICY=os.environ.get("OMP_WAIT_POLICY", "PASSIVE"))
                t0 = time.time()
                runs = []
                for _ in range(args.repeat):
                    proc = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True, env=env)
                    if proc.returncode != 0:
                        runs = [{"arch": a, "length": n, "status": f"failed: {proc.stderr.strip().splitlines()[-1:]}"}]
                        break
                    runs.append(json.loads(proc.stdout.strip().splitlines()[-1]) | {"status": "ok"})
                # the fastest repeat (least disturbed by other load), with the WORST peak RSS of all
                row = dict(max(runs, key=lambda r: r.get("tokens_per_s", 0)))
                if len(runs) > 1 and row["status"] == "ok":
                    row["peak_rss_mb"] = max(r["peak_rss_mb"] for r in runs)
                    keys = ("tokens_per_s", "tokens_per_cpu_s", "peak_rss_mb")
                    row["repeats"] = [{k: r[k] for k in keys} for r in runs]
                print(f"[bench.prefill] {a} {fmt_length(n)}: {row.get('tokens_per_s', 0):.0f} tok/s, "
                      f"peak RSS {row.get('peak_rss_mb', 0):.0f} MB, {time.time() - t0:.0f} s ({row['status']})",
                      file=sys.stderr, flush=True)
            res["rows"].append(row)
            res["ratios"] = ratios(res["rows"])
            if args.out:
                Path(args.out).write_text(json.dumps(res, indent=1))
    res["ratios"] = ratios(res["rows"])
    print(json.dumps(res) if args.json else format_table(res))
    return 0


if __name__ == "__main__":
    sys.exit(main())
