"""Helper run as a separate process: holds one primitive until killed.

    _primitive_holder.py URIS TTL semaphore KEY PERMITS
    _primitive_holder.py URIS TTL shared KEY
    _primitive_holder.py URIS TTL many KEY [KEY...]

Acquires it (try once), prints "held TOKEN" (or "busy" and exits 3), then
waits for a line on stdin (the tests SIGKILL it instead: its lease must
come back by its TTL), releases and prints "released".
"""
import sys

import distlock

uris, ttl, kind = sys.argv[1], float(sys.argv[2]), sys.argv[3]
args = sys.argv[4:]
with distlock.Client(uris) as c:
    if kind == "semaphore":
        lk = c.semaphore(args[0], int(args[1]), ttl)
    elif kind == "shared":
        lk = c.lock(args[0], ttl, shared=True)
    else:
        lk = c.lock_many(args, ttl)
    if not lk.acquire(blocking=False):
        print("busy", flush=True)
        sys.exit(3)
    print("held", lk.token, flush=True)
    sys.stdin.readline()
    lk.release()
    print("released", flush=True)
