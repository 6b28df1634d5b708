/* timeline.h - what the leader saw of a generation: for every node (its
 * own included) and every phase, when the phase's request went out and
 * when the node's answer came back, on the leader's monotonic clock, plus
 * the time the node itself reports having spent in it.
 *
 * It goes into the committed manifest ("timeline") and, for the last
 * generation of the job committed or not, into a file of the leader's
 * staging that ibcrd reads when the worker ends, for "ibcr status".
 * Times are milliseconds from the generation's start ("start_mono_ms",
 * CLOCK_MONOTONIC, and "start_wall", the wall clock at that moment).
 * A phase asked several times (drain rounds) spans its first request to
 * its last answer and counts the rounds.
 */
#ifndef IBCRD_TIMELINE_H
#define IBCRD_TIMELINE_H

#include <json-c/json.h>

#include "phase.h"

struct gen_span {
    double start, end; /* mono_ms_f () of the first request, last answer */
    double node_ms;    /* what the node reports it spent, summed */
    int n;             /* requests answered */
    int failed;        /* it failed or did not answer */
    int open;          /* a request is out */
};

/* spans[] has PHASE_COUNT entries, one per phase (phase.h). */
void timeline_open (struct gen_span *spans, enum gen_phase phase, double now);
void timeline_close (struct gen_span *spans, enum gen_phase phase, double now, double node_ms,
                     int failed);

struct gen;

/* {"start_wall", "start_mono_ms", "total_ms", "requests" (to members),
 * "fanout_cpu_ms" (the leader's CPU in sending and reading them, MUNGE
 * included), "begin_cpu_ms" (of which gen-begin's), "fanout", "levels" (the
 * tree's, fanout.h), "nodes":[{"node", "leader", "parent" (the node that
 * relayed to it), "phases":{NAME:{"start_ms","end_ms","node_ms","count"
 * [,"failed"]}}}]}.  A member's times below the leader's children are
 * relayed: each node tells its parent its subtree's times relative to
 * when its request came, so clocks of different nodes never mix. */
json_object *timeline_json (const struct gen *g);

/* Leader: write {"generation", "result", ["error"], "timeline"} as
 * <staging>/.timelines/<job>.json (root's folder; by fd, replaced whole);
 * a restart's rebuild (gen.h's GEN_RESTORED: result "resumed" or
 * "failed") as <staging>/.restores/<job>.json, whose timeline also has
 * each node's "restore" phase: its tasks' CRIU restores, before the
 * generation's start (negative times), as long as each node's restarter
 * measured them.  Failures are logged only. */
void timeline_save (const struct gen *g, int committed);

/* The daemon: that file's content for job (restore: the restart's), or
 * NULL. */
json_object *timeline_load (const char *staging, const char *job, int restore);

#endif
