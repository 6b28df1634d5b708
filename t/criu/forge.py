#!/usr/bin/python3
"""forge.py - alter a committed generation the way a hostile job could.

  forge.py GEN TASK creds          every process of the image: uids and gids 0
  forge.py GEN TASK caps           every process: CAP_CHECKPOINT_RESTORE in
                                   its permitted, effective, inheritable sets
  forge.py GEN TASK file SUFFIX PATH
                                   the open file whose path ends in SUFFIX
                                   becomes PATH (with PATH's size)
  forge.py GEN TASK record SUFFIX PATH SIZE
                                   the open file whose path ends in SUFFIX
                                   becomes PATH, SIZE bytes long at the
                                   dump (CRIU's record, when it has one,
                                   and ibcr-files.json's): what the
                                   rollback before a restore cuts it to

GEN is a generation folder, TASK its task folder's name (task-0).  The
manifest's sizes and XXH3 checksums are recomputed, as the job's user can:
what is tested is what root does with an image whose content the user
controlled (CRIU's parasite runs inside the user's process at the dump),
not the checksums.  Needs Debian's python3 with python3-protobuf and
python3-xxhash, and CRIU's pycriu (contrib/deps.sh installs it).
"""
import glob
import json
import os
import sys

import pycriu.images as images
import xxhash

CAP_CHECKPOINT_RESTORE = 40


def load(path):
    with open(path, "rb") as f:
        return images.load(f)


def store(path, img):
    # In place: the file keeps its owner and mode.
    with open(path, "r+b") as f:
        images.dump(img, f)
        f.truncate()


def forge_creds(task):
    changed = []
    for core in glob.glob(os.path.join(task, "core-*.img")):
        img = load(core)
        creds = img["entries"][0]["thread_core"]["creds"]
        for k in ("uid", "gid", "euid", "egid", "suid", "sgid", "fsuid", "fsgid"):
            creds[k] = 0
        store(core, img)
        changed.append(core)
    return changed


def forge_caps(task):
    changed = []
    word, bit = divmod(CAP_CHECKPOINT_RESTORE, 32)
    for core in glob.glob(os.path.join(task, "core-*.img")):
        img = load(core)
        creds = img["entries"][0]["thread_core"]["creds"]
        for k in ("cap_prm", "cap_eff", "cap_inh"):
            while len(creds[k]) <= word:
                creds[k].append(0)
            creds[k][word] |= 1 << bit
        store(core, img)
        changed.append(core)
    return changed


def retarget(task, suffix, path, size, always):
    """The task's open files ending in suffix become path, of size (set
    only where the image has one, unless always)."""
    fimg = os.path.join(task, "files.img")
    img = load(fimg)
    hit = False
    for e in img["entries"]:
        reg = e.get("reg")
        if reg and reg.get("name", "").endswith(suffix):
            reg["name"] = path
            if always or "size" in reg:
                reg["size"] = size
            hit = True
    if not hit:
        sys.exit("forge.py: no open file ending in %s in %s" % (suffix, fimg))
    store(fimg, img)
    return fimg


def forge_file(task, suffix, path):
    return [retarget(task, suffix, path, os.stat(path).st_size, True)]


def forge_record(task, suffix, path, size):
    fimg = retarget(task, suffix, path, size, False)
    rec = os.path.join(task, "ibcr-files.json")
    with open(rec) as f:
        r = json.load(f)
    hit = False
    for fe in r["files"]:
        if fe["path"].endswith(suffix):
            fe["path"] = path
            fe["size"] = size
            hit = True
    if not hit:
        sys.exit("forge.py: no file ending in %s in %s" % (suffix, rec))
    with open(rec, "r+") as f:
        json.dump(r, f)
        f.truncate()
    return [fimg, rec]


def fix_manifest(gen, changed):
    mpath = os.path.join(gen, "manifest.json")
    with open(mpath) as f:
        m = json.load(f)
    for fe in m["files"]:
        full = os.path.join(gen, fe["path"])
        if full in changed:
            with open(full, "rb") as f:
                data = f.read()
            fe["size"] = len(data)
            fe["xxh3"] = "%016x" % xxhash.xxh3_64_intdigest(data)
    with open(mpath, "r+") as f:
        json.dump(m, f)
        f.truncate()


def main():
    if len(sys.argv) < 4:
        sys.exit(__doc__)
    gen, task, what = sys.argv[1], os.path.join(sys.argv[1], sys.argv[2]), sys.argv[3]
    if what == "creds":
        changed = forge_creds(task)
    elif what == "caps":
        changed = forge_caps(task)
    elif what == "file" and len(sys.argv) == 6:
        changed = forge_file(task, sys.argv[4], sys.argv[5])
    elif what == "record" and len(sys.argv) == 7:
        changed = forge_record(task, sys.argv[4], sys.argv[5], int(sys.argv[6]))
    else:
        sys.exit(__doc__)
    fix_manifest(gen, changed)


if __name__ == "__main__":
    main()
