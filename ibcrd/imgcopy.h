/* imgcopy.h - moving a task's images from node-local staging into the
 * job's storage, durably.
 *
 * Runs after the job resumed (the copy is off the application's critical
 * path).  Every file is fsynced and so is every folder, so that the
 * manifest, written after this returns, never names bytes that a crash
 * could still lose.  Any write error (ENOSPC on a full storage) stops the
 * copy; the caller aborts the generation, which removes what was copied.
 */
#ifndef IBCRD_IMGCOPY_H
#define IBCRD_IMGCOPY_H

#include <stddef.h>
#include <stdint.h>

/* Told how many more bytes of src were copied (a terminal shows them). */
typedef void (*imgcopy_progress_f) (void *arg, uint64_t more);

/* Copy the regular files of folder src (one level, as CRIU writes them)
 * into folder dst, created 0700.  src and dst's parent must be trusted
 * folders (safedir.h: root's, writable by nobody else); dst is made or
 * opened below its parent by fd, never followed, and every file is opened
 * O_NOFOLLOW relative to those folders' fds.  With compress, each as NAME.zst
 * (zimg.h).  *bytes gets what was written.  cb (may be NULL) is called
 * as the source is read.  0, or -1 with errno and a message naming the
 * file in err. */
int imgcopy_dir (const char *src, const char *dst, int compress, uint64_t *bytes, char *err,
                 size_t len, imgcopy_progress_f cb, void *arg);

/* The same between two open folders (src and dst name them in messages). */
int imgcopy_dirat (int sdir, int ddir, const char *src, const char *dst, int compress,
                   uint64_t *bytes, char *err, size_t len, imgcopy_progress_f cb, void *arg);

/* Bytes of the regular files of folder dir (one level), or 0. */
uint64_t imgcopy_dir_size (const char *dir);

#endif
