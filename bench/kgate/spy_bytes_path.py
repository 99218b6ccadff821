"""Where a host_overhead run's driver<->worker bytes path spends CPU: py-spy samples bucketed by step.

    py-spy record --subprocesses -r 50 -f raw -o OUT/spy.txt -- bash bench/kgate/host_overhead.sh OUT
    python3 bench/kgate/spy_bytes_path.py OUT/spy.txt

Each sample goes to the innermost frame that names a step (wire.send/recv, the shared area's copy, the
worker's Buffers.write/alloc/fill/read, guard patterns and checks, ...); samples of the worker waiting for
its next message are counted apart (py-spy cannot tell that the worker, another uid in its own namespaces,
is idle). "rowjob" is the driver's side, "worker" the candidate's worker. A benchmark helper: it never fails.
"""
import sys, re, collections
# buckets: innermost matching frame wins (checked from leaf up)
B = [("guard_pattern", "guard pattern (alloc)"), ("first_guard_violation", "guard check"),
     ("guard_zone_violation", "guard check"), ("_guard_violation", "guard check"),
     ("Buffers.alloc", "Buffers.alloc other"), ("alloc (kgate/kernelbench/fw_", "Buffers.alloc other"),
     ("write (kgate/kernelbench/fw_", "Buffers.write"), ("fill_bytes (", "Buffers.fill_bytes"),
     ("dense_array (", "Buffers.dense_array (outputs)"), ("fill (kgate/kernelbench/fw_", "Buffers.fill (poison)"),
     ("read (kgate/kernelbench/fw_", "Buffers.read"),
     ("place (kgate/kernelbench/wire", "wire: copy into shared area"),
     ("copy_out (kgate/kernelbench/wire", "wire: copy out of the outputs' area"),
     ("dense_into (", "Buffers.dense_into (outputs into the area)"), ("pass_fd (", "wire: pass fd"),
     ("take (kgate/kernelbench/wire", "wire: map area"), ("views (kgate/kernelbench/wire", "wire: views"),
     ("send (kgate/kernelbench/wire", "wire.send (socket)"), ("recv (kgate/kernelbench/wire", "wire.recv (socket)"),
     ("__call__ (kgate/kernelbench/worker", "Staging"), ("__call__ (kgate/kernelbench/target", "OutputSink"),
     ("one (kgate/kernelbench/worker", "candidate forward"),
     ("write (kgate/kernelbench/target", "CandidateTarget.write other"), ("fill (kgate/kernelbench/target", "CandidateTarget.fill other"),
     ("call (kgate/kernelbench/target", "CandidateTarget.call other"), ("check_guards (kgate/kernelbench/target", "CandidateTarget.check_guards"),
     ("read (kgate/kernelbench/target", "CandidateTarget.read"),
     ("ecall (kgate/kernelbench/worker", "worker ecall other"), ("handle (kgate/kernelbench/worker", "worker handle other"),
    ]
tot = collections.Counter(); agg = collections.Counter()
for line in open(sys.argv[1]):
    stack, _, n = line.rstrip().rpartition(" ")
    n = int(n)
    procs = re.findall(r'process \d+:"([^"]*)"', stack)
    p = procs[-1] if procs else "?"
    kind = "worker" if "kernelbench.worker" in stack else ("rowjob" if "rowjob" in " ".join(procs) else "other")
    tot[kind] += n
    frames = stack.split(";")
    if frames[-1].startswith("Connection._recv (multiprocessing/connection.py:378)") or frames[-1].startswith("Connection._recv (multiprocessing/connection.py:385)"):
        agg[(kind, "idle: waiting for a message")] += n; continue
    b = None
    for f in reversed(frames):
        for pat, name in B:
            if pat in f:
                b = name; break
        if b: break
    agg[(kind, b or "-")] += n
for kind in ("rowjob", "worker", "other"):
    print(f"== {kind}: {tot[kind]} samples")
    for (k, b), n in sorted(agg.items(), key=lambda x: -x[1]):
        if k == kind and b != "-" : print(f"   {n:6d}  {b}")
