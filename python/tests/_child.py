"""Helper run as a separate process by test_processes.py.

    _child.py URI KEY hold   acquire, print "held TOKEN", wait for a line on
                             stdin, release, print "released"
    _child.py URI KEY try    try once; print "acquired" or "busy"
"""
import sys

import distlock

uri, key, mode = sys.argv[1:4]
with distlock.Client(uri) as c:
    lk = c.lock(key, ttl=30, wait=0)
    if mode == "hold":
        if not lk.acquire():
            print("busy", flush=True)
            sys.exit(3)
        print("held", lk.token, flush=True)
        sys.stdin.readline()
        lk.release()
        print("released", flush=True)
    else:
        ok = lk.acquire(blocking=False)
        print("acquired" if ok else "busy", flush=True)
        if ok:
            lk.release()
