"""glr's outputs and gradients under different kernel switches, compared on the GPU at production shapes.

The emulator compares kernels word for word at small shapes; this does it on the hardware at the benchmark's
shapes, through the torch op a user calls. Each configuration (a set of environment switches, glr/cuda/README.md:
they are read once per process) runs in its own process on the same inputs (side_by_side.make_inputs, same seed)
and saves o, dq, dk, dv, dg, dbeta; the parent compares every configuration with the first:

    python3 bench/glr/switch_diff.py [--shapes B8_T4096_H16_K128,...] [--out DIR] CONFIG [CONFIG ...]
    CONFIG: NAME or NAME:VAR=VALUE[,VAR=VALUE...]   e.g. default  tma_off:GLR_BWD_CHUNK_TMA=0
    VAR=VALUE is a GLR_ switch, or site=PATH: that configuration's glr extension (--glr-site) instead of the
    default one, e.g. base:site=/tmp/base/build-py/glr-gpu for the build of the commit before a change

Printed per (shape, configuration, tensor): words that differ from the first configuration (the tensors' own
dtype, bit for bit; NaN against NaN counts as equal only where both are NaN), the normwise difference
||x - ref|| / ||ref|| over the finite words, and the words finite in one and not the other. A kernel change that
keeps every product and its order should show 0 words; a change of the algebra shows small normwise differences
and no finiteness changes. Needs glr's extension built (side_by_side.py builds it into build-py/glr-gpu).
Exit status 0 when every configuration ran, 1 when one failed, 2 on bad arguments.
"""
import argparse
import os
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
sys.path.insert(0, HERE)
import side_by_side_report as rep  # noqa: E402

NAMES = ("o", "dq", "dk", "dv", "dg", "dbeta")


def parse_config(text):
    name, _, rest = text.partition(":")
    if not name or not name.replace("_", "").replace("-", "").isalnum():
        raise ValueError(f"configuration '{text}': a name of letters, digits, - and _ first")
    env = {}
    for part in filter(None, rest.split(",")):
        var, eq, val = part.partition("=")
        if not eq or not (var.startswith("GLR_") or (var == "site" and val)):
            raise ValueError(f"configuration '{text}': '{part}' is not GLR_VAR=VALUE or site=PATH")
        env[var] = val
    return name, env


def child(shape_name, seed, path, site):
    import torch
    sys.path.insert(0, site)
    import glr
    from side_by_side import leaves, make_inputs
    s = next(x for x in rep.SHAPES + rep.CHECK_SHAPES if x["name"] == shape_name)
    inp = make_inputs(s, seed)
    L = leaves(inp)
    o = glr.chunk_gated_delta_rule(*L, scale=inp["scale"], cu_seqlens=inp["cu"])[0]
    o.backward(inp["do"])
    torch.cuda.synchronize()
    torch.save({n: t.detach().cpu() for n, t in zip(NAMES, [o] + [x.grad for x in L])}, path)


