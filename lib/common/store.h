/* store.h - the storage layout of committed checkpoints:
 *
 *   <root>/<cluster>/<job>/gen-<N>/          folder 0700, owned by the job's user
 *   <root>/<cluster>/<job>/gen-<N>/task-<R>/ one image folder per task
 *   <root>/<cluster>/<job>/gen-<N>/manifest.json   written last, by rename
 *
 * <root> and <root>/<cluster> are 0755 so users reach their own jobs and
 * nothing else: a job folder is 0700 and owned by the job's user, files are
 * 0600.  A generation without a valid manifest is partial: never listed as
 * committed, never restored, removed by prune once a newer one committed.
 * Job names pass ident_ok() before they touch a path.
 */
#ifndef IBCR_COMMON_STORE_H
#define IBCR_COMMON_STORE_H

#include <stddef.h>
#include <sys/types.h>
#include <json-c/json.h>

struct store {
    const char *root;       /* absolute */
    const char *cluster;    /* "local" without Slurm */
};

/* <root>/<cluster>/<job> into buf.  -1 with errno EINVAL for a bad job
 * name, ENAMETOOLONG. */
int store_job_path (const struct store *st, const char *job, char *buf, size_t len);

/* Start generation N+1 of job (N: highest existing, committed or not):
 * create the folders with their owners and modes, return N+1 in *gen and
 * its folder in dir.  -1 with errno and a message in err. */
int store_gen_begin (const struct store *st, const char *job, uid_t uid, gid_t gid,
                     int *gen, char *dir, size_t dirlen, char *err, size_t len);

/* Commit generation gen: give every file to uid:gid (0600, folders 0700),
 * checksum them, and write the manifest from 'meta' (caller's fields such
 * as step, tasks, nodes, trigger, engine; may be NULL) plus format, job,
 * generation, uid, cluster, committed time, files and bytes.  Takes no
 * reference on meta.  -1 with errno and err; the generation stays partial
 * (the caller aborts it). */
int store_gen_commit (const struct store *st, const char *job, int gen, uid_t uid, gid_t gid,
                      json_object *meta, char *err, size_t len);

/* Remove generation gen's folder, whatever state it is in. 0 or -1+errno. */
int store_gen_abort (const struct store *st, const char *job, int gen);

/* Generations of job, oldest first: an array of {"generation":N,
 * "committed":true,"manifest":{...}} and, when with_partial, of
 * {"generation":N,"committed":false,"why":"..."}.  -1 with errno
 * (ENOENT: no such job; EACCES: not the caller's) and a message in err. */
int store_list (const struct store *st, const char *job, int with_partial,
                json_object **gens, char *err, size_t len);

/* Folder of generation gen into buf. */
int store_gen_path (const struct store *st, const char *job, int gen, char *buf, size_t len);

/* Keep the newest 'keep' committed generations; remove older committed
 * ones and partial ones older than the newest committed (a newer partial
 * may be a commit in progress).  The removed numbers are appended to
 * 'removed' if not NULL.  Returns how many were removed, or -1. */
int store_prune (const struct store *st, const char *job, int keep, json_object *removed,
                 char *err, size_t len);

/* rm -rf that never follows a symbolic link. 0 or -1+errno. */
int store_rmtree (const char *path);

#endif
