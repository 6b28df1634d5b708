/* tasks.h - ibcrd starts and restores tasks on behalf of the connected
 * user ("ibcr run", "ibcr restart"), with the privileged steps done here
 * and everything else as that user.
 *
 * A request is answered by a relay, a process forked for it that takes
 * the client's connection over (the daemon forgets it):
 *
 *   spawn    {job, rank, argv[], env[]}      relay: "spawn-ready"
 *            client: one byte with fds [cwd, stdout, stderr]
 *            relay: "spawned" {init, app}, later "exited" {status}
 *   restore  {job, rank, gen, stopped}       relay: "restore-ready"
 *            {gen, ctl_ino, note}; client: one byte with fds [stdout,
 *            stderr] and libibcr's control connection when ctl_ino > 0
 *            relay: "restored" {gen, init, app}, later "exited" {status}
 *
 * The user is the connection's SO_PEERCRED uid (a restore by root: the
 * generation's owner).  The task gets its own mount and PID namespaces
 * (tasktree.h, as a Slurm task does), joins the client's cgroups, and
 * runs as that user with no capability; a restore goes through the one
 * restore pipeline (restore.h), which refuses a generation of another
 * user.  The client registers the task itself, as any task is
 * registered (jobs.h), so the same rules hold.
 */
#ifndef IBCRD_TASKS_H
#define IBCRD_TASKS_H

#include <json-c/json.h>
#include <sys/types.h>

struct server;
struct client;

json_object *h_spawn (struct server *s, struct client *c, json_object *req);
json_object *h_restore (struct server *s, struct client *c, json_object *req);

/* Answer c's request with fn (s, c, req) in a child of the daemon, so
 * that the daemon's loop never waits on what fn does (storage I/O that a
 * user asks for).  The child is counted as a relay: a user holds at most
 * max_registrations_per_uid of them.  NO_REPLY (the child answers), or an
 * error to send. */
json_object *tasks_in_child (struct server *s, struct client *c, json_object *req,
                             json_object *(*fn) (struct server *, struct client *, json_object *));

/* A child of the daemon ended: 1 when it was a relay (forgotten now). */
int tasks_relay_done (pid_t pid);

#endif
