/* Unit test of ibcrd/imgcopy.c: root copies a dump folder (the job
 * user's) into storage; a file there with other names (a hard link made
 * after CRIU wrote it, maybe to a file its user may not read, where
 * fs.protected_hardlinks is 0) is not copied, and the error names it. */
#include <errno.h>
#include <fcntl.h>
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
    store_rmtree (root);
    done_testing ();
    return exit_status ();
}
