/* Unit test of lib/common/safedir.c on real folders: folders are made
 * with their exact mode, an existing good one is kept, and a folder (or
 * one above it, or a link on the way) that another user could change is
 * refused with a message naming it; rmtree never follows a link.  The
 * checks of ownership need root (to give a folder to another uid) and
 * are skipped otherwise. */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "common/safedir.h"
#include "tap.h"

#define OTHER_UID 4243 /* ibcr-user2 of the tests; only a number here */

static char root[] = "/tmp/ibcr-test-safedir-XXXXXX";

static const char *at (const char *rel)
{
    static char buf[4][4200];
    static int i;
    i = (i + 1) % 4;
    snprintf (buf[i], sizeof (buf[i]), "%s/%s", root, rel);
    return buf[i];
}

static mode_t mode_of (const char *path)
{
    struct stat sb;
    return lstat (path, &sb) == 0 ? sb.st_mode & 07777 : (mode_t)-1;
}

static void put (const char *path, const char *text)
{
    FILE *f = fopen (path, "w");
    if (!f || fputs (text, f) < 0 || fclose (f) != 0)
        BAIL_OUT ("cannot write %s", path);
}

int main (void)
{
    char err[1024] = "";
    int fd, rc;
    struct stat sb;

    plan (NO_PLAN);
    if (!mkdtemp (root))
        BAIL_OUT ("mkdtemp");
    umask (077);

    ok (safedir_ensure (at ("a/b/c"), 0711, err, sizeof (err)) == 0, "ensure makes a/b/c: %s", err);
    ok (mode_of (at ("a")) == 0755 && mode_of (at ("a/b")) == 0755
            && mode_of (at ("a/b/c")) == 0711,
        "parents 0755, the folder its mode, whatever the umask");
    ok (chmod (at ("a/b/c"), 0700) == 0
            && safedir_ensure (at ("a/b/c"), 0755, err, sizeof (err)) == 0
            && mode_of (at ("a/b/c")) == 0700,
        "an existing good folder is kept as it is");
    ok ((fd = safedir_open (at ("a/b/c"), err, sizeof (err))) >= 0 && fstat (fd, &sb) == 0
            && S_ISDIR (sb.st_mode),
        "open gives a folder fd");
    if (fd >= 0)
        close (fd);
    ok (safedir_open (at ("a/missing"), err, sizeof (err)) < 0 && errno == ENOENT,
        "open of a missing folder is ENOENT");
    ok (safedir_ensure ("relative/path", 0755, err, sizeof (err)) < 0 && errno == EINVAL,
        "a relative path is refused");

    /* Writable by others: the folder itself never, a folder above only
     * with the sticky bit. */
    chmod (at ("a/b/c"), 0775);
    ok (safedir_ensure (at ("a/b/c"), 0755, err, sizeof (err)) < 0 && errno == EPERM
            && strstr (err, at ("a/b/c")) && strstr (err, "chmod go-w"),
        "a group-writable folder is refused, named, with the fix: %s", err);
    chmod (at ("a/b/c"), 0755);
    chmod (at ("a/b"), 0777);
    ok (safedir_open (at ("a/b/c"), err, sizeof (err)) < 0 && errno == EPERM
            && strstr (err, at ("a/b")) && strstr (err, "sticky"),
        "a world-writable folder above is refused: %s", err);
    chmod (at ("a/b"), 01777);
    ok ((fd = safedir_open (at ("a/b/c"), err, sizeof (err))) >= 0,
        "unless it has the sticky bit (as /tmp): %s", err);
    if (fd >= 0)
        close (fd);
    chmod (at ("a/b"), 0755);

    /* A link on the way: followed when ours, relative or absolute. */
    ok (symlink ("a/b", at ("lnk")) == 0
            && safedir_ensure (at ("lnk/c/d"), 0700, err, sizeof (err)) == 0
            && mode_of (at ("a/b/c/d")) == 0700,
        "a link of ours on the way is followed: %s", err);
    ok (safedir_open (at ("a/b/../b/c/d"), err, sizeof (err)) >= 0,
        "'..' is resolved on the folders walked");

    /* safedir_mkdirat: made with its mode, an existing good one kept, a
     * link never followed. */
    fd = safedir_open (at ("a"), err, sizeof (err));
    {
        int sub, made = -1;
        ok ((sub = safedir_mkdirat (fd, "m", 0700, &made)) >= 0 && made == 1
                && mode_of (at ("a/m")) == 0700,
            "mkdirat makes a folder 0700");
        if (sub >= 0)
            close (sub);
        ok ((sub = safedir_mkdirat (fd, "m", 0700, &made)) >= 0 && made == 0, "and opens it again");
        if (sub >= 0)
            close (sub);
        ok (symlink (root, at ("a/ml")) == 0 && safedir_mkdirat (fd, "ml", 0700, NULL) < 0
                && (errno == ELOOP || errno == ENOTDIR),
            "a link in its place is not followed");
        chmod (at ("a/m"), 0770);
        ok (safedir_mkdirat (fd, "m", 0700, NULL) < 0 && errno == EPERM,
            "a group-writable one is refused");
    }

    /* rmtree: links are removed, never followed. */
    mkdir (at ("victim"), 0755);
    put (at ("victim/file"), "precious");
    mkdir (at ("a/t"), 0755);
    mkdir (at ("a/t/sub"), 0755);
    put (at ("a/t/sub/f"), "x");
    if (symlink (at ("victim"), at ("a/t/sub/dirlink")) < 0
        || symlink (at ("victim/file"), at ("a/t/filelink")) < 0)
        BAIL_OUT ("symlink");
    ok (safedir_rmtreeat (fd, "t") == 0 && lstat (at ("a/t"), &sb) < 0, "rmtreeat removes a tree");
    ok (mode_of (at ("victim/file")) != (mode_t)-1 && lstat (at ("victim"), &sb) == 0,
        "without following the links in it");
    ok (safedir_rmtreeat (fd, "t") == 0, "a missing name is not an error");
    ok (safedir_rmtreeat (fd, "..") < 0 && errno == EINVAL && safedir_rmtreeat (fd, "x/y") < 0
            && errno == EINVAL,
        "'..' and names with a slash are refused");
    close (fd);

    if (geteuid () != 0)
        skip (4, "not root: cannot give folders to another uid");
    else {
        /* A folder another user made first: the staging attack. */
        mkdir (at ("theirs"), 0755);
        if (chown (at ("theirs"), OTHER_UID, OTHER_UID) < 0)
            BAIL_OUT ("chown");
        ok (safedir_ensure (at ("theirs"), 0755, err, sizeof (err)) < 0 && errno == EPERM
                && strstr (err, at ("theirs")) && strstr (err, "owned by uid 4243"),
            "a folder of another uid is refused: %s", err);
        ok (safedir_ensure (at ("theirs/below"), 0755, err, sizeof (err)) < 0 && errno == EPERM
                && lstat (at ("theirs/below"), &sb) < 0,
            "and nothing is made below it");
        ok (symlink (at ("a"), at ("theirlink")) == 0
                && lchown (at ("theirlink"), OTHER_UID, OTHER_UID) == 0
                && safedir_open (at ("theirlink/b"), err, sizeof (err)) < 0 && errno == EPERM
                && strstr (err, "symbolic link owned by uid 4243"),
            "a link of another uid on the way is not followed: %s", err);
        rc = safedir_rmtree (at ("theirs"), err, sizeof (err));
        ok (rc == 0 && lstat (at ("theirs"), &sb) < 0, "rmtree removes it by fds");
    }

    ok (safedir_rmtree (root, err, sizeof (err)) == 0 && lstat (root, &sb) < 0,
        "rmtree of a folder in sticky /tmp cleans up: %s", err);
    done_testing ();
    return exit_status ();
}
