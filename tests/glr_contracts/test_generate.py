"""glr/contracts/generate.py: the committed contracts are exactly what its profile table writes (regenerated
into a temporary folder and compared file by file, so no contract drifts or is added by hand), --check
catches each kind of drift, every contract agrees with its profile row (sizes, dtypes, tolerances, entry
points named in its header), and a row can express the sm90 backward (one member, no grouped value heads,
f32 beta, a bound on every gradient) without touching the other files.

With KGATE (the kgate binary) and GLR_LIBS (the folder of libglr_kgate_{fwd,bwd}.so) set, as the ctest
does, kgate itself also reads every contract and runs its nominal calls (the baseline gate) against the
CPU libraries."""
import copy
import importlib.util
import os
import shutil
import subprocess
import sys
import tomllib

import pytest

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
CONTRACTS = os.path.join(ROOT, "glr", "contracts")
GENERATE = os.path.join(CONTRACTS, "generate.py")


def load_generator(path=GENERATE):
    spec = importlib.util.spec_from_file_location("glr_contracts_generate", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


gen = load_generator()


def tomls(root):
    out = {}
    for folder, _, files in os.walk(root):
        for f in files:
            if f.endswith(".toml"):
                path = os.path.join(folder, f)
                with open(path, "rb") as fh:
                    out[os.path.relpath(path, root)] = fh.read()
    return out


def test_regenerated_tree_is_the_committed_one(tmp_path):
    out = tmp_path / "contracts"
    subprocess.run([sys.executable, GENERATE, "--out", str(out)], check=True, capture_output=True)
    fresh, committed = tomls(out), tomls(CONTRACTS)
    assert sorted(fresh) == sorted(committed), "contracts written and committed differ in name"
    differing = [rel for rel in fresh if fresh[rel] != committed[rel]]
    assert not differing, "rerun glr/contracts/generate.py; differs: %s" % differing
    # The four profiles' folders, each written in full.
    assert {os.path.dirname(rel) for rel in fresh} == {"", "cuda", "sm90", "sm90-emu"}
    assert len(fresh) == len(gen.cases()) >= 35


def run_check(folder):
    return subprocess.run([sys.executable, os.path.join(folder, "generate.py"), "--check"],
                          capture_output=True, text=True)


def test_check_names_every_kind_of_drift(tmp_path):
    copy_ = tmp_path / "contracts"
    shutil.copytree(CONTRACTS, copy_, ignore=shutil.ignore_patterns("__pycache__"))
    assert run_check(copy_).returncode == 0
    with open(copy_ / "retnet_fwd.toml", "a") as f:
        f.write("# a hand edit\n")
    (copy_ / "cuda" / "mamba2_bwd.toml").unlink()
    shutil.copy(copy_ / "sm90" / "gated_deltanet_fwd.toml", copy_ / "sm90" / "hand_written_fwd.toml")
    r = run_check(copy_)
    assert r.returncode == 1
    lines = r.stderr.splitlines()
    assert "  retnet_fwd.toml: differs from what generate.py writes" in lines
    assert "  cuda/mamba2_bwd.toml: missing (generate.py writes it)" in lines
    assert "  sm90/hand_written_fwd.toml: no profile writes it (add its row to PROFILES, or delete it)" in lines


def parsed(profiles=None):
    texts = gen.contracts(profiles)
    return {rel: (tomllib.loads(texts[rel]), p, m, bwd, varlen) for rel, p, m, bwd, varlen in gen.cases(profiles)}


def tensors(doc):
    return {t["name"]: t for t in doc.get("inputs", []) + doc.get("outputs", [])}


def test_every_contract_follows_its_profile_row():
    for rel, (doc, p, member, bwd, varlen) in parsed().items():
        where = rel
        assert doc["attrs"]["chunk"] == p["chunk"] and doc["attrs"]["scale"] == p["scale"], where
        for d in ("K", "V"):
            assert (doc["dims"][d]["min"], doc["dims"][d]["max"]) == (p[d]["min"], p[d]["max"]), where
        assert doc["dims"]["T"]["max"] == p["T"]["max"], where
        t = tensors(doc)
        assert t["q"]["dtype"] == p["token_dtype"][varlen], where
        for name in ("h0", "ht", "dht", "dh0"):
            if name in t:
                assert t[name]["dtype"] == "f32", where
        for name in ("g", "dg"):
            if name in t:
                assert t[name]["dtype"] == p.get("g_dtype", "f32"), where
        for name in ("beta", "dbeta"):
            if name in t:
                assert t[name]["dtype"] == p.get("beta_dtype", p["token_dtype"][varlen]), where
        for name, spec in t.items():
            if name in p["tolerance"]:
                assert "tolerance" in spec, (where, name)
            else:
                assert "tolerance" not in spec, (where, name)
        assert ("HV" in doc["dims"]) == p.get("gva", True), where
        assert doc["op"]["name"].startswith(p["op"] + "."), where
        assert doc["limits"]["timeout"] == p["timeout"], where


def test_tolerances_are_those_of_their_precision():
    # The sm90 line: kgate's default form with the bf16 operands' u = 2^-8 and 4 roundings per term.
    assert gen.operand_tolerance("bf16", 4, "x") == "tolerance = { rtol = 0.015625, atol_rms = 0.0625 }  # x\n"
    assert gen.operand_tolerance("f32", 1, "x") == "tolerance = { rtol = %r, atol_rms = %r }  # x\n" % (
        4 * 2.0 ** -24, 8 * 2.0 ** -24)
    sm90 = parsed()["sm90/gated_deltanet_fwd.toml"][0]
    for name in ("o", "ht"):
        assert tensors(sm90)[name]["tolerance"] == {"rtol": 2.0 ** -6, "atol_rms": 2.0 ** -4}
    cuda = parsed()["cuda/gated_deltanet_bwd.toml"][0]
    assert tensors(cuda)["dh0"]["tolerance"] == {"scale": 4}
    assert "tolerance" not in tensors(cuda)["dq"]


def test_operands_follow_the_profile_row():
    # The accumulation gate's operand roundings: only where a profile counts them (sm90), per member's delta rule.
    for rel, (doc, p, member, bwd, varlen) in parsed().items():
        delta = gen.MEMBERS[member][1]
        for name, spec in tensors(doc).items():
            want = p.get("operands", {}).get(name, (None, None))[delta]
            if want:
                assert spec["operands"] == {"precision": "bf16", "roundings": want[0]}, (rel, name)
            else:
                assert "operands" not in spec, (rel, name)
    assert tensors(parsed()["sm90/mamba2_bwd.toml"][0])["dh0"]["operands"] == {"precision": "bf16", "roundings": 1}
    assert "operands" not in tensors(parsed()["cuda/mamba2_bwd.toml"][0])["dh0"]


def header(text):
    return text[:text.index("\n[op]\n")]


def test_every_header_names_its_kernel_entry():
    texts = gen.contracts()
    for rel, roles in gen.entries().items():
        lib, symbol = roles["kernel"].split(":")
        head = header(texts[rel])
        assert lib in head, (rel, lib)
        assert symbol in head.replace("kgate_oracle", ""), (rel, symbol)
        if "emulation" in roles:
            assert roles["emulation"].split(":")[0] in head, rel
    sym = {rel.split("/")[0] if "/" in rel else "cpu": r["kernel"].split(":")[1] for rel, r in gen.entries().items()}
    assert sym == {"cpu": "kgate_run", "cuda": "kgate_run_blocks", "sm90": "kgate_run", "sm90-emu": "kgate_run"}


def test_entries_print_one_line_per_contract():
    r = subprocess.run([sys.executable, GENERATE, "--entries"], check=True, capture_output=True, text=True)
    lines = r.stdout.splitlines()
    assert len(lines) == len(gen.cases())
    assert "sm90/retnet_fwd.toml kernel=glr_cuda_kgate_fwd.so:kgate_run oracle=libglr_kgate_fwd.so:kgate_oracle" in lines


def sm90_backward_row():
    """A row of the kind hJ's sm90 backward needs (glr/contracts/README.md)."""
    return dict(
        members=("gated_deltanet",),
        varlen_members=(),
        algorithm="sm90 tensor-core backward (C = 64)",
        fixed_note="Fixed batch [B, T], bf16 token tensors, f32 gate, beta and states.",
        gva=False,
        beta_dtype="f32",
        tolerance={n: gen.operand_tolerance("bf16", 4, "bf16 operands") for n in ("dq", "dk", "dv", "dg", "dbeta", "dh0")},
    )


def test_a_row_expresses_the_sm90_backward():
    base = copy.deepcopy(gen.PROFILES)
    base["sm90"]["passes"].pop("bwd", None)  # whether or not the table has the real row yet
    profiles = copy.deepcopy(base)
    profiles["sm90"]["passes"]["bwd"] = sm90_backward_row()
    before, after = gen.contracts(base), gen.contracts(profiles)
    assert sorted(set(after) - set(before)) == ["sm90/gated_deltanet_bwd.toml"]
    assert all(after[rel] == before[rel] for rel in before), "a new row changed another file"
    doc = tomllib.loads(after["sm90/gated_deltanet_bwd.toml"])
    t = tensors(doc)
    assert "HV" not in doc["dims"] and (doc["dims"]["K"]["min"], doc["dims"]["V"]["max"]) == (128, 128)
    assert t["v"]["shape"] == ["B", "T", "H", "V"] and t["h0"]["shape"] == ["B", "H", "K", "V"]
    assert t["beta"]["dtype"] == t["dbeta"]["dtype"] == "f32" and t["dq"]["dtype"] == "bf16"
    for name in ("dq", "dk", "dv", "dg", "dbeta", "dh0"):
        assert t[name]["tolerance"] == {"rtol": 2.0 ** -6, "atol_rms": 2.0 ** -4}, name
    assert "HV" not in doc["accumulation"]["sizes"]
    assert "sm90 tensor-core backward" in doc["op"]["description"]
    assert "grouped value heads" not in doc["op"]["description"]


def test_the_sm90_backward_contracts_cover_its_paths():
    # The tensor-core backward takes g and beta each f32 or bf16 (dg, dbeta in their dtype) and grouped value heads:
    # some sm90 backward contract runs each dtype of each scalar, every one with HV a multiple of H, Gated DeltaNet's
    # main file with what flash-linear-attention passes (bf16 beta, f32 g), at K = V = 128; dense batches, and since
    # 2026-12-04 packed sequences (Gated DeltaNet, the main file's dtypes: cu_seqlens, B = 1, states per sequence).
    docs = {rel: doc for rel, (doc, _, _, bwd, _) in parsed().items() if bwd and rel.startswith("sm90/")}
    # K = V = 64 since 2026-12-04: the k64 variant (both members dense, Gated DeltaNet packed), K = V = 128 elsewhere.
    # Since 2026-12-04 also the members without the delta rule (Mamba2, RetNet dense and packed, linear attention).
    assert sorted(docs) == ["sm90/deltanet_bwd.toml", "sm90/deltanet_k64_bwd.toml",
                            "sm90/gated_deltanet_bf16g_f32beta_bwd.toml", "sm90/gated_deltanet_bwd.toml",
                            "sm90/gated_deltanet_k64_bwd.toml", "sm90/gated_deltanet_varlen_bwd.toml",
                            "sm90/gated_deltanet_varlen_k64_bwd.toml",
                            "sm90/linear_attention_bwd.toml", "sm90/linear_attention_k64_bwd.toml",
                            "sm90/mamba2_bwd.toml", "sm90/mamba2_k64_bwd.toml",
                            "sm90/retnet_bwd.toml", "sm90/retnet_k64_bwd.toml",
                            "sm90/retnet_varlen_bwd.toml", "sm90/retnet_varlen_k64_bwd.toml"]
    seen = set()
    for rel, doc in docs.items():
        t = tensors(doc)
        varlen = "_varlen_" in rel
        member = rel[len("sm90/"):].split("_varlen")[0].split("_k64")[0].split("_bf16g")[0].replace("_bwd.toml", "")
        delta = member in ("gated_deltanet", "deltanet")
        k64 = "_k64_" in rel
        b, n = (1, "N") if varlen else ("B", "B")
        assert doc["dims"]["HV"]["multiple_of"] == "H" and doc["dims"]["HV"]["nominal"] > doc["dims"]["H"]["nominal"], rel
        assert t["v"]["shape"] == [b, "T", "HV", "V"] and t["q"]["shape"] == [b, "T", "H", "K"], rel
        assert t["dq"]["shape"] == [b, "T", "H", "K"], rel
        assert ("beta" in t) == delta and ("dbeta" in t) == delta, rel
        if delta:
            assert t["beta"]["shape"] == [b, "T", "HV"], rel
        assert t["h0"]["shape"] == [n, "HV", "K", "V"] and t["dh0"]["shape"] == [n, "HV", "K", "V"], rel
        dim = 64 if k64 else 128
        assert (doc["dims"]["K"]["min"], doc["dims"]["K"]["max"], doc["dims"]["V"]["min"], doc["dims"]["V"]["max"]) == (dim,) * 4
        assert doc["accumulation"]["sizes"]["K"] == dim and doc["accumulation"]["sizes"]["V"] == dim, rel
        assert doc["op"]["name"].endswith(".k64") == k64, rel
        if varlen:
            assert t["cu_seqlens"]["domain"] == {"kind": "offsets", "total": "T"} and doc["attrs"]["varlen"] == 1, rel
            assert doc["op"]["name"] == "glr.sm90.%s.bwd.varlen" % member + (".k64" if k64 else "")
            assert doc["nonfinite"]["segments"] == "cu_seqlens"
            if delta:
                assert (t["beta"]["dtype"], t["g"]["dtype"]) == ("bf16", "f32"), rel  # the main file's: fla's
            assert t["dq"]["tolerance"] == tensors(docs["sm90/gated_deltanet_bwd.toml"])["dq"]["tolerance"], rel
        else:
            assert "cu_seqlens" not in t and doc["attrs"].get("varlen", 0) == 0, rel
        for name in ("g", "beta"):
            if name in t:
                assert t[name]["dtype"] == t["d" + name]["dtype"], rel
                seen.add((name, t[name]["dtype"]))
                # a bf16 gradient is the f32 one rounded once more: rtol 2^-6 + 2^-8, the f32 outputs' 2^-6 otherwise
                rtol = 2.0 ** -6 + (2.0 ** -8 if t[name]["dtype"] == "bf16" else 0)
                assert t["d" + name]["tolerance"] == {"rtol": rtol, "atol_rms": 2.0 ** -4}, (rel, name)
    assert seen == {("g", "f32"), ("g", "bf16"), ("beta", "f32"), ("beta", "bf16")}
    fla = tensors(docs["sm90/gated_deltanet_bwd.toml"])
    assert (fla["beta"]["dtype"], fla["g"]["dtype"]) == ("bf16", "f32")
    for member in ("gated_deltanet", "deltanet", "gated_deltanet_varlen", "mamba2", "retnet", "retnet_varlen",
                   "linear_attention"):  # k64: the main file's tensors and tolerances
        main, k64 = tensors(docs["sm90/%s_bwd.toml" % member]), tensors(docs["sm90/%s_k64_bwd.toml" % member])
        assert main == k64, member
    variant = docs["sm90/gated_deltanet_bf16g_f32beta_bwd.toml"]
    assert variant["op"]["name"] == "glr.sm90.gated_deltanet.bwd.bf16g_f32beta"
    assert "../gated_deltanet_bwd.toml" in header(gen.contracts()["sm90/gated_deltanet_bf16g_f32beta_bwd.toml"])


def test_a_variant_writes_a_file_of_its_own():
    # A pass's `variants` entry adds files of that pass ({member}_{tag}_{short}.toml) and changes no other.
    base = copy.deepcopy(gen.PROFILES)
    base["sm90"]["passes"]["bwd"] = sm90_backward_row()
    profiles = copy.deepcopy(base)
    profiles["sm90"]["passes"]["bwd"]["variants"] = {"bf16g": dict(g_dtype="bf16", beta_dtype="bf16")}
    before, after = gen.contracts(base), gen.contracts(profiles)
    assert sorted(set(after) - set(before)) == ["sm90/gated_deltanet_bf16g_bwd.toml"]
    assert all(after[rel] == before[rel] for rel in before), "a variant changed another file"
    text = after["sm90/gated_deltanet_bf16g_bwd.toml"]
    doc, t = tomllib.loads(text), tensors(tomllib.loads(text))
    assert doc["op"]["name"] == "glr.sm90.gated_deltanet.bwd.bf16g"
    assert (t["g"]["dtype"], t["dg"]["dtype"], t["beta"]["dtype"], t["dbeta"]["dtype"]) == ("bf16",) * 4
    assert t["q"]["dtype"] == "bf16" and t["h0"]["dtype"] == "f32"
    assert "spread rules of ../gated_deltanet_bwd.toml" in header(text)
    assert gen.entries(profiles)["sm90/gated_deltanet_bf16g_bwd.toml"]["kernel"] == "glr_cuda_kgate_bwd.so:kgate_run"


def test_a_row_naming_an_unknown_member_is_refused():
    profiles = copy.deepcopy(gen.PROFILES)
    profiles["sm90"]["passes"]["bwd"] = dict(members=("gated_deltanet", "mamba3"))
    with pytest.raises(ValueError, match="mamba3"):
        gen.contracts(profiles)


KGATE, LIBS = os.environ.get("KGATE"), os.environ.get("GLR_LIBS")


@pytest.mark.skipif(not (KGATE and LIBS), reason="KGATE and GLR_LIBS not set (the ctest sets them)")
def test_kgate_reads_every_contract_and_runs_its_nominal_calls(tmp_path):
    profiles = copy.deepcopy(gen.PROFILES)
    # The row above too, where the table has no sm90 backward yet: kgate takes what such a row writes.
    profiles["sm90"]["passes"].setdefault("bwd", sm90_backward_row())
    gen.write_tree(str(tmp_path), profiles)
    failed = []
    for rel, _, _, bwd, _ in gen.cases(profiles):
        lib = os.path.join(LIBS, "libglr_kgate_%s.so" % ("bwd" if bwd else "fwd"))
        r = subprocess.run([KGATE, "verify", "--contract", str(tmp_path / rel), "--kernel", lib, "--gates", "baseline",
                            "--seed", "1"], capture_output=True, text=True, timeout=300)
        verdicts = [line.split()[1] for line in r.stdout.splitlines() if line.startswith("baseline ")]
        if r.returncode != 0 or verdicts != ["PASS"]:
            failed.append("%s: exit %d %s" % (rel, r.returncode, (r.stdout + r.stderr).strip().splitlines()[-1:]))
    assert not failed, "\n".join(failed)
