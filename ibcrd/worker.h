/* worker.h - a process forked by ibcrd for one generation (gen.h), so
 * that CRIU and the copy to storage never stall the daemon's loop.
 *
 * The worker keeps only what the generation needs: the tasks' libibcr
 * control connections and the asker's connection; everything else (the
 * listening sockets, the lock file) is closed in it, so a daemon killed
 * and restarted meanwhile is not locked out.  The worker outlives a
 * killed daemon on purpose: it still finishes or aborts its generation
 * and resumes the job, instead of leaving it frozen at the gate.
 */
#ifndef IBCRD_WORKER_H
#define IBCRD_WORKER_H

#include <sys/types.h>

#include "gen.h"

/* Where a worker logs: the daemon's destination. */
void worker_set_log (int to_syslog, int level);

/* Fork the worker for g.  It replies to asker_fd (if >= 0) with
 * gen_reply() and exits 0 when the generation committed, 1 when it was
 * aborted.  keep[] are the fds it uses besides asker_fd.  The pid, or -1
 * with errno. */
pid_t worker_start (struct gen *g, int asker_fd, const int *keep, int nkeep);

/* Fork a member node's worker for g (gen_member_serve on g->member_lfd,
 * which it keeps).  The pid, or -1 with errno. */
pid_t worker_start_member (struct gen *g, const int *keep, int nkeep);

/* Fork a plain helper of the daemon (tasks.h's relays): in the child
 * (0 returned) only asker_fd and 0..2 stay open, signals are plain and
 * the log is the daemon's.  The pid in the parent, or -1 with errno. */
pid_t worker_fork (int asker_fd);

#endif
