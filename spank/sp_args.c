/* sp_args.c - see sp_args.h.
 *
 * Must never accept an argument it does not know: an admin who writes
 * "on_daemon_down=fial" must hear about it at the next submission, not
 * find out after a failure that jobs ran unprotected.
 */
#include "config.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "common/duration.h"
#include "sp_args.h"

#define SP_KNOWN                                                                                   \
    "socket=PATH, libibcr=PATH, init=PATH, batch_step=yes|no, "                                    \
    "on_daemon_down=warn|fail, timeout=DURATION, conf=PATH, term_wait=DURATION"

void sp_args_defaults (struct sp_args *a)
{
    memset (a, 0, sizeof (*a));
    snprintf (a->socket, sizeof (a->socket), "%s", IBCR_SOCKET_DEFAULT);
    snprintf (a->libibcr, sizeof (a->libibcr), "%s", IBCR_LIBIBCR_DEFAULT);
    snprintf (a->init, sizeof (a->init), "%s", IBCR_INIT_DEFAULT);
    a->batch_step = 0;
    a->on_down = SP_DOWN_WARN;
    a->timeout_ms = 2000;
    /* Above a usual GraceTime: Slurm's SIGKILL ends the wait anyway. */
    a->term_wait_ms = 120000;
}

/* A path value: absolute (slurmstepd's working directory is not the
 * admin's), no blanks (plugstack.conf splits on them anyway), and only
 * the %n, %h and %% escapes that expand_path knows. */
static int check_path (const char *key, const char *val, char *dst, size_t dstlen, char *err,
                       size_t errlen)
{
    const char *p;

    if (val[0] != '/') {
        snprintf (err, errlen, "ibcr: plugstack.conf: %s=%s: give an absolute path", key, val);
        return -1;
    }
    for (p = val; (p = strchr (p, '%')); p += 2) {
        if (p[1] != 'n' && p[1] != 'h' && p[1] != '%') {
            snprintf (err, errlen,
                      "ibcr: plugstack.conf: %s=%s: unknown escape '%%%c' "
                      "(only %%n = node name, %%h = host name, %%%% = %%)",
                      key, val, p[1] ? p[1] : ' ');
            return -1;
        }
    }
    if (strlen (val) >= dstlen) {
        snprintf (err, errlen, "ibcr: plugstack.conf: %s=: path longer than %zu characters", key,
                  dstlen - 1);
        return -1;
    }
    strcpy (dst, val);
    return 0;
}

int sp_args_parse (struct sp_args *a, int ac, char **av, char *err, size_t errlen)
{
    static const char *const keys[] = {
        "socket", "libibcr", "init", "batch_step", "on_daemon_down", "timeout", "conf", "term_wait",
    };
    int seen[sizeof (keys) / sizeof (keys[0])] = { 0 };
    size_t k;
    int i;

    for (i = 0; i < ac; i++) {
        const char *arg = av[i];
        const char *eq = strchr (arg, '=');
        const char *val = eq ? eq + 1 : NULL;
        size_t klen = eq ? (size_t)(eq - arg) : strlen (arg);

#define KEY(k) (klen == strlen (k) && !strncmp (arg, k, klen))
        /* Two values for one key: which one did the admin mean? */
        for (k = 0; k < sizeof (keys) / sizeof (keys[0]); k++) {
            if (KEY (keys[k]) && seen[k]++) {
                snprintf (err, errlen,
                          "ibcr: plugstack.conf: %s= is given twice; "
                          "keep one",
                          keys[k]);
                return -1;
            }
        }
        if (!val || !*val) {
            if (KEY ("socket") || KEY ("libibcr") || KEY ("init") || KEY ("batch_step")
                || KEY ("on_daemon_down") || KEY ("timeout") || KEY ("conf") || KEY ("term_wait"))
                snprintf (err, errlen,
                          "ibcr: plugstack.conf: argument '%s' needs a value "
                          "(key=value; known: %s)",
                          arg, SP_KNOWN);
            else
                snprintf (err, errlen,
                          "ibcr: plugstack.conf: unknown argument '%s' "
                          "(known: %s)",
                          arg, SP_KNOWN);
            return -1;
        }
        if (KEY ("socket")) {
            if (check_path ("socket", val, a->socket, sizeof (a->socket), err, errlen) < 0)
                return -1;
        } else if (KEY ("libibcr")) {
            if (check_path ("libibcr", val, a->libibcr, sizeof (a->libibcr), err, errlen) < 0)
                return -1;
        } else if (KEY ("init")) {
            if (check_path ("init", val, a->init, sizeof (a->init), err, errlen) < 0)
                return -1;
        } else if (KEY ("conf")) {
            if (check_path ("conf", val, a->conf, sizeof (a->conf), err, errlen) < 0)
                return -1;
        } else if (KEY ("batch_step")) {
            if (!strcmp (val, "yes"))
                a->batch_step = 1;
            else if (!strcmp (val, "no"))
                a->batch_step = 0;
            else {
                snprintf (err, errlen,
                          "ibcr: plugstack.conf: batch_step=%s: "
                          "use batch_step=yes or batch_step=no",
                          val);
                return -1;
            }
        } else if (KEY ("on_daemon_down")) {
            if (!strcmp (val, "warn"))
                a->on_down = SP_DOWN_WARN;
            else if (!strcmp (val, "fail"))
                a->on_down = SP_DOWN_FAIL;
            else {
                snprintf (err, errlen,
                          "ibcr: plugstack.conf: on_daemon_down=%s: "
                          "use on_daemon_down=warn (run unprotected) or "
                          "on_daemon_down=fail (fail the task)",
                          val);
                return -1;
            }
        } else if (KEY ("timeout")) {
            uint64_t ms;
            /* A task start waits this long at most for ibcrd: bounded
             * both ways so neither a typo nor a hung daemon stalls jobs. */
            if (duration_parse (val, &ms) < 0 || ms < 10 || ms > 60000) {
                snprintf (err, errlen,
                          "ibcr: plugstack.conf: timeout=%s: give a duration "
                          "from 10ms to 60s, e.g. timeout=2s or timeout=500ms",
                          val);
                return -1;
            }
            a->timeout_ms = ms;
        } else if (KEY ("term_wait")) {
            uint64_t ms;
            if (!strcmp (val, "0"))
                ms = 0;
            else if (duration_parse (val, &ms) < 0 || ms > 3600000) {
                snprintf (err, errlen,
                          "ibcr: plugstack.conf: term_wait=%s: give a duration "
                          "up to 1h, e.g. term_wait=2m, or 0 to pass SIGTERM on at once",
                          val);
                return -1;
            }
            a->term_wait_ms = ms;
        } else {
            snprintf (err, errlen,
                      "ibcr: plugstack.conf: unknown argument '%.*s' "
                      "(known: %s)",
                      (int)klen, arg, SP_KNOWN);
            return -1;
        }
#undef KEY
    }
    return 0;
}
