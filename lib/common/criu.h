/* criu.h - running the criu binary, for ibcrd (dump) and ibcr (restore).
 *
 * CRIU is a separate program: ibcr never links it.  This module runs it
 * with a deadline and, when it fails, surfaces the first error lines of
 * its log and the log's path, which is what a user needs to act.
 */
#ifndef IBCR_COMMON_CRIU_H
#define IBCR_COMMON_CRIU_H

#include <stddef.h>
#include <sys/types.h>

/* Run argv (argv[0] the criu binary) with stdin/stdout on /dev/null and
 * stderr appended to the log 'log' (which criu -o also writes), keeping
 * open across exec only the fds listed in keep[0..nkeep) (for
 * --inherit-fd).  Waits at most timeout_ms (negative: forever), then
 * kills it.  0 when criu exited 0; else -1 with errno (ETIMEDOUT, ENOENT
 * when criu cannot run, EIO when it failed) and in err: what failed, the
 * first error lines of 'log' and its path. */
int criu_run (char *const argv[], const char *log, const int *keep, int nkeep, int timeout_ms,
              char *err, size_t len);

/* Like criu_run, but do not wait: the pid of the started criu, or -1. */
pid_t criu_start (char *const argv[], const char *log, const int *keep, int nkeep);

/* criu_run and criu_start, with criu inside as->ns_pid's namespaces and
 * as as->uid (taskns.h); a user's criu gets --unprivileged and writes
 * its log to stdout ("-o -"), which is 'log', opened by the caller. */
struct taskns_as;
int criu_run_as (char *const argv[], const char *log, const int *keep, int nkeep,
                 const struct taskns_as *as, int timeout_ms, char *err, size_t len);
pid_t criu_start_as (char *const argv[], const char *log, const int *keep, int nkeep,
                     const struct taskns_as *as);

/* Every later "criu dump" started here runs path as its action script
 * (--action-script; NULL: none): ibcrd's own binary, which records at
 * post-dump what CRIU leaves out of the image (imgfiles.h).  The path
 * must name the same file inside the task's mount namespace. */
void criu_set_dump_script (const char *path);

/* The first 'max' lines of log with "Error" in them, joined by " | ",
 * into buf (empty when none). */
void criu_log_errors (const char *log, int max, char *buf, size_t len);

#endif
