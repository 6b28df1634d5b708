/* tap.h - a small TAP producer for ibcr's C unit tests.
 *
 * plan(N) or plan(NO_PLAN)+done_testing(); ok(cond, fmt, ...) prints
 * "ok N - ..." or "not ok N - ..."; diag() writes "# ..." lines; BAIL_OUT
 * aborts the whole run.  exit_status() is what main() returns: non-zero
 * when any test failed or the plan was not met.
 */
#ifndef IBCR_TAP_H
#define IBCR_TAP_H

#define NO_PLAN (-1)

void plan (int n);
int ok_at (int cond, const char *file, int line, const char *fmt, ...)
    __attribute__ ((format (printf, 4, 5)));
#define ok(cond, ...) ok_at (!!(cond), __FILE__, __LINE__, __VA_ARGS__)
void skip (int n, const char *fmt, ...) __attribute__ ((format (printf, 2, 3)));
void diag (const char *fmt, ...) __attribute__ ((format (printf, 1, 2)));
void BAIL_OUT (const char *fmt, ...) __attribute__ ((format (printf, 1, 2), noreturn));
void done_testing (void);
int exit_status (void);

#endif
