"""How side_by_side.py loads the three implementations: glr's extension (reused, or built as
python/glr/gpu_check.sh builds it), fla 0.6 with its Triton path alone (and its issue-640 guard bypassed, said
so), FlashQLA 0.1.3. Each becomes an Impl whose fn(q, k, v, g, beta, scale, cu_seqlens) returns o; one that does
not load gives a reason instead, which becomes its rows' note."""
import glob
import hashlib
import os
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))

T_START = time.perf_counter()


def log(msg):
    print(f"[{time.perf_counter() - T_START:6.1f}s] {msg}", flush=True)


def one_line(e):
    s = f"{type(e).__name__}: {e}".strip().splitlines()
    return (s[0] if s else type(e).__name__)[:300]


# ---------------------------------------------------------------------------------------------------------------
# The three implementations

def fla_env():
    """fla 0.6 dispatches chunk_gated_delta_rule to FlashQLA when flash_qla is importable (FLA_FLASH_QLA) and, on
    Hopper with Triton >= 3.4, its chunk_bwd_dqkwg to its own TileLang kernel when tilelang is (FLA_TILELANG):
    both off, so 'fla' here is its Triton path alone. Returns notes on what was overridden."""
    notes = []
    for var in ("FLA_FLASH_QLA", "FLA_TILELANG"):
        if os.environ.get(var, "0") != "0":
            notes.append(f"{var} was {os.environ[var]!r} in the environment; set to 0")
        os.environ[var] = "0"
    return notes


def bypass_fla_hopper_guard():
    """fla 0.6's chunk_bwd_dqkwg raises on Hopper with Triton >= 3.4 and < 3.7.1 (fla issue 640: its gated
    kernel gives wrong results there) unless its TileLang backend takes the call. With that backend off, the
    Triton backward cannot run at all, so the module flag the guard reads is set at run time in the installed
    copy (no file is edited). Returns (bypassed, message)."""
    import triton
    import fla.ops.common.chunk_o as chunk_o
    from fla.utils import IS_NVIDIA_HOPPER
    if not hasattr(chunk_o, "TRITON_ABOVE_3_7_1"):
        return False, "fla's issue-640 guard (chunk_o.TRITON_ABOVE_3_7_1) not found in this fla: nothing bypassed"
    if chunk_o.TRITON_ABOVE_3_7_1 or not IS_NVIDIA_HOPPER:
        return False, f"fla's issue-640 guard does not apply here (Hopper {IS_NVIDIA_HOPPER}, triton " \
                      f"{triton.__version__}): nothing bypassed"
    chunk_o.TRITON_ABOVE_3_7_1 = True
    return True, (f"BYPASSED fla's Hopper guard for its issue 640: fla 0.6 refuses its gated chunk_bwd_dqkwg "
                  f"(Triton) on Hopper with Triton >= 3.4 and < 3.7.1 (this is {triton.__version__}) because it "
                  f"gives wrong results there; with FLA_TILELANG=0 that refusal would stop fla's backward, so "
                  f"fla.ops.common.chunk_o.TRITON_ABOVE_3_7_1 was set True at run time to time its Triton path. "
                  f"Its gradients on this Triton may be wrong: see the check table")


class Impl:
    def __init__(self, name, fn, version, limits=None, describe=None):
        self.name, self.fn, self.version, self.limits = name, fn, version, limits or (lambda s: None)
        # describe(inputs): which kernels it runs on for these inputs, in words, or None (unknown)
        self.describe = describe or (lambda inp: None)


