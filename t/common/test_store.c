/* Unit test of lib/common/{ident,store,manifest}.c on real files: names
 * that could escape the storage are refused, a symbolic link inside a
 * generation fails the commit instead of being followed, a commit is
 * atomic (no manifest, not listed), and numbering never reuses a number. */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <unistd.h>

#include "common/ident.h"
#include "common/manifest.h"
#include "common/proto.h"
#include "common/restore.h"
#include "common/store.h"
#include "tap.h"

static char root[] = "/tmp/ibcr-test-store-XXXXXX";

static void put (const char *dir, const char *name, const char *text)
{
    char p[4200];
    FILE *f;
    snprintf (p, sizeof (p), "%s/%s", dir, name);
    if (!(f = fopen (p, "w")) || fputs (text, f) < 0 || fclose (f) != 0)
        BAIL_OUT ("cannot write %s", p);
}

/* A generation of job with one folder of one image per rank in 'ranks'
 * (-1 ends), its manifest naming them and the job's size; 0 or -1. */
static int gen_of (struct store *st, const char *job, int size, const int *ranks, int *gen,
                   char *err, size_t len)
{
    char dir[4096], td[4200];
    json_object *meta = json_object_new_object (), *ta = json_object_new_array ();
    int rc;

    if (store_gen_begin (st, job, getuid (), getgid (), gen, dir, sizeof (dir), err, len) < 0)
        return -1;
    for (int i = 0; ranks[i] >= 0; i++) {
        json_object *t = json_object_new_object ();
        snprintf (td, sizeof (td), "%s/task-%d", dir, ranks[i]);
        if (mkdir (td, 0755) < 0)
            BAIL_OUT ("mkdir %s", td);
        put (td, "core-1.img", "image");
        json_object_object_add (t, "rank", json_object_new_int (ranks[i]));
        json_object_array_add (ta, t);
    }
    json_object_object_add (meta, "tasks", ta);
    json_object_object_add (meta, "size", json_object_new_int (size));
    rc = store_gen_commit (st, job, *gen, getuid (), getgid (), meta, err, len);
    json_object_put (meta);
    return rc;
}

/* manifest_tasks_missing_rank of the ranks (-1 ends) and size. */
static int missing (int size, const int *ranks)
{
    json_object *ta = json_object_new_array ();
    for (int i = 0; ranks[i] >= 0; i++) {
        json_object *t = json_object_new_object ();
        json_object_object_add (t, "rank", json_object_new_int (ranks[i]));
        json_object_array_add (ta, t);
    }
    int r = manifest_tasks_missing_rank (ta, size);
    json_object_put (ta);
    return r;
}

