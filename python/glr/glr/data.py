"""The two training tasks, generated in-process and fully determined by (seed, step).

MQAR (multi-query associative recall, as in Zoology / the DeltaNet paper's figure): a sequence starts with
`pairs` key-value pairs (keys from the lower half of the vocabulary, values from the upper half, keys
distinct), then the queries: each key appears again at a random even offset of the rest of the sequence,
followed by its value; everything else is token 0. The loss and the accuracy count only the positions of
the queries' keys, where the model must predict the value.

Byte LM: the Python standard library's own source files (*.py under sysconfig's stdlib path), as bytes.
Files are split by a hash of their relative path: 1 in 10 held out for evaluation. Batches are random
windows of seq_len + 1 bytes.
"""
import hashlib
import os
import sysconfig

import torch

IGNORE = -100


def mqar_batch(batch, seq_len, pairs, vocab, generator):
    """(inputs [batch, seq_len], targets [batch, seq_len]) with targets IGNORE except at the queries."""
    if 4 * pairs > seq_len:
        raise ValueError(f"glr: mqar: seq_len {seq_len} too short for {pairs} pairs (needs >= {4 * pairs})")
    half = vocab // 2
    if pairs > half - 1:
        raise ValueError(f"glr: mqar: vocab {vocab} too small for {pairs} distinct keys")
    keys = torch.stack([torch.randperm(half - 1, generator=generator)[:pairs] + 1 for _ in range(batch)])
    values = torch.randint(half, vocab, (batch, pairs), generator=generator)
    inputs = torch.zeros(batch, seq_len, dtype=torch.long)
    targets = torch.full((batch, seq_len), IGNORE, dtype=torch.long)
    inputs[:, 0:2 * pairs:2] = keys
    inputs[:, 1:2 * pairs:2] = values
    slots = (seq_len - 2 * pairs) // 2  # query slots: even offsets after the context
    for b in range(batch):
        where = torch.randperm(slots, generator=generator)[:pairs]
        order = torch.randperm(pairs, generator=generator)
        pos = 2 * pairs + 2 * where
        inputs[b, pos] = keys[b, order]
        inputs[b, pos + 1] = values[b, order]
        targets[b, pos] = values[b, order]
    return inputs, targets


def stdlib_files():
    root = sysconfig.get_paths()["stdlib"]
    out = []
    for dirpath, dirnames, filenames in os.walk(root):
        dirnames[:] = sorted(d for d in dirnames if d not in ("site-packages", "dist-packages", "__pycache__"))
        for f in sorted(filenames):
            if f.endswith(".py"):
                out.append(os.path.join(dirpath, f))
    return root, out


def byte_corpus(max_bytes=None):
    """(train bytes, held-out bytes) as uint8 tensors; max_bytes caps each (for quick runs)."""
    root, files = stdlib_files()
    if not files:
        raise RuntimeError(f"glr: no Python sources under {root}")
    train, held = bytearray(), bytearray()
    for path in files:
        rel = os.path.relpath(path, root)
        dest = held if hashlib.sha1(rel.encode()).digest()[0] % 10 == 0 else train
        if max_bytes is not None and len(dest) >= max_bytes:
            continue
        with open(path, "rb") as f:
            dest += f.read()
    if max_bytes is not None:
        train, held = train[:max_bytes], held[:max_bytes]
    if not train or not held:
        raise RuntimeError(f"glr: the stdlib under {root} gave an empty split (train {len(train)}, held {len(held)})")
    return torch.frombuffer(train, dtype=torch.uint8), torch.frombuffer(held, dtype=torch.uint8)


def lm_batch(data, batch, seq_len, generator):
    starts = torch.randint(0, data.numel() - seq_len - 1, (batch,), generator=generator)
    idx = starts[:, None] + torch.arange(seq_len + 1)[None, :]
    chunk = data[idx].long()
    return chunk[:, :-1], chunk[:, 1:]