def anchor_part(wheel, wheels_txt=os.path.join(os.path.dirname(os.path.abspath(__file__)), "anchors", "wheels.txt")):
    """Where bench/glr/anchors/wheels.txt carries a wheel: 'part N', 'split across parts A and B, installed with
    part B', or 'not in wheels.txt'. Read from the file, so a message never names an old part."""
    try:
        with open(wheels_txt) as f:
            for line in f:
                fields = line.split()
                if len(fields) < 2 or fields[0].startswith("#"):
                    continue
                if fields[1].split("==")[0].lower().replace("_", "-") != wheel:
                    continue
                if fields[0].startswith("split:"):
                    a, b = fields[0][len("split:"):].split(",")
                    return f"split across parts {a} and {b}, installed with part {max(a, b, key=int)}"
                return f"part {fields[0]}"
    except OSError:
        pass
    return "not in wheels.txt"


def glr_source_stamp():
    """A hash of what glr's extension is built from (glr/, python/glr/setup.py, python/glr/glr/*.py, and
    GLR_NVCC_FLAGS when set: a -lineinfo build is not the plain one)."""
    h = hashlib.sha256()
    flags = os.environ.get("GLR_NVCC_FLAGS", "")
    if flags:  # unset or empty leaves the plain build's stamp as it was
        h.update(f"GLR_NVCC_FLAGS={flags}".encode())
    files = sorted(glob.glob(os.path.join(ROOT, "glr", "**", "*"), recursive=True)) + \
        [os.path.join(ROOT, "python", "glr", "setup.py")] + \
        sorted(glob.glob(os.path.join(ROOT, "python", "glr", "glr", "*.py")))
    for f in files:
        if os.path.isfile(f):
            h.update(os.path.relpath(f, ROOT).encode())
            with open(f, "rb") as fh:
                h.update(fh.read())
    return h.hexdigest()[:16]


def glr_build_plan(site, mode):
    """(needed, why, stamp): whether glr's extension must be built into `site`. mode: auto (when missing or built
    from other sources than the checkout's), always, never."""
    stamp_file = os.path.join(site, ".glr-source-stamp")
    want = glr_source_stamp()
    have = open(stamp_file).read().strip() if os.path.exists(stamp_file) else None
    built = glob.glob(os.path.join(site, "glr", "_C*.so"))
    if mode == "never" or (mode == "auto" and built and have == want):
        if not built:
            return False, f"no glr extension in {site} (--glr-build never)", want
        same = "same sources" if have == want else f"sources stamp {have} != {want}, reused as --glr-build never"
        return False, f"glr extension reused from {site} ({same})", want
    why = "forced" if mode == "always" else ("not built" if not built else
                                             f"built from other sources (stamp {have}, now {want})")
    return True, why, want


def start_glr_build(site, why, out_dir):
    """Starts building glr._C into `site` as python/glr/gpu_check.sh does; returns (process, log file, start)."""
    log(f"building glr's extension into {site} ({why}); takes minutes")
    # two cores stay free for the process that autotunes fla meanwhile (its launches must keep the GPU busy)
    env = dict(os.environ, GLR_CUDA="1", MAX_JOBS=os.environ.get("MAX_JOBS", str(max(1, (os.cpu_count() or 4) - 2))))
    logf = os.path.join(out_dir, "glr_build.log")
    fh = open(logf, "w")
    p = subprocess.Popen([sys.executable, "-m", "pip", "install", "-q", "--no-build-isolation", "--no-deps",
                          "--upgrade", "--target", site, os.path.join(ROOT, "python", "glr")],
                         env=env, stdout=fh, stderr=subprocess.STDOUT, cwd=ROOT)
    fh.close()
    return p, logf, time.perf_counter()


def finish_glr_build(site, build, stamp):
    """Waits for start_glr_build's process; returns (ok, note)."""
    p, logf, t0 = build
    rc = p.wait()
    if rc != 0:
        with open(logf) as fh:
            tail = fh.read()[-1500:]
        return False, f"glr build failed (rc {rc}, log {logf}): ...{tail}"
    with open(os.path.join(site, ".glr-source-stamp"), "w") as fh:
        fh.write(stamp + "\n")
    return True, f"glr extension built in {time.perf_counter() - t0:.0f} s (sources {stamp})"


