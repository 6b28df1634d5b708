#!/usr/bin/python3
"""sockets.py - the sockets a CRIU image holds, one line each.

  sockets.py TASKDIR...

For each task folder of a generation (gen-N/task-R), prints every socket
of its files.img as

  TASKDIR FAMILY TYPE STATE [ADDRESS]

FAMILY is unix, inet or inet6; TYPE stream, dgram or seqpacket; STATE
listen, connected or other (CRIU's number then follows in brackets);
ADDRESS is an inet socket's local address:port or a unix socket's name.
Exits 1 if a folder has no files.img (a wrong path would otherwise look
like an image without sockets).  Needs CRIU's pycriu (contrib/deps.sh).
"""
import ipaddress
import os
import sys

import pycriu.images as images

FAMILIES = {1: "unix", 2: "inet", 10: "inet6"}
TYPES = {1: "stream", 2: "dgram", 5: "seqpacket"}


def state_name(sk_type, state):
    # CRIU keeps the kernel's TCP_* numbers, for unix sockets too; a
    # datagram socket is never listening, whatever its number.
    if sk_type != 2 and state == 10:
        return "listen"
    if state == 1:
        return "connected"
    return "other[%d]" % state


def inet_addr(family, words):
    # CRIU stores an address as 32-bit words in network order.
    raw = b"".join(w.to_bytes(4, "little") for w in words)
    if family == 2:
        return str(ipaddress.IPv4Address(raw[:4] if raw else bytes(4)))
    return "[%s]" % ipaddress.IPv6Address(raw.ljust(16, b"\0"))


def main(argv):
    if len(argv) < 2:
        sys.stderr.write("usage: sockets.py TASKDIR...\n")
        return 2
    for task in argv[1:]:
        path = os.path.join(task, "files.img")
        if not os.path.exists(path):
            sys.stderr.write("sockets.py: %s: no files.img\n" % task)
            return 1
        with open(path, "rb") as f:
            img = images.load(f)
        for e in img["entries"]:
            if "isk" in e:
                s = e["isk"]
                where = "%s:%d" % (inet_addr(s["family"], s.get("src_addr", [])),
                                   s.get("src_port", 0))
            elif "usk" in e:
                s = e["usk"]
                where = s.get("name", "")
                s = dict(s, family=1)
            else:
                continue
            print(" ".join(x for x in (task, FAMILIES.get(s["family"], str(s["family"])),
                                       TYPES.get(s["type"], str(s["type"])),
                                       state_name(s["type"], s["state"]), where) if x))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
