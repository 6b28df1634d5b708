/* ckpt.h - the checkpoint operations of one process, in protocol order.
 *
 * The same path serves periodic checkpoints (process keeps running) and
 * restarts (CRIU restored the process between release and rebuild).  All
 * but ckpt_quiesce require the gate to be closed; only the control thread
 * calls them, one at a time.
 */
#ifndef IBCR_CKPT_H
#define IBCR_CKPT_H

#include <stdbool.h>
#include <json-c/json.h>

int ckpt_quiesce (void);
/* Poll every CQ into private buffers; add this process's counters to
 * 'report' ("qps" array).  0 or -1+errno. */
int ckpt_drain (json_object *report);
/* Destroy every real object, close devices, unload the backend. */
int ckpt_release (void);
/* Load a backend (path may be NULL), recreate every object, fill 'ids'
 * with this process's new real ids. */
int ckpt_rebuild (const char *backend, json_object *ids);
/* Load the job's id table, connect QPs, repost receives then sends. */
int ckpt_connect (json_object *procs);
/* True from a release until a connect succeeded: the application's
 * objects have no real counterpart then. */
bool ckpt_is_released (void);
/* Re-arm notifications and let application threads go. */
int ckpt_resume (void);
/* Ids and counts for tests ("ckpt-stat"). */
int ckpt_stat (json_object *out);
/* Open fds of the process (diagnostic after release). */
int ckpt_count_fds (void);
/* Resident set size in KiB (diagnostic: leaks across cycles), or -1. */
long ckpt_rss_kb (void);
/* Lines of /proc/self/maps containing 'needle' (diagnostic). */
int ckpt_count_maps (const char *needle);

#endif