def load_glr(args, notes, build=None):
    """glr's Impl, building the extension first where needed (or finishing a build started earlier)."""
    needed, why, stamp = glr_build_plan(args.glr_site, args.glr_build)
    if needed or build is not None:
        ok, note = finish_glr_build(args.glr_site, build or start_glr_build(args.glr_site, why, args.out), stamp)
    else:
        ok, note = bool(glob.glob(os.path.join(args.glr_site, "glr", "_C*.so"))), why
    notes.append(note)
    log(note)
    if not ok:
        raise RuntimeError(note)
    sys.path.insert(0, args.glr_site)
    import glr

    def paths(inp):  # glr's own answer to which kernels each pass runs, and why (its sm90 path or the blocks)
        a = dict(g=inp["g"], beta=inp["beta"], scale=inp["scale"], cu_seqlens=inp["cu"])
        return (f"glr fwd: {glr.forward_path(inp['q'], inp['k'], inp['v'], **a)}; "
                f"bwd: {glr.backward_path(inp['q'], inp['k'], inp['v'], **a)}")
    return Impl("glr", lambda q, k, v, g, b, scale, cu: glr.chunk_gated_delta_rule(
        q, k, v, g, b, scale=scale, cu_seqlens=cu)[0], f"glr ({glr.__file__})", describe=paths)


def load_impls(args, notes):
    """The implementations asked for; those that do not load give a reason instead."""
    impls, missing = {}, {}
    want = args.impls.split(",")
    if "glr" in want:
        try:
            impls["glr"] = load_glr(args, notes)
        except Exception as e:
            missing["glr"] = f"glr not loaded: {one_line(e)}"
    if os.path.isdir(args.anchors_site):
        sys.path.insert(0, args.anchors_site)
    if "fla" in want:
        try:
            import fla
            from fla.ops.gated_delta_rule import chunk_gated_delta_rule as fla_cgdr
            bypassed, msg = bypass_fla_hopper_guard()
            notes.append(msg)
            log(msg)
            impls["fla"] = Impl("fla", lambda q, k, v, g, b, scale, cu: fla_cgdr(
                q, k, v, g, b, scale=scale, cu_seqlens=cu)[0], f"fla {fla.__version__} ({fla.__file__})")
            impls["fla"].bypassed = bypassed
        except Exception as e:
            missing["fla"] = f"fla not loaded (anchors site {args.anchors_site}): {one_line(e)}"
    if "flashqla" in want:
        try:
            t0 = time.perf_counter()
            import importlib.util
            for mod, wheel in (("z3", "z3-solver"), ("tilelang", "tilelang"), ("flash_qla", "flash-qla")):
                if importlib.util.find_spec(mod) is None:  # before importing tilelang's native libraries at all
                    raise ModuleNotFoundError(f"{mod} is not installed ({wheel}, {anchor_part(wheel)} of "
                                              f"bench/glr/anchors/wheels.txt)")
            import flash_qla
            import tilelang

            def limits(s):  # fla 0.6's FlashQLA backend refuses K or V other than 128 (its verifier)
                if s["K"] != 128 or s["V"] != 128:
                    return f"FlashQLA 0.1.3 takes K = V = 128 only (fla 0.6's FlashQLA backend verifier); " \
                           f"K = {s['K']}, V = {s['V']}"
                return None

            impls["flashqla"] = Impl("flashqla", lambda q, k, v, g, b, scale, cu: flash_qla.chunk_gated_delta_rule(
                q, k, v, g, b, scale=scale, cu_seqlens=cu, auto_cp=True)[0],
                f"flash_qla {flash_qla.__version__}, tilelang {tilelang.__version__}", limits)
            log(f"flash_qla imported in {time.perf_counter() - t0:.1f} s")
        except Exception as e:
            missing["flashqla"] = f"flash_qla not loaded (anchors site {args.anchors_site}): {one_line(e)}"
    for k, v in missing.items():
        log(v)
    return impls, missing
