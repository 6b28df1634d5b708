/* zimg.h - zstd compression of checkpoint image files (ibcrd.conf
 * "compression = yes").
 *
 * A compressed file is stored as NAME.zst beside the others, so that the
 * manifest's checksums cover exactly the bytes stored, and a restart
 * decompresses the folder into a private copy before CRIU reads it (CRIU
 * knows only its own file names).  Without libzstd at build time every
 * call fails with ENOTSUP and says how to get it.
 */
#ifndef IBCR_COMMON_ZIMG_H
#define IBCR_COMMON_ZIMG_H

#include <stddef.h>
#include <stdint.h>

/* 1 when this build can compress. */
int zimg_available (void);

/* Compress what is readable on in, at most max bytes, to out (level 1:
 * the copy must keep up with the storage).  *written gets the compressed
 * size.  0 or -1 with errno. */
int zimg_compress_fd (int in, int out, uint64_t max, uint64_t *written);

/* Copy folder src into the new folder dst (created 0700), decompressing
 * NAME.zst into NAME; other files are copied as they are.  0, or -1 with
 * errno and a message in err. */
int zimg_decompress_dir (const char *src, const char *dst, char *err, size_t len);

/* Does folder dir hold a NAME.zst file? */
int zimg_dir_compressed (const char *dir);

#endif
