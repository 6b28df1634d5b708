/* Unit test of ibcrd/imgcopy.c: root copies a dump folder (the job
 * user's) into storage; a file there with other names (a hard link made
 * after CRIU wrote it, maybe to a file its user may not read, where
 * fs.protected_hardlinks is 0) is not copied, and the error names it; a
 * sparse file is copied with its holes. */
#include <errno.h>
#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "common/store.h"
#include "imgcopy.h"
#include "tap.h"

static char root[] = "/tmp/ibcr-test-imgcopy-XXXXXX";

static void put (const char *path, const char *text)
{
    FILE *f = fopen (path, "w");
    if (!f || fputs (text, f) < 0 || fclose (f) != 0)
        BAIL_OUT ("cannot write %s", path);
}

int main (void)
{
    char src[4200], dst[4200], f[4300], g[4300], err[2048];
    uint64_t bytes = 0;
    struct stat sb;

    plan (NO_PLAN);
    if (!mkdtemp (root))
        BAIL_OUT ("mkdtemp");
    snprintf (src, sizeof (src), "%s/task-0", root);
    if (mkdir (src, 0700) < 0)
        BAIL_OUT ("mkdir");
    snprintf (f, sizeof (f), "%s/pages-1.img", src);
    put (f, "pages");
    snprintf (f, sizeof (f), "%s/core-1.img", src);
    put (f, "core");
    snprintf (dst, sizeof (dst), "%s/copy-1", root);
    err[0] = '\0';
    int copied = imgcopy_dir (src, dst, 0, &bytes, err, sizeof (err), NULL, NULL) == 0;
    ok (copied && bytes == 9, "a dump folder is copied (%llu bytes)%s%s", (unsigned long long)bytes,
        err[0] ? ": " : "", err);
    snprintf (g, sizeof (g), "%s/zz-link.img", src);
    if (link (f, g) < 0)
        BAIL_OUT ("link");
    snprintf (dst, sizeof (dst), "%s/copy-2", root);
    err[0] = '\0';
    int rc = imgcopy_dir (src, dst, 0, &bytes, err, sizeof (err), NULL, NULL);
    ok (rc < 0 && errno == EMLINK && strstr (err, "hard links made in the dump folder"),
        "one with a hard link in it is not: %s", err);
    snprintf (g, sizeof (g), "%s/copy-2/zz-link.img", root);
    ok (stat (g, &sb) < 0, "and the linked file was not copied");

    /* A sparse file (1 GiB, one page of data in its middle) costs its
     * user nothing in the dump folder: its copy keeps the holes. */
    snprintf (src, sizeof (src), "%s/task-1", root);
    if (mkdir (src, 0700) < 0)
        BAIL_OUT ("mkdir");
    snprintf (f, sizeof (f), "%s/pages-1.img", src);
    int fd = open (f, O_WRONLY | O_CREAT | O_TRUNC, 0600);
    char page[4096];
    memset (page, 'p', sizeof (page));
    if (fd < 0 || pwrite (fd, page, sizeof (page), 512 << 20) != (ssize_t)sizeof (page)
        || ftruncate (fd, 1 << 30) < 0 || close (fd) < 0 || stat (f, &sb) < 0)
        BAIL_OUT ("cannot write %s", f);
    if ((uint64_t)sb.st_blocks * 512 > (1 << 20)) {
        skip (3, "%s does not keep holes (%lld blocks)", root, (long long)sb.st_blocks);
    } else {
        snprintf (dst, sizeof (dst), "%s/copy-3", root);
        bytes = 0;
        err[0] = '\0';
        rc = imgcopy_dir (src, dst, 0, &bytes, err, sizeof (err), NULL, NULL);
        ok (rc == 0 && bytes == sizeof (page), "a sparse file is copied (%llu bytes written)%s%s",
            (unsigned long long)bytes, err[0] ? ": " : "", err);
        snprintf (g, sizeof (g), "%s/pages-1.img", dst);
        char back[4096] = "";
        fd = open (g, O_RDONLY);
        ok (fd >= 0 && fstat (fd, &sb) == 0 && sb.st_size == (1 << 30)
                && (uint64_t)sb.st_blocks * 512 <= (1 << 20),
            "as a sparse file of the same size (%lld bytes, %lld allocated)", (long long)sb.st_size,
            (long long)sb.st_blocks * 512);
        ok (fd >= 0 && pread (fd, back, sizeof (back), 512 << 20) == (ssize_t)sizeof (back)
                && !memcmp (back, page, sizeof (page)) && pread (fd, back, 1, 0) == 1
                && back[0] == 0,
            "with its data where it was, and zeros around it");
        if (fd >= 0)
            close (fd);
    }
    store_rmtree (root);
    done_testing ();
    return exit_status ();
}
