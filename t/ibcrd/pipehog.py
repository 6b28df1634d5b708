#!/usr/bin/python3
"""pipehog.py SECONDS: hold pipe buffers until this user is over
fs.pipe-user-pages-soft (the kernel then gives this user's new pipes the
fewest pages and refuses to grow them), for SECONDS, then let go.

Prints "over N" (N pipes held, a new pipe is smaller than the default) or "nolimit"
(the soft limit is 0), then "released"."""
import fcntl
import os
import sys
import time

F_SETPIPE_SZ, F_GETPIPE_SZ = 1031, 1032
hold = float(sys.argv[1])
soft = int(open("/proc/sys/fs/pipe-user-pages-soft").read())
biggest = int(open("/proc/sys/fs/pipe-max-size").read())
pipes = []
if soft == 0:
    print("nolimit", flush=True)
else:
    grow = min(biggest, 1 << 20)
    while True:
        r, w = os.pipe()
        pipes.append((r, w))
        if fcntl.fcntl(w, F_GETPIPE_SZ) < 65536:
            break  # over the soft limit: a new pipe gets the minimum
        if grow:
            try:
                fcntl.fcntl(w, F_SETPIPE_SZ, grow)
            except PermissionError:
                grow = 0  # near the limit: default pipes from here on
        if len(pipes) > 4000:
            sys.exit("pipehog: 4000 pipes and still not over the soft limit")
    print("over %d" % len(pipes), flush=True)
time.sleep(hold)
for r, w in pipes:
    os.close(r)
    os.close(w)
print("released", flush=True)
