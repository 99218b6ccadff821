#!/usr/bin/env python3
"""Writes the kgate contracts of glr's CUDA kernels from the CPU contracts in glr/contracts/ (one per file
there): the same operator, tensors, domains and spread rules, at the sizes the kernels take.

    python3 glr/contracts/cuda/generate.py      (after any change to glr/contracts/*.toml)

What changes, and why:
  * K and V in {64, 128} (min 64, max 128, multiple_of 64) and chunk = 64: the kernels' only sizes
    (glr/params.hpp kGpuHeadDims, kGpuChunks); scale = 1/sqrt(64);
  * T up to 320 (nominal 100): several chunks of 64 and a short last one;
  * token tensors (q, k, v, beta, o, dout and their gradients) bf16, the gate and the states f32, as the
    kernels are used (issue 5: bf16 inputs);
  * a uniform k domain halved to +-0.125, so beta |k|^2 stays below 1 at K = 128 as the CPU contract's
    +-0.25 does at K = 32 (the delta rule's I - beta k k^T a contraction);
  * accumulation at K = 128, T = 320 (5 chunks), k halved, and for the delta members beta = 2^-10 and
    h0 = 0.01: with the CPU contract's beta = 2^-6 and h0 = 1 at K = 128, dk picks up negative WY terms
    (dW = -dV_new S^T) that cancel its positive ones, so some elements are differences of large terms and
    the gate's bound for a sum of positive terms does not apply (measured: an fp32-accurate dk 7x over it
    on a 5e-6 element among 0.05s); with these every term stays positive (measured: 0.24x);
  * fp32 states (ht, dh0) with tolerance scale 4: the default bound (4 u |ref| + 8 u sqrt(N) rms) assumes
    errors that grow like sqrt(N); the chunked form carries decays as differences of cumulative log-decays
    and solves a triangular system per chunk, and its fp32 state errors reach 1.0-1.6x that bound at
    K = 64..128 (measured on the host emulation; the CPU contracts' K <= 32 stay under it). A defect shows
    as an error of order |ref|;
  * a longer timeout: the same contracts also drive the host emulation of the kernels.
"""
import glob
import os
import re

HERE = os.path.dirname(os.path.abspath(__file__))
SRC = os.path.dirname(HERE)
TOKEN_TENSORS = {"q", "k", "v", "beta", "o", "dout", "dq", "dk", "dv", "dbeta"}


def header(text, name, pass_):
    lines = text.split("\n")
    body_start = next(i for i, l in enumerate(lines) if l.startswith("[op]"))
    head = lines[:body_start]
    keep = [l for l in head[2:] if "Argument order" not in l and "(kgate_run:" not in l and l != "#"]
    keep = [l.replace("every tensor f32", "bf16 token tensors, f32 gate and states") for l in keep]
    return "\n".join([
        head[0].replace("# glr ", "# glr CUDA ", 1),
        f"# Generated from ../{name} by generate.py (run it after editing the CPU contracts):",
        "# the same operator, tensors and spread rules at the kernels' sizes (K, V in {64, 128}, chunk 64).",
        "#",
        *keep,
        f"# Kernel: glr_cuda_kgate_{pass_}.so (the GPU kernels) or glr_cuda_emu_kgate_{pass_}.so (their host",
        f"# emulation); oracle: libglr_kgate_{pass_}.so (kgate_oracle: the float64 exact recurrence, glr/reference).",
        "# Argument order and attrs: glr/kgate/binding.hpp (glr/cuda/abi/abi_call.hpp reads them the same way).",
    ]) + "\n" + "\n".join(lines[body_start:])


def dim(block, lo, hi, nominal, multiple=None):
    name = block.split("\n")[0]
    out = [name, f"min = {lo}", f"max = {hi}", f"nominal = {nominal}"]
    if multiple:
        out.append(f"multiple_of = {multiple}")
    return "\n".join(out)


def convert(path):
    name = os.path.basename(path)
    pass_ = "bwd" if "_bwd" in name else "fwd"
    text = open(path).read()
    blocks = text.split("\n\n")
    out = []
    delta = re.search(r"^delta = 1", text, re.M) is not None
    for b in blocks:
        first = b.lstrip("\n").split("\n")[0]
        if first.startswith("[dims.T]"):
            b = dim(b, 1, 320, 100)
        elif first.startswith("[dims.K]") or first.startswith("[dims.V]"):
            b = dim(b, 64, 128, 64, 64)
        elif first.startswith("[attrs]"):
            b = re.sub(r"^scale = .*$", "scale = 0.125", b, flags=re.M)
            b = re.sub(r"^chunk = .*$", "chunk = 64", b, flags=re.M)
        elif "[[inputs]]" in b or "[[outputs]]" in b:
            m = re.search(r'^name = "(\w+)"', b, re.M)
            if m and m.group(1) in TOKEN_TENSORS:
                b = re.sub(r'^dtype = "\w+"', 'dtype = "bf16"', b, flags=re.M)
            if m and m.group(1) == "k":
                b = b.replace("low = -0.25, high = 0.25", "low = -0.125, high = 0.125")
            if m and m.group(1) in ("ht", "dh0") and "tolerance" not in b:
                b += "\ntolerance = { scale = 4 }  # fp32 state: see generate.py"
        elif "[accumulation]" in b:
            b = re.sub(r"\bK = \d+", "K = 128", b)
            b = re.sub(r"\bV = \d+", "V = 64", b)
            b = re.sub(r"\bT = \d+", "T = 320", b)
            b = b.replace("(T = 160 = 10 chunks)", "(T = 320 = 5 chunks)")
            if delta:
                b = b.replace("beta |k|^2 is kept near 2^-9", "beta |k|^2 is kept near 2^-13 and h0 small")
        elif b.startswith("[[accumulation.inputs]]") and 'input = "k"' in b and delta:
            b = b.replace("value = 0.125", "value = 0.0625")
        elif b.startswith("[[accumulation.inputs]]") and 'input = "beta"' in b:
            b = re.sub(r"^value = .*$", "value = 0.0009765625", b, flags=re.M)
        elif b.startswith("[[accumulation.inputs]]") and 'input = "h0"' in b and delta:
            b = re.sub(r"^value = .*$", "value = 0.01", b, flags=re.M)
        elif first.startswith("[limits]"):
            b = re.sub(r"^timeout = .*$", "timeout = 120", b, flags=re.M)
        out.append(b)
    text = "\n\n".join(out)
    text = re.sub(r'^name = "glr\.', 'name = "glr.cuda.', text, count=1, flags=re.M)
    text = text.replace("chunked (C = 16)", "CUDA kernels (C = 64)")
    return header(text, name, pass_)


def main():
    for old in glob.glob(os.path.join(HERE, "*.toml")):
        os.remove(old)
    for path in sorted(glob.glob(os.path.join(SRC, "*.toml"))):
        with open(os.path.join(HERE, os.path.basename(path)), "w") as f:
            f.write(convert(path))
        print("wrote", os.path.join("glr/contracts/cuda", os.path.basename(path)))


if __name__ == "__main__":
    main()
