/* manifest.h - manifest.json of one checkpoint generation: what it holds
 * (job, tasks, nodes, times, trigger, engine versions) and, per file, its
 * size and XXH3-64 checksum.
 *
 * The manifest is written last, by rename, after every image file is
 * durable: a generation folder without a valid manifest is partial and is
 * never listed or restored.  Nothing here follows a symbolic link.
 */
#ifndef IBCR_COMMON_MANIFEST_H
#define IBCR_COMMON_MANIFEST_H

#include <stddef.h>
#include <stdint.h>
#include <sys/stat.h>
#include <json-c/json.h>

#define MANIFEST_NAME "manifest.json"
/* Root's record at the top of a committed generation that a restore found
 * it damaged (store_gen_mark_damaged): not part of the image, never listed
 * or counted as one of its files. */
#define MANIFEST_DAMAGE_NAME "damaged"
#define MANIFEST_FORMAT 1

/* The largest manifest written or read, in bytes: 256 MiB, about 90 000
 * tasks of 25 image files each.  A commit whose manifest would be larger
 * fails, naming the limit, rather than write a generation no restore could
 * read.  A variable so that a test can lower it. */
#define MANIFEST_MAX_BYTES ((size_t)256 << 20)
extern size_t manifest_max_bytes;

/* XXH3-64 of a file relative to dirfd (O_NOFOLLOW), and its size.
 * 0 or -1 with errno. */
int manifest_hash_file (int dirfd, const char *path, uint64_t *hash, uint64_t *size);

/* Walk the folder gendir and return the "files" array:
 * [{"path":"task-0/core.img","size":N,"xxh3":"16 hex digits"}, ...]
 * sorted by path, manifest files excluded.  Symbolic links and anything
 * but regular files and folders are refused (EINVAL).  *bytes gets the
 * total.  NULL with errno and a message in err. */
json_object *manifest_scan (const char *gendir, uint64_t *bytes, char *err, size_t len);

/* The same, of the folder dfd (gendir only names it in messages). */
json_object *manifest_scan_at (int dfd, const char *gendir, uint64_t *bytes, char *err, size_t len);

/* Write m as gendir/manifest.json: temporary file, fsync, rename, fsync of
 * the folder.  mode/uid/gid as for the image files (uid -1: unchanged). */
int manifest_write (const char *gendir, json_object *m, int uid, int gid, char *err, size_t len);

/* The same into the folder dfd, with mode 'mode' (exactly); the temporary
 * name is created O_EXCL|O_NOFOLLOW and renamed with renameat. */
int manifest_write_at (int dfd, const char *gendir, json_object *m, int uid, int gid, mode_t mode,
                       char *err, size_t len);

/* Read and check gendir/manifest.json (format, job, generation, files).
 * NULL with errno (ENOENT: no manifest, the generation is partial;
 * EBADMSG: unreadable or invalid) and a message in err. */
json_object *manifest_read (const char *gendir, char *err, size_t len);

/* The same from the folder dfd; *st (may be NULL) gets the manifest
 * file's stat, so that a caller can check who wrote it. */
json_object *manifest_read_at (int dfd, const char *gendir, struct stat *st, char *err, size_t len);

/* The lowest rank of 0..size-1 that the manifest's "tasks" array has no
 * entry for, or -1 when it holds "size" ranks (or the manifest names no
 * "size": one written by a tool, not by ibcrd); 0 when it cannot tell
 * (out of memory, a size past any rank count).  A generation without
 * some rank's images cannot be restored as a whole: every rank must then
 * pass it by, not only the missing one. */
int manifest_missing_rank (json_object *m);

/* The same of a "tasks" array and the job's size. */
int manifest_tasks_missing_rank (json_object *tasks, int64_t size);

/* Recompute every checksum listed in m and look for files not listed.
 * Returns the number of problems (0 = intact), each appended to 'problems'
 * (if not NULL) as {"path":..., "problem":"checksum mismatch"|"missing"|
 * "size ..."|"not in manifest"}; -1 with errno on a failure to check. */
int manifest_verify (const char *gendir, json_object *m, json_object *problems,
                     uint64_t *bytes_checked);

/* The same for what the restore of one rank reads: the files of its
 * task-<rank>/ folder and those outside every task folder.  Each rank of a
 * restore checks its own images only, so that a restore of R ranks reads
 * the generation once, not R times; a rank that finds its images damaged
 * marks the generation (store_gen_mark_damaged) for all.  *transient (may
 * be NULL) is set when a problem may pass: a read that failed, rather than
 * a file missing, of another size or checksum, or not listed. */
int manifest_verify_rank (const char *gendir, json_object *m, uint32_t rank, json_object *problems,
                          uint64_t *bytes_checked, int *transient);

#endif
