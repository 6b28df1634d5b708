/* imgfiles.h - the regular files a CRIU image holds open for writing,
 * rolled back to their size at the dump before a restore.
 *
 * A periodic generation is dumped while the job goes on running: what a
 * program appends to its output files after the dump, the restored
 * program writes again, from its state at the dump (its offset, its
 * stdio buffers).  CRIU refuses such a file ("has bad size"); kept as
 * it is, the file would hold that output twice.  Cut back to its size at
 * the dump, it is what the restored program expects, and ends as an
 * uninterrupted run leaves it.  Exact for a file that grows only (an
 * append, a sequential write) and is written by one task; writes in
 * place below the dumped size are not undone.
 *
 * Never does anything with root's rights: an image is its user's data,
 * so the caller runs as that user (taskns_drop) and may truncate only
 * what the user may.  Files the image does not hold open at the dump are
 * not touched (a program that closes its output between writes is not
 * protected while it is closed).
 */
#ifndef IBCR_COMMON_IMGFILES_H
#define IBCR_COMMON_IMGFILES_H

#include <stddef.h>

/* The name of the record imgfiles_record writes among a task's images. */
#define IMGFILES_RECORD "ibcr-files.json"

/* CRIU records no size for a file open O_WRONLY|O_APPEND (a log, a
 * report: it may grow while the program runs, and CRIU would refuse it),
 * so the size of every regular file open for writing is taken while the
 * tree is still frozen, by a post-dump action (criu --action-script):
 * every process of the dumped tree (CRTOOLS_INIT_PID and below, as this
 * /proc shows them: the task's own PID namespace, where CRIU runs).
 * Writes dir/IMGFILES_RECORD,
 * {"files":[{"path","size"}]}.  0, or -1 with err. */
int imgfiles_record (const char *dir, char *err, size_t errlen);

/* main() of a program CRIU runs as its action script: with
 * CRTOOLS_SCRIPT_ACTION set, records at "post-dump" (above) and returns
 * 0 whatever happened (a failed record only leaves the rollback out; it
 * must not fail the dump), saying why on stderr (CRIU's log); -1 when
 * the variable is not set (not run by CRIU). */
int imgfiles_action (void);

/* Roll back every regular file that the images in dir (one task's, as
 * CRIU wrote them: files.img) hold open for writing and that grew since
 * the dump (its size then: CRIU's record, else IMGFILES_RECORD's; a file
 * in neither is left alone; so are the nskip paths of skip[], the
 * task's stdio, which the restorer hands in itself).  note gets "PATH from N to M bytes" for each, "; "
 * separated ("" when none).  0, or -1 with err: a file is shorter than
 * at the dump (cut or replaced since: the restored program would write
 * after a hole, and CRIU refuses it), a file the caller may not write
 * or a symbolic link (a forged image: the error names the file), or the
 * images cannot be read. */
int imgfiles_rollback (const char *dir, const char *const *skip, int nskip, char *note,
                       size_t notelen, char *err, size_t errlen);

#endif
