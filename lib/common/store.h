/* store.h - the storage layout of committed checkpoints, and the only
 * code that writes it:
 *
 *   <root>/<cluster>/                         root 0755
 *   <root>/<cluster>/<job>/                   root, group = job's gid, 0750
 *   <root>/<cluster>/<job>/.last-gen          root 0600 (numbers never reused)
 *   <root>/<cluster>/<job>/gen-<N>/           root 0700 while written; at
 *                                             commit group = job's gid, 0750
 *   <root>/<cluster>/<job>/gen-<N>/task-<R>/  one image folder per task, 0750
 *   <root>/<cluster>/<job>/gen-<N>/manifest.json  written last, by rename, 0640
 *   (image files 0640, root, group = job's gid)
 *
 * Who is trusted with what (DESIGN.md, "Security").  Generations stay
 * root's for good and are read by their user through the job's group:
 *   - Root never writes into a folder the user can write.  A generation
 *     is root's and closed (0700) from store_gen_begin to its last write
 *     in store_gen_commit; only then is it opened to the group, read-only.
 *     So nothing in it can be swapped while root writes, and nothing root
 *     later reads as trusted (manifest, checksums, .last-gen) can have
 *     been changed by the user: root believes a generation folder, its
 *     manifest and .last-gen only when they are root's and writable by
 *     nobody else.  A folder of the old layout (the job's user's) is taken
 *     back through its fd by the next begin; its old generations are not
 *     trusted and list as partial.
 *   - Every operation works from directory fds (safedir.h): openat with
 *     O_NOFOLLOW|O_DIRECTORY, fchown/fchmod on opened fds, unlinkat,
 *     renameat; never a path walk below <root>/<cluster>, never a link
 *     followed.  <root> and <root>/<cluster> must be trusted folders
 *     (ibcrd checks them at start-up; store_gen_begin makes them).
 *   - The user reads their images (to restart one under a debugger
 *     elsewhere, or to restore as themselves: restores run as the user,
 *     so images need not be root-only), lists and verifies them.  They
 *     cannot change or remove them by hand: ibcrd's retention and `ibcr
 *     prune` run as root remove them.  The group is the job's gid: a site
 *     whose users share one primary group should give each user a group
 *     of their own, or members of that group read each other's images.
 *   - Rejected: handing generations to the user after commit.  The user
 *     could then rewrite manifests and images that root lists and prunes
 *     by, and the job folder (where root creates generations) would have
 *     to be theirs too, so root would write into a user's folder.
 *
 * A generation without a valid manifest of root's is partial: never listed
 * as committed, never restored, removed by prune once a newer one
 * committed.  Job names pass ident_ok() before they touch a path.
 */
#ifndef IBCR_COMMON_STORE_H
#define IBCR_COMMON_STORE_H

#include <stddef.h>
#include <sys/types.h>
#include <json-c/json.h>

struct store {
    const char *root;    /* absolute */
    const char *cluster; /* "local" without Slurm */
};

/* <root>/<cluster>/<job> into buf.  -1 with errno EINVAL for a bad job
 * name, ENAMETOOLONG. */
int store_job_path (const struct store *st, const char *job, char *buf, size_t len);

/* Start generation N+1 of job (N: highest existing, committed or not):
 * create the folders with their owners and modes (the generation root's
 * and 0700), return N+1 in *gen and its folder in dir.  uid is unused
 * (kept for the manifest's sake in commit); gid is the job folder's group.  -1 with errno and a message in err. */
int store_gen_begin (const struct store *st, const char *job, uid_t uid, gid_t gid, int *gen,
                     char *dir, size_t dirlen, char *err, size_t len);

/* Commit generation gen: give every file to root:gid (0640, folders 0750)
 * by fd, refusing links and devices, checksum them, and write the manifest from 'meta' (caller's fields such
 * as step, tasks, nodes, trigger, engine; may be NULL) plus format, job,
 * generation, uid, cluster, committed time, files and bytes; only then
 * open the generation to the group.  Takes no reference on meta.  -1 with errno and err; the generation stays partial
 * (the caller aborts it). */
int store_gen_commit (const struct store *st, const char *job, int gen, uid_t uid, gid_t gid,
                      json_object *meta, char *err, size_t len);

/* Remove generation gen's folder, whatever state it is in. 0 or -1+errno. */
int store_gen_abort (const struct store *st, const char *job, int gen);

/* Record, in the committed generation 'gen', that a restore found it
 * damaged ('what': the file and its problem): root's file
 * gen-<N>/damaged (MANIFEST_DAMAGE_NAME), written whole.  store_list then
 * gives the generation a "damaged" member with that text, and every rank
 * of a later restore passes it by, as the rank that found it did.  0, or
 * -1 with errno and err. */
int store_gen_mark_damaged (const struct store *st, const char *job, int gen, const char *what,
                            char *err, size_t len);

/* 1 and its text in 'what' if generation 'gen' has root's damage record,
 * else 0 (none, or no such generation). */
int store_gen_damaged (const struct store *st, const char *job, int gen, char *what, size_t len);

/* Generations of job, oldest first: an array of {"generation":N,
 * "committed":true,"manifest":{...}} and, when with_partial, of
 * {"generation":N,"committed":false,"why":"..."}; a committed one a
 * restore found damaged has "damaged":"what" (store_gen_mark_damaged).  -1 with errno
 * (ENOENT: no such job; EACCES: not the caller's) and a message in err. */
int store_list (const struct store *st, const char *job, int with_partial, json_object **gens,
                char *err, size_t len);

/* Folder of generation gen into buf. */
int store_gen_path (const struct store *st, const char *job, int gen, char *buf, size_t len);

/* Keep the newest 'keep' committed generations; remove older committed
 * ones and partial ones older than the newest committed (a newer partial
 * may be a commit in progress).  The removed numbers are appended to
 * 'removed' if not NULL.  Returns how many were removed, or -1. */
int store_prune (const struct store *st, const char *job, int keep, json_object *removed, char *err,
                 size_t len);

/* How long store_prune waits for another prune of the job to end. */
#define STORE_PRUNE_WAIT_MS 30000

/* The same, waiting at most wait_ms (0: not at all) for another prune of
 * the job to end (EBUSY then). */
int store_prune_wait (const struct store *st, const char *job, int keep, int wait_ms,
                      json_object *removed, char *err, size_t len);

/* rm -rf that never follows a symbolic link, by fds (safedir_rmtree: the
 * folder holding path must be trusted).  0 or -1+errno. */
int store_rmtree (const char *path);

#endif
