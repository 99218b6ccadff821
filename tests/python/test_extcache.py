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