int main (void)
{
    struct store st = { .cluster = "local" };
    char dir[4096], err[1024], other[4300];
    json_object *gens;
    int gen;

    plan (NO_PLAN);
    if (!mkdtemp (root))
        BAIL_OUT ("mkdtemp");
    st.root = root;

    ok (ident_ok ("4242") && ident_ok ("run.a_b-c"), "plain names are valid");
    ok (!ident_ok ("..") && !ident_ok (".hidden") && !ident_ok ("a/b") && !ident_ok ("")
            && !ident_ok ("-x") && !ident_ok ("a b") && !ident_ok (NULL),
        "path-like names are not");
    char longname[80];
    memset (longname, 'a', sizeof (longname) - 1);
    longname[sizeof (longname) - 1] = '\0';
    ok (!ident_ok (longname), "a 79-character name is too long");
    ok (store_job_path (&st, "../etc", dir, sizeof (dir)) < 0 && errno == EINVAL,
        "store_job_path refuses ../etc");

    ok (store_gen_begin (&st, "j1", getuid (), getgid (), &gen, dir, sizeof (dir), err,
                         sizeof (err))
                == 0
            && gen == 1,
        "first generation is 1");
    put (dir, "a.img", "hello");
    ok (store_list (&st, "j1", 0, &gens, err, sizeof (err)) == 0
            && json_object_array_length (gens) == 0,
        "before commit nothing is listed");
    json_object_put (gens);
    ok (store_gen_commit (&st, "j1", gen, getuid (), getgid (), NULL, err, sizeof (err)) == 0,
        "commit succeeds: %s", err);
    ok (store_list (&st, "j1", 0, &gens, err, sizeof (err)) == 0
            && json_object_array_length (gens) == 1,
        "after commit it is listed");
    json_object_put (gens);
    {
        struct stat gs, fs, ms;
        char f[4300];
        snprintf (f, sizeof (f), "%s/a.img", dir);
        stat (dir, &gs);
        stat (f, &fs);
        snprintf (f, sizeof (f), "%s/manifest.json", dir);
        stat (f, &ms);
        ok ((gs.st_mode & 07777) == 0750 && (fs.st_mode & 07777) == 0640
                && (ms.st_mode & 07777) == 0640 && gs.st_uid == geteuid ()
                && fs.st_uid == geteuid (),
            "committed: ours, folders 0750, files 0640 (%o %o %o)", gs.st_mode & 07777,
            fs.st_mode & 07777, ms.st_mode & 07777);
        if (geteuid () != 0)
            skip (1, "not root: cannot give a manifest to another uid");
        else {
            /* A manifest root did not write is not believed. */
            json_object *e;
            if (chown (f, 4242, 4242) < 0)
                BAIL_OUT ("chown");
            ok (store_list (&st, "j1", 1, &gens, err, sizeof (err)) == 0
                    && (e = json_object_array_get_idx (gens, 0))
                    && !json_object_get_boolean (json_object_object_get (e, "committed"))
                    && strstr (json_object_get_string (json_object_object_get (e, "why")),
                               "not trusted"),
                "a manifest of another uid is not trusted");
            json_object_put (gens);
            if (chown (f, 0, 0) < 0)
                BAIL_OUT ("chown");
        }
    }

    ok (store_gen_begin (&st, "j1", getuid (), getgid (), &gen, dir, sizeof (dir), err,
                         sizeof (err))
                == 0
            && gen == 2,
        "next generation is 2");
    put (dir, "b.img", "data");
    snprintf (other, sizeof (other), "%s/outside", root);
    put (root, "outside", "secret");
    char link[4200];
    snprintf (link, sizeof (link), "%s/link.img", dir);
    if (symlink (other, link) < 0)
        BAIL_OUT ("symlink");
    ok (store_gen_commit (&st, "j1", gen, getuid (), getgid (), NULL, err, sizeof (err)) < 0,
        "a symbolic link in a generation fails the commit: %s", err);
    struct stat sb;
    ok (stat (other, &sb) == 0 && (sb.st_mode & 07777) != 0600,
        "and the file it points to was not touched (mode %o)", sb.st_mode & 07777);
    ok (store_list (&st, "j1", 1, &gens, err, sizeof (err)) == 0
            && json_object_array_length (gens) == 2
            && !json_object_get_boolean (
                json_object_object_get (json_object_array_get_idx (gens, 1), "committed")),
        "the failed generation is partial");
    json_object_put (gens);
    ok (store_gen_abort (&st, "j1", gen) == 0 && stat (dir, &sb) < 0 && stat (other, &sb) == 0,
        "abort removes it without following the link");
    ok (store_gen_begin (&st, "j1", getuid (), getgid (), &gen, dir, sizeof (dir), err,
                         sizeof (err))
                == 0
            && gen == 3,
        "an aborted number is never reused");
    ok (store_gen_begin (&st, "j1", getuid (), getgid (), &gen, dir, sizeof (dir), err,
                         sizeof (err))
                == 0
            && gen == 4,
        "a partial one is never reused");
    ok (store_gen_abort (&st, "j1", 3) == 0 && store_gen_abort (&st, "j1", 4) == 0, "both aborted");
    {
        char jd[4300];
        snprintf (jd, sizeof (jd), "%s/local/j1", root);
        put (jd, ".last-gen", "garbage");
    }
    ok (store_gen_begin (&st, "j1", getuid (), getgid (), &gen, dir, sizeof (dir), err,
                         sizeof (err))
                == 0
            && gen == 2,
        "an unreadable record: the folders decide");
    {
        /* Links left in the job folder (by hand, or by a user of the
         * old layout) are neither read through nor written through. */
        char jd[4300], lg[4400], tmpn[4400], victim[4300], buf[64] = "";
        FILE *f;
        snprintf (jd, sizeof (jd), "%s/local/j1", root);
        snprintf (lg, sizeof (lg), "%s/.last-gen", jd);
        snprintf (tmpn, sizeof (tmpn), "%s/.last-gen.%ld", jd, (long)getpid ());
        put (root, "victim", "99\n");
        snprintf (victim, sizeof (victim), "%s/victim", root);
        if (unlink (lg) < 0 || symlink (victim, lg) < 0 || symlink (victim, tmpn) < 0)
            BAIL_OUT ("symlink");
        ok (store_gen_begin (&st, "j1", getuid (), getgid (), &gen, dir, sizeof (dir), err,
                             sizeof (err))
                    == 0
                && gen == 3,
            "a link as the record is not read: next is from the folders");
        if ((f = fopen (victim, "r"))) {
            if (!fgets (buf, sizeof (buf), f))
                buf[0] = '\0';
            fclose (f);
        }
        ok (strcmp (buf, "99\n") == 0 && lstat (tmpn, &sb) < 0 && lstat (lg, &sb) == 0
                && S_ISREG (sb.st_mode),
            "nor written through: the file it named is unchanged");
    }

    /* A generation holds every rank's images or is not restored by any
     * rank: a rank that left a member node must not leave the others to
     * restore a generation their peer cannot. */
    ok (missing (2, (int[]){ 0, 1, -1 }) == -1 && missing (2, (int[]){ 0, -1 }) == 1
            && missing (2, (int[]){ 1, -1 }) == 0 && missing (3, (int[]){ 2, 0, -1 }) == 1
            && missing (0, (int[]){ -1 }) == -1,
        "manifest_tasks_missing_rank names the first rank with no images");
    ok (missing (1, (int[]){ 3, -1 }) == -1 && missing (2, (int[]){ 4, 7, -1 }) == -1,
        "a job that declared no size has its size from its task count, and any ranks");
    {
        struct restore_plan plan;
        json_object *m = NULL;
        char note[1024];
        int g1, g2;
        int made = gen_of (&st, "j2", 2, (int[]){ 0, 1, -1 }, &g1, err, sizeof (err)) == 0
            && gen_of (&st, "j2", 2, (int[]){ 0, -1 }, &g2, err, sizeof (err)) == 0;
        ok (made, "generations %d (ranks 0 and 1) and %d (rank 0 alone) of a job of 2%s%s", g1, g2,
            made ? "" : ": ", made ? "" : err);
        int r0 = restore_pick (&st, "j2", 0, 0, &plan, &m, note, sizeof (note), err, sizeof (err));
        ok (r0 == 1 && plan.gen == g1 && strstr (note, "holds no images of rank 1 of its 2"),
            "rank 0 restores generation %d too, not the newer one that lacks rank 1 (%d: %s%s)", g1,
            plan.gen, note, r0 < 0 ? err : "");
        json_object_put (m);
        m = NULL;
        int r1 = restore_pick (&st, "j2", 0, 1, &plan, &m, note, sizeof (note), err, sizeof (err));
        ok (r1 == 1 && plan.gen == g1, "and so does rank 1 (%d)", plan.gen);
        json_object_put (m);
        m = NULL;
        ok (restore_pick (&st, "j2", g2, 0, &plan, &m, note, sizeof (note), err, sizeof (err)) < 0
                && strstr (err, "holds no images of rank 1"),
            "asked for by number, it is refused, saying why: %s", err);
    }

    /* Each rank of a restore reads its own images only; one that finds
     * them damaged marks the generation, and every rank after it passes
     * the generation by. */
    {
        struct restore_plan plan;
        json_object *m = NULL, *m2 = NULL, *p = json_object_new_array ();
        char note[1024], gd[4096], img[4300], what[512];
        int g1, g2;
        uint64_t bytes = 0;
        int made = gen_of (&st, "j4", 3, (int[]){ 0, 1, 2, -1 }, &g1, err, sizeof (err)) == 0
            && gen_of (&st, "j4", 3, (int[]){ 0, 1, 2, -1 }, &g2, err, sizeof (err)) == 0;
        ok (made, "generations %d and %d of a job of 3%s%s", g1, g2, made ? "" : ": ",
            made ? "" : err);
        store_gen_path (&st, "j4", g2, gd, sizeof (gd));
        snprintf (img, sizeof (img), "%s/task-1/core-1.img", gd);
        put (gd, "task-1/core-1.img", "IMAGE"); /* same size, other bytes */
        ok (store_list (&st, "j4", 0, &gens, err, sizeof (err)) == 0
                && (m2 = json_object_object_get (json_object_array_get_idx (gens, 1), "manifest")),
            "generation %d is listed", g2);
        int nr = manifest_verify_rank (gd, m2, 0, p, &bytes, NULL);
        ok (nr == 0 && bytes == 5,
            "rank 0's check reads its own 5 bytes only (%d problems, %llu bytes)", nr,
            (unsigned long long)bytes);
        int nall = manifest_verify (gd, m2, NULL, &bytes);
        ok (nall == 1 && bytes == 15,
            "a whole check finds rank 1's damage (%d problems, %llu bytes)", nall,
            (unsigned long long)bytes);
        json_object_put (gens);
        json_object_put (p);
        int r0 = restore_pick (&st, "j4", 0, 0, &plan, &m, note, sizeof (note), err, sizeof (err));
        ok (r0 == 1 && plan.gen == g2, "rank 0, first, restores generation %d (%d)", g2, plan.gen);
        json_object_put (m);
        m = NULL;
        int r1 = restore_pick (&st, "j4", 0, 1, &plan, &m, note, sizeof (note), err, sizeof (err));
        ok (r1 == 1 && plan.gen == g1
                && strstr (note, "is damaged (task-1/core-1.img: checksum mismatch), falling back"),
            "rank 1 falls back to generation %d, saying why (%d: %s)", g1, plan.gen, note);
        json_object_put (m);
        m = NULL;
        int marked = store_gen_damaged (&st, "j4", g2, what, sizeof (what)) == 1
            && !strcmp (what, "task-1/core-1.img: checksum mismatch");
        ok (marked, "and has marked generation %d damaged (%s)", g2, what);
        ok (store_gen_damaged (&st, "j4", g1, what, sizeof (what)) == 0 && !what[0],
            "not generation %d", g1);
        int r2 = restore_pick (&st, "j4", 0, 2, &plan, &m, note, sizeof (note), err, sizeof (err));
        ok (r2 == 1 && plan.gen == g1
                && strstr (note, "is damaged (task-1/core-1.img: checksum mismatch), falling back"),
            "rank 2, after it, passes generation %d by for rank 1's damage (%d: %s)", g2, plan.gen,
            note);
        json_object_put (m);
        m = NULL;
        ok (store_list (&st, "j4", 0, &gens, err, sizeof (err)) == 0
                && (m2 = json_object_object_get (json_object_array_get_idx (gens, 1), "manifest"))
                && json_object_object_get (json_object_array_get_idx (gens, 1), "damaged")
                && manifest_verify (gd, m2, NULL, NULL) == 1,
            "the mark is listed, and is not taken for a file written into the generation");
        json_object_put (gens);
        ok (restore_pick (&st, "j4", g2, 0, &plan, &m, note, sizeof (note), err, sizeof (err)) < 0
                && strstr (err, "checksum mismatch"),
            "asked for by number, it is refused: %s", err);
        /* Retention: a marked generation is not one of those kept. */
        json_object *rm = json_object_new_array ();
        int np = store_prune (&st, "j4", 1, rm, err, sizeof (err));
        ok (np == 0, "prune --keep 1 keeps %d (the only good one) and the marked newest %d (%d)",
            g1, g2, np);
        int g3;
        ok (gen_of (&st, "j4", 3, (int[]){ 0, 1, 2, -1 }, &g3, err, sizeof (err)) == 0,
            "a newer generation %d", g3);
        np = store_prune (&st, "j4", 1, rm, err, sizeof (err));
        ok (np == 2 && store_list (&st, "j4", 0, &gens, err, sizeof (err)) == 0
                && json_object_array_length (gens) == 1
                && json_object_get_int (
                       json_object_object_get (json_object_array_get_idx (gens, 0), "generation"))
                    == g3,
            "after it, prune --keep 1 removes %d and the marked %d (%d removed)", g1, g2, np);
        json_object_put (gens);
        json_object_put (rm);
    }

    /* Each rank's share of the check, in a job of 11: task-1 is not a
     * prefix of task-10; a file nobody listed is its folder's rank's
     * concern; a user asking for another user's generation reads and
     * marks nothing; a mark root did not write is not believed. */
    {
        struct restore_plan plan;
        json_object *m = NULL, *m1 = NULL;
        char gd[4096], note[1024], what[512], p[4300];
        int g;
        ok (gen_of (&st, "j5", 11, (int[]){ 0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, -1 }, &g, err,
                    sizeof (err))
                == 0,
            "a generation %d of 11 ranks", g);
        store_gen_path (&st, "j5", g, gd, sizeof (gd));
        put (gd, "task-10/core-1.img", "IMAGE");
        put (gd, "task-2/extra.img", "planted");
        ok (store_list (&st, "j5", 0, &gens, err, sizeof (err)) == 0
                && (m1 = json_object_object_get (json_object_array_get_idx (gens, 0), "manifest")),
            "it is listed");
        ok (manifest_verify_rank (gd, m1, 1, NULL, NULL, NULL) == 0
                && manifest_verify_rank (gd, m1, 10, NULL, NULL, NULL) == 1,
            "task-10's damage is rank 10's, not rank 1's");
        json_object *pr = json_object_new_array ();
        ok (manifest_verify_rank (gd, m1, 0, NULL, NULL, NULL) == 0
                && manifest_verify_rank (gd, m1, 2, pr, NULL, NULL) == 1
                && !strcmp (proto_get_str (json_object_array_get_idx (pr, 0), "problem", ""),
                            "not in manifest"),
            "a file planted in task-2 is rank 2's concern, not rank 0's");
        json_object_put (pr);
        json_object_put (gens);
        ok (restore_pick_for (&st, "j5", 0, 10, 4242, &plan, &m, note, sizeof (note), err,
                              sizeof (err))
                    < 0
                && errno == EPERM && strstr (err, "belongs to another user")
                && store_gen_damaged (&st, "j5", g, what, sizeof (what)) == 0,
            "another uid's restore is refused before a check, and marks nothing: %s", err);
        snprintf (p, sizeof (p), "%s/" MANIFEST_DAMAGE_NAME, gd);
        put (gd, MANIFEST_DAMAGE_NAME, "forged\n");
        chmod (p, 0660);
        ok (store_gen_damaged (&st, "j5", g, what, sizeof (what)) == 0,
            "a mark writable by its group is not believed");
        unlink (p);
        ok (restore_pick (&st, "j5", 0, 10, &plan, &m, note, sizeof (note), err, sizeof (err)) < 0
                && store_gen_damaged (&st, "j5", g, what, sizeof (what)) == 1
                && !strcmp (what, "task-10/core-1.img: checksum mismatch"),
            "rank 10's own restore marks it (%s)", what);
        json_object_put (m);
    }

    /* The manifest's size: a reader and the writer keep to one limit, so
     * a commit never writes what no restore can read. */
    {
        json_object *meta = json_object_new_object ();
        int g;
        manifest_max_bytes = 4096;
        char big[5000];
        memset (big, 'x', sizeof (big) - 1);
        big[sizeof (big) - 1] = '\0';
        json_object_object_add (meta, "pad", json_object_new_string (big));
        int refused = store_gen_begin (&st, "j3", getuid (), getgid (), &g, dir, sizeof (dir), err,
                                       sizeof (err))
            == 0;
        if (refused) {
            put (dir, "a.img", "x");
            refused =
                store_gen_commit (&st, "j3", g, getuid (), getgid (), meta, err, sizeof (err)) < 0
                && errno == EFBIG && strstr (err, "over the limit of 4096");
        }
        ok (refused, "a manifest over the limit is not committed, and the error says so: %s", err);
        ok (store_list (&st, "j3", 1, &gens, err, sizeof (err)) == 0
                && json_object_array_length (gens) == 1
                && !json_object_get_boolean (
                    json_object_object_get (json_object_array_get_idx (gens, 0), "committed")),
            "that generation is partial");
        json_object_put (gens);
        json_object_put (meta);
        manifest_max_bytes = MANIFEST_MAX_BYTES;
        /* 72 MiB: more than the 64 MiB readers once kept to, which a job of
         * some 20 000 ranks reaches, while commits wrote any size. */
        size_t n = (size_t)72 << 20;
        char *huge = malloc (n + 1);
        if (!huge)
            BAIL_OUT ("malloc");
        memset (huge, 'y', n);
        huge[n] = '\0';
        meta = json_object_new_object ();
        json_object_object_add (meta, "pad", json_object_new_string (huge));
        free (huge);
        err[0] = '\0';
        int rc = store_gen_begin (&st, "j3", getuid (), getgid (), &g, dir, sizeof (dir), err,
                                  sizeof (err));
        if (rc == 0) {
            put (dir, "a.img", "x");
            rc = store_gen_commit (&st, "j3", g, getuid (), getgid (), meta, err, sizeof (err));
        }
        ok (rc == 0, "a 72 MiB manifest is committed%s%s", rc ? ": " : "", rc ? err : "");
        json_object_put (meta);
        json_object *last = NULL;
        rc = store_list (&st, "j3", 1, &gens, err, sizeof (err));
        if (rc == 0 && json_object_array_length (gens) == 2)
            last = json_object_array_get_idx (gens, 1);
        ok (last && json_object_get_boolean (json_object_object_get (last, "committed")),
            "and read back as committed (%s)",
            last     ? proto_get_str (last, "why", "no reason given")
                : rc ? err
                     : "not listed");
        if (rc == 0)
            json_object_put (gens);

        /* That manifest read while memory is short (ENOMEM): the
         * generation looks partial for a moment, and retention must not
         * remove it as one. */
        rc = gen_of (&st, "j3", 1, (int[]){ 0, -1 }, &g, err, sizeof (err));
        ok (rc == 0, "a newer generation %d%s%s", g, rc ? ": " : "", rc ? err : "");
        struct rlimit old, low;
        long pages = 0, psz = sysconf (_SC_PAGESIZE);
        FILE *sf = fopen ("/proc/self/statm", "r");
        if (!sf || fscanf (sf, "%ld", &pages) != 1 || getrlimit (RLIMIT_AS, &old) < 0)
            BAIL_OUT ("statm/getrlimit");
        fclose (sf);
        low = old;
        low.rlim_cur = (rlim_t)pages * (rlim_t)psz + ((rlim_t)32 << 20);
        if (setrlimit (RLIMIT_AS, &low) < 0)
            BAIL_OUT ("setrlimit");
        json_object *pr = json_object_new_array ();
        int np = store_prune (&st, "j3", 1, pr, err, sizeof (err));
        if (setrlimit (RLIMIT_AS, &old) < 0)
            BAIL_OUT ("setrlimit back");
        int gone = 0;
        for (size_t k = 0; k < json_object_array_length (pr); k++)
            gone |= json_object_get_int (json_object_array_get_idx (pr, k)) == g - 1;
        ok (np >= 0 && !gone,
            "retention with memory short keeps the generation whose manifest it could not read "
            "(%d removed%s%s)",
            np, np < 0 ? ": " : "", np < 0 ? err : "");
        json_object_put (pr);
        last = NULL;
        rc = store_list (&st, "j3", 1, &gens, err, sizeof (err));
        for (size_t k = 0; rc == 0 && k < json_object_array_length (gens); k++)
            if (proto_get_int (json_object_array_get_idx (gens, k), "generation", 0) == g - 1)
                last = json_object_array_get_idx (gens, k);
        ok (last && json_object_get_boolean (json_object_object_get (last, "committed")),
            "and it reads back, committed, once memory is there");
        if (rc == 0)
            json_object_put (gens);
    }

    ok (store_list (&st, "nojob", 0, &gens, err, sizeof (err)) < 0 && errno == ENOENT
            && strstr (err, "no checkpoint of job nojob"),
        "an unknown job is ENOENT: %s", err);

    store_rmtree (root);
    ok (stat (root, &sb) < 0, "store_rmtree cleans up");
    done_testing ();
    return exit_status ();
}
