"""python/kgate/isolation.py drives the same launcher as kgate-worker: the command it builds runs a program
isolated (own PID namespace, capped log, secrets only on a pipe). Run by ctest (label security) with
PYTHONPATH=python and KGATE_ISOLATE pointing at the built kgate-isolate."""
import os
import subprocess
import sys
import tempfile

from kgate import isolation

FIXTURES = os.environ["KGATE_SECURITY_FIXTURES"]
# The isolated program runs as uid 65534, which cannot enter /root (mode 700), where pyenv keeps this
# interpreter on the CI machine: the system's own python3 is reachable.
INTERPRETER = "/usr/bin/python3" if os.access("/usr/bin/python3", os.X_OK) else sys.executable


def check(cond, what):
    if not cond:
        print(f"FAIL: {what}", file=sys.stderr)
        sys.exit(1)


def main():
    check(isolation.launcher() == os.environ["KGATE_ISOLATE"], "launcher() honours KGATE_ISOLATE")
    # A pipe kept open through the launcher carries the secret; argv and the environment never do.
    r, w = os.pipe()
    os.write(w, b"secret-over-the-pipe\n")
    os.close(w)
    prog = f"import os,sys; print(os.read({r}, 100).decode().strip()); print(len([p for p in os.listdir('/proc') if p.isdigit()]))"
    cmd = isolation.command([INTERPRETER, "-c", prog], keep_fds=[r])
    out = subprocess.run(cmd, pass_fds=[r], capture_output=True, text=True, timeout=60)
    check(out.returncode == 0, f"the isolated program ran: {out.returncode} {out.stderr}")
    lines = out.stdout.split()
    check(lines[:1] == ["secret-over-the-pipe"], f"kept descriptor readable: {out.stdout!r}")
    check(lines[1:] == ["2"], f"only init and itself visible in /proc: {out.stdout!r}")

    # Signalling the judge's side is an attack: the program ends with SIGSYS.
    out = subprocess.run(isolation.command([os.path.join(FIXTURES, "sec_signal_outside")]), capture_output=True,
                         timeout=60)
    check(out.returncode == isolation.JUDGE_ATTACK_RETURNCODE, f"SIGSYS for a signal to pid 1: {out.returncode}")

    # The log is capped; stdout can stay the caller's.
    with tempfile.TemporaryDirectory() as d:
        log = os.path.join(d, "output.log")
        out = subprocess.run(isolation.command([os.path.join(FIXTURES, "sec_flood_output"), "4"], log=log,
                                               log_limit=10000, log_stdout=False), capture_output=True, timeout=60)
        check(out.returncode == 0, f"flood ran: {out.returncode}")
        check(len(out.stdout) == 4 << 20, f"stdout stayed the caller's: {len(out.stdout)} bytes")
        check(os.path.getsize(log) < 10000 + 200, f"log capped: {os.path.getsize(log)} bytes")

    for bad in (dict(memory=0), dict(log="x", log_limit=-1), dict(setenv={"A=B": "1"})):
        try:
            isolation.command(["true"], **bad)
        except ValueError:
            continue
        check(False, f"command() accepted {bad}")
    print("ok")


if __name__ == "__main__":
    main()
