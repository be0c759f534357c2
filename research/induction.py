"""`python research/induction.py MODEL [MODEL...]`: can the model copy at all, inside its window?

Feeds 8 sequences of the form [P, P] where P is 100 tokens (uniformly random ids, or a passage of
held-out book text), and prints the mean loss on the second copy against the first. A model with
induction heads scores the second copy far lower; one without scores both alike."""
import sys, numpy as np, torch
sys.path.insert(0, '.')
from drt_core.modeling import DRTForCausalLM
torch.manual_seed(0)
val = np.memmap('data/books/val.bin', dtype=np.uint16, mode='r')
rng = np.random.default_rng(0)
P = 100
kinds = {'random': np.stack([rng.integers(3, 8192, P) for _ in range(8)]),
         'text': np.stack([val[(o := int(rng.integers(0, len(val) - P))): o + P].astype(np.int64) for _ in range(8)])}
for path in sys.argv[1:]:
    m = DRTForCausalLM.from_pretrained(path).eval()
    row = []
    for name, p in kinds.items():
        ids = torch.from_numpy(np.concatenate([p, p], 1)).long()
        with torch.no_grad():
            lg = m(ids).logits[:, :-1].float()
        ce = torch.nn.functional.cross_entropy(lg.transpose(1, 2), ids[:, 1:], reduction='none')
        row.append(f"{name}: first copy {ce[:, 1:P - 1].mean():.2f} second copy {ce[:, P:].mean():.2f}")
    print(path, ' | '.join(row), flush=True)