def compare(x, ref):
    import torch
    if x.shape != ref.shape or x.dtype != ref.dtype:
        return dict(words=None, rel=None, finite_changed=None, note=f"{tuple(x.shape)} {x.dtype} vs "
                    f"{tuple(ref.shape)} {ref.dtype}")
    if torch.cuda.is_available():  # the comparisons of 10^8 words on the GPU
        x, ref = x.cuda(), ref.cuda()
    ib = {torch.bfloat16: torch.int16, torch.float16: torch.int16, torch.float32: torch.int32,
          torch.float64: torch.int64}[x.dtype]
    both_nan = torch.isnan(x) & torch.isnan(ref)
    words = int(((x.view(ib) != ref.view(ib)) & ~both_nan).sum())
    fx, fr = torch.isfinite(x), torch.isfinite(ref)
    both = fx & fr
    xd, rd = x[both].double(), ref[both].double()
    den = float(rd.norm())
    rel = float((xd - rd).norm()) / den if den > 0 else float((xd - rd).norm())
    return dict(words=words, rel=rel, finite_changed=int((fx != fr).sum()), note="")


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("configs", nargs="*")
    ap.add_argument("--shapes", default="B8_T4096_H16_K128,B1_T32768_H16_HV32_K128,varlen32k_H16_K128,"
                    "varlen32k_H16_HV32_K128")
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--out", default=os.environ.get("OUT", "build-bench"))
    ap.add_argument("--work", default="/tmp/glr-switch-diff")
    ap.add_argument("--glr-site", default=os.path.join(ROOT, "build-py", "glr-gpu"))
    ap.add_argument("--child", nargs=3, metavar=("SHAPE", "SEED", "PATH"), help=argparse.SUPPRESS)
    args = ap.parse_args(argv)
    if args.child:
        child(args.child[0], int(args.child[1]), args.child[2], args.glr_site)
        return 0
    try:
        configs = [parse_config(c) for c in args.configs]
    except ValueError as e:
        print(f"switch_diff.py: {e}", file=sys.stderr)
        return 2
    if len(configs) < 2 or len({n for n, _ in configs}) != len(configs):
        print("switch_diff.py: give at least two configurations with distinct names", file=sys.stderr)
        return 2
    known = {s["name"] for s in rep.SHAPES + rep.CHECK_SHAPES}
    shapes = [s for s in args.shapes.split(",") if s]
    bad = [s for s in shapes if s not in known]
    if bad:
        print(f"switch_diff.py: --shapes: unknown {', '.join(bad)} (known: {', '.join(sorted(known))})",
              file=sys.stderr)
        return 2
    import torch
    os.makedirs(args.work, exist_ok=True)
    os.makedirs(args.out, exist_ok=True)
    lines = [f"# glr under kernel switches: differences from `{configs[0][0]}`", "",
             f"{torch.cuda.get_device_name()} | seed {args.seed} | {time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}",
             "", "configurations: " + "; ".join(f"`{n}`: {' '.join(f'{k}={v}' for k, v in e.items()) or 'as unset'}"
                                               for n, e in configs), "",
             "| shape | configuration | tensor | words differing | normwise difference | finite in one only |",
             "|---|---|---|---|---|---|"]
    status = 0
    for s in shapes:
        saved = {}
        for name, env in configs:
            path = os.path.join(args.work, f"{s}.{name}.pt")
            t0 = time.perf_counter()
            switches = {k: v for k, v in env.items() if k != "site"}
            site = env.get("site", args.glr_site)
            r = subprocess.run([sys.executable, os.path.abspath(__file__), "--glr-site", site, "--child", s,
                                str(args.seed), path], env={**os.environ, **switches}, capture_output=True, text=True)
            if r.returncode != 0:
                status = 1
                msg = (r.stderr.strip().splitlines() or ["(no message)"])[-1]
                lines.append(f"| {s} | {name} | - | failed: {msg} | | |")
                print(f"{s} {name}: failed ({msg})", flush=True)
                continue
            saved[name] = path
            print(f"{s} {name}: ran in {time.perf_counter() - t0:.1f} s", flush=True)
        ref_name = configs[0][0]
        if ref_name not in saved:
            continue
        ref = torch.load(saved[ref_name])
        for name, _ in configs[1:]:
            if name not in saved:
                continue
            got = torch.load(saved[name])
            for t in NAMES:
                c = compare(got[t], ref[t])
                cell = lambda v, f: "-" if v is None else format(v, f)  # noqa: E731
                lines.append(f"| {s} | {name} | {t} | {cell(c['words'], 'd')} of {ref[t].numel()} | "
                             f"{cell(c['rel'], '.2e')} | {cell(c['finite_changed'], 'd')} {c['note']} |")
            os.remove(saved[name])
        os.remove(saved[ref_name])
    text = "\n".join(lines) + "\n"
    with open(os.path.join(args.out, "switch_diff.md"), "w") as f:
        f.write(text)
    print(text, flush=True)
    return status


if __name__ == "__main__":
    sys.exit(main())
