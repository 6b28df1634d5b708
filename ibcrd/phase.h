/* phase.h - the phases of a generation, by name: the one list that the
 * leader's sequence (gen.c), each phase's own file (phase_NAME.c: the
 * leader's, this node's and a member's part; gen.c's table), its requests
 * to the members (fanout.c, on the wire as "gen-phase" {"phase": NAME}),
 * a member's worker (gen_member.c), the timeline (timeline.h), the progress messages to the asker and the workers'
 * reports to the daemon (worker.h) all use.
 *
 * The names are the wire format: an ibcrd of another version knows a
 * phase by its name, never by its number, so the enum may be reordered
 * or grown, a name never changed.
 *
 * A checkpoint runs begin, quiesce, drain (in rounds), release, dump,
 * then (when the job runs on) rebuild, connect, resume, then copy and
 * commit, then end.  A restart's rebuild (gen.h's GEN_RESTORED) runs
 * begin, rebuild, connect, resume, end.  abort undoes any of them.
 */
#ifndef IBCRD_PHASE_H
#define IBCRD_PHASE_H

enum gen_phase {
    PHASE_BEGIN,   /* members start a worker; the generation is numbered */
    PHASE_QUIESCE, /* application threads stop at libibcr's gate */
    PHASE_DRAIN,   /* rounds of reports until every QP is drained */
    PHASE_RELEASE, /* every real verbs object is destroyed */
    PHASE_DUMP,    /* CRIU dumps each task */
    PHASE_REBUILD, /* verbs objects recreated, their new ids gathered */
    PHASE_CONNECT, /* every process gets every id; QPs reconnected */
    PHASE_RESUME,  /* application threads go on */
    PHASE_COPY,    /* images from staging to storage, durably */
    PHASE_COMMIT,  /* the manifest renamed into place; retention */
    PHASE_END,     /* committed: members clean up and exit */
    PHASE_ABORT,   /* undone everywhere */
    PHASE_RESTORE, /* a restart: CRIU restores the tasks (timeline only,
                           before begin; never asked of a member) */
    PHASE_COUNT
};

/* The phase's name ("dump"); "?" for a value out of range. */
const char *phase_name (int phase);

/* The phase named name, or -1 (NULL or unknown). */
int phase_from_name (const char *name);

#endif
