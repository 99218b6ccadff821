"""The compiled-extension cache as the driver keeps it (kernelbench/extstage.py): the audit user's alone,
one part per candidate source, staged into the worker's scratch and harvested back without following what a
hostile worker plants there."""
import os
import stat

from kgate.kernelbench import extstage
from kgate.kernelbench.client import Candidate

KEY = "0123456789abcdef01234567"

# A candidate that, as extcache.py does in a torch worker, stores a built extension in the staged cache (its
# cwd is its scratch), and plants what a hostile one would: a link to a file of the driver's user, a key
# folder that is a link, and a name of another shape.
PLANTS = f'''import os
os.makedirs("ext-cache/{KEY}", exist_ok=True)
open("ext-cache/{KEY}/kernel_ext.so", "wb").write(b"built by this candidate")
os.symlink("/etc/hostname", "ext-cache/{KEY}/stolen.so")
os.symlink("/etc", "ext-cache/{"f" * 24}")
open("ext-cache/{KEY}/notes.txt", "w").write("x")


class ModelNew:
    def __call__(self, x):
        return x
'''


def _mode(path):
    return stat.S_IMODE(os.stat(path).st_mode)


def test_the_cache_is_private_and_split_by_candidate_source(tmp_path):
    cache = tmp_path / "ext-cache"
    cache.mkdir(mode=0o777)
    os.chmod(cache, 0o777)  # as the old driver left it
    cand = Candidate("numpy", PLANTS, ext_cache=str(cache), work_root=str(tmp_path))
    try:
        assert cand.start()["status"] == "ok"
    finally:
        cand.close()
    assert _mode(cache) == 0o700
    part = extstage.part_of(str(cache), PLANTS)
    assert os.path.dirname(part) == str(cache) and _mode(part) == 0o700
    kept = os.path.join(part, KEY, "kernel_ext.so")
    assert open(kept, "rb").read() == b"built by this candidate" and _mode(kept) == 0o600
    # only regular files of the cache's own shape come back; links are never followed
    assert sorted(os.listdir(part)) == [KEY] and os.listdir(os.path.join(part, KEY)) == ["kernel_ext.so"]

    # The same source finds its entry staged in its next worker's scratch; another source does not.
    again = Candidate("numpy", PLANTS.replace("/etc/hostname", "/etc/hosts"), ext_cache=str(cache),
                      work_root=str(tmp_path))
    same = Candidate("numpy", PLANTS, ext_cache=str(cache), work_root=str(tmp_path))
    try:
        for c in (again, same):
            c._spawn()
        assert not os.path.exists(os.path.join(again.ext_stage, KEY))
        assert open(os.path.join(same.ext_stage, KEY, "kernel_ext.so"), "rb").read() == b"built by this candidate"
    finally:
        again.close()
        same.close()


def _fake_torch(monkeypatch, builds: list):
    """A stand-in for torch.utils.cpp_extension.load_inline (no torch, no compiler here): it counts its builds
    and fails as the test's source asks: with a compiler error, killed, or with another exception."""
    import sys
    import types

    def load_inline(name, cpp_sources, cuda_sources=None, functions=None, extra_cflags=None,
                    extra_cuda_cflags=None, extra_ldflags=None, extra_include_paths=None, build_directory=None,
                    verbose=False, with_cuda=None, is_python_module=True, with_pytorch_error_handling=True,
                    keep_intermediates=True, use_pch=False):
        builds.append(name)
        if "compile error" in cuda_sources:
            raise RuntimeError(f"Error building extension '{name}': main.cpp:5:37: error: 'forward' was not "
                               "declared in this scope")
        if "killed" in cuda_sources:
            raise RuntimeError(f"Error building extension '{name}': nvcc error : 'cicc' died due to signal 9 (Kill "
                               "signal)\nKilled")
        raise ValueError("not a build failure")

    torch = types.ModuleType("torch")
    torch.__version__ = "0.test"
    utils = types.ModuleType("torch.utils")
    ce = types.ModuleType("torch.utils.cpp_extension")
    ce.load_inline = load_inline
    torch.utils, utils.cpp_extension = utils, ce
    for name, mod in (("torch", torch), ("torch.utils", utils), ("torch.utils.cpp_extension", ce)):
        monkeypatch.setitem(sys.modules, name, mod)
    return ce


def test_a_failed_build_is_remembered_and_raised_again_without_compiling(tmp_path, monkeypatch):
    import pytest

    from kgate.kernelbench import extcache
    builds: list = []
    ce = _fake_torch(monkeypatch, builds)
    monkeypatch.setattr(extcache, "stats", {"builds": 0, "hits": 0, "failed_hits": 0, "compile_seconds": 0.0,
                                           "failed": []})
    cache = tmp_path / "stage"
    extcache.install(str(cache))

    # A compiler error: raised as torch raised it, remembered, and raised again from the cache, not rebuilt.
    for attempt in range(3):
        with pytest.raises(RuntimeError, match="'forward' was not declared") as e:
            ce.load_inline(name="ext_a", cpp_sources="", cuda_sources="// compile error", functions=["forward"])
        assert str(e.value).startswith("Error building extension 'ext_a'")
    assert builds == ["ext_a"] and extcache.stats["failed_hits"] == 2 and extcache.stats["failed"] == ["ext_a"]
    remembered = list(cache.glob("*/ext_a.failed"))
    assert len(remembered) == 1 and "not declared" in remembered[0].read_text()
    # Another source (another key) is built, not answered by that failure.
    with pytest.raises(RuntimeError):
        ce.load_inline(name="ext_a", cpp_sources="", cuda_sources="// compile error, other text", functions=["f"])
    assert builds == ["ext_a", "ext_a"]

    # A killed build and an exception that is not torch's build failure are never remembered: built each time.
    builds.clear()
    for _ in range(2):
        with pytest.raises(RuntimeError, match="Killed"):
            ce.load_inline(name="ext_b", cpp_sources="", cuda_sources="// killed")
        with pytest.raises(ValueError):
            ce.load_inline(name="ext_c", cpp_sources="", cuda_sources="// other")
    assert builds == ["ext_b", "ext_c", "ext_b", "ext_c"]
    assert not list(cache.glob("*/ext_b.failed")) and not list(cache.glob("*/ext_c.failed"))


def test_remembered_failures_are_harvested_and_staged_like_extensions(tmp_path):
    stage, part, scratch = tmp_path / "stage", tmp_path / "part", tmp_path / "scratch"
    (stage / KEY).mkdir(parents=True)
    part.mkdir()
    scratch.mkdir()
    (stage / KEY / "ext_a.failed").write_text("Error building extension 'ext_a': error")
    (stage / KEY / "huge.failed").write_bytes(b"x" * (extstage.MAX_FAILED + 1))  # over the limit: left out
    (stage / KEY / "ext_a.log").write_text("not of the cache's shape")
    assert extstage.harvest(str(stage), str(part)) == 1
    assert os.listdir(part / KEY) == ["ext_a.failed"]
    staged = extstage.stage_in(str(part), str(scratch))
    assert open(os.path.join(staged, KEY, "ext_a.failed")).read() == "Error building extension 'ext_a': error"
