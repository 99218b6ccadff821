"""python/kgate/isolation.py drives the same launcher as kgate-worker: the command it builds runs a program
isolated (own PID namespace, capped log, secrets only on a pipe). Run by ctest (label security) with
PYTHONPATH=python and KGATE_ISOLATE pointing at the built kgate-isolate."""
import os
import subprocess
import sys
import tempfile

from kgate import isolation

FIXTURES = os.environ["KGATE_SECURITY_FIXTURES"]
# This interpreter, wherever it lives: pyenv's under /root (mode 700) on the CI machine, which the
# isolated program's uid 65534 reaches only through the covering mounts interpreter_paths() asks for.
INTERPRETERS = [sys.executable] + [p for p in ("/usr/bin/python3",) if os.access(p, os.X_OK)]


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
    cmd = isolation.command([sys.executable, "-c", prog], keep_fds=[r], reach=isolation.interpreter_paths())
    out = subprocess.run(cmd, pass_fds=[r], capture_output=True, text=True, timeout=60)
    check(out.returncode == 0, f"the isolated program ran: {out.returncode} {out.stderr}")
    lines = out.stdout.split()
    check(lines[:1] == ["secret-over-the-pipe"], f"kept descriptor readable: {out.stdout!r}")
    check(lines[1:] == ["2"], f"only init and itself visible in /proc: {out.stdout!r}")

    # Started as root, the interpreter runs as uid 65534 wherever it lives (never as root, which owns root's
    # files), and sees nothing of a closed directory it lives under but the way to itself.
    prog = ("import os, sys\nprint(os.getuid(), os.geteuid())\n"
            "try:\n    os.listdir('/root')\n    print('listed /root')\nexcept OSError:\n    print('no /root')\n")
    for interpreter in INTERPRETERS:
        out = subprocess.run(isolation.command([interpreter, "-c", prog], reach=isolation.interpreter_paths()),
                             capture_output=True, text=True, timeout=60)
        check(out.returncode == 0, f"{interpreter} ran isolated: {out.returncode} {out.stderr}")
        if os.geteuid() == 0:
            check(out.stdout.split() == ["65534", "65534", "no", "/root"], f"{interpreter}: {out.stdout!r}")
            check(isolation.drops_uid(), "drops_uid() as root")
    # Asking for uid 0 is refused, not obeyed.
    out = subprocess.run([isolation.launcher(), "--uid", "0", "--", "/bin/true"], capture_output=True, text=True,
                         timeout=60)
    check(os.geteuid() != 0 or (out.returncode == isolation.ISOLATION_FAILED and "refused" in out.stderr),
          f"--uid 0: {out.returncode} {out.stderr}")

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
