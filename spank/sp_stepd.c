/* sp_stepd.c - see sp_stepd.h.
 *
 * Both hooks run in the process slurmstepd forked for one task, so the
 * state below is that task's alone.  Decisions that need root (the
 * namespace) or must come before it (is ibcrd there at all?) are taken in
 * task_init_privileged, where stderr is not yet the job's: any message is
 * held and printed from task_init, where the user will see it.
 *
 * Must never touch a step that does not have --checkpoint-ib, nor the
 * batch script unless batch_step=yes, nor the extern and interactive
 * steps.
 */
#include "config.h"

#include <errno.h>
#include <limits.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <slurm/slurm.h>
#include <slurm/slurm_errno.h>

#include "common/clock.h"
#include "common/conf.h"
#include "common/expand.h"
#include "common/pmi.h"
#include "common/proc.h"
#include "common/tasktree.h"
#include "sp_opt.h"
#include "sp_reg.h"
#include "sp_pmix.h"
#include "sp_restore.h"
#include "sp_stepd.h"

enum sp_state {
    SP_OFF = 0,        /* not ours: leave the task exactly as it is */
    SP_ACTIVE,         /* namespace made, ibcrd answered */
    SP_UNPROTECTED,    /* option given, but ibcr cannot protect: warn */
    SP_FAILED,         /* option given, cannot protect, admin says fail */
    SP_RESTORE,        /* requeued: restore the image instead of exec */
    SP_RESTORE_FAILED, /* requeued, an image is due but cannot be restored */
};

static struct {
    enum sp_state state;
    char why[8192];        /* held for task_init */
    char socket[PATH_MAX]; /* expanded for this node */
    char libibcr[PATH_MAX];
    char conf[PATH_MAX]; /* ibcrd.conf, expanded for this node */
    int conf_given;      /* plugstack.conf conf= named it */
    char note[4096];     /* for the job's stderr in task_init, "" none */
    struct restore_plan plan;
    int restore_fd;              /* to the restorer (SP_RESTORE) */
    int nctl;                    /* libibcr's control sockets to hand in: one per */
    int ctl_fd[RESTORE_MAX_CTL]; /* process that used verbs at the dump */
    int fd;                      /* connection to ibcrd, held by the waiter */
    struct sp_pmix pmix;         /* the task's PMIx relay (sp_pmix.h) */
    enum sp_on_down on_down;
    int timeout_ms;
    int term_wait_ms;
    struct sp_task_id id;
} sp_st = { .fd = -1, .restore_fd = -1, .pmix = SP_PMIX_INIT };

/* How long a restored task waits for its verbs objects to be rebuilt:
 * on a multi-node job, until every rank is back. */
#define SP_STEPD_RESUME_MS 180000

/* One line on the job's stderr (the task's fd 2 in task_init) and the
 * same in slurmd's log. */
static void sp_stepd_say (int is_error, const char *fmt, ...)
    __attribute__ ((format (printf, 2, 3)));
static void sp_stepd_say (int is_error, const char *fmt, ...)
{
    char buf[10240];
    va_list ap;

    va_start (ap, fmt);
    (void)vsnprintf (buf, sizeof (buf), fmt, ap);
    va_end (ap);
    dprintf (STDERR_FILENO, "%s\n", buf);
    if (is_error)
        slurm_error ("%s", buf);
    else
        slurm_info ("%s", buf);
}

static int sp_stepd_ids (spank_t sp, struct sp_task_id *id, uint32_t *stepid)
{
    uint32_t job, rank, ntasks;
    const char *node;
    int local;
    uid_t uid;

    if (spank_get_item (sp, S_JOB_ID, &job) != ESPANK_SUCCESS
        || spank_get_item (sp, S_JOB_STEPID, stepid) != ESPANK_SUCCESS
        || spank_get_item (sp, S_TASK_GLOBAL_ID, &rank) != ESPANK_SUCCESS
        || spank_get_item (sp, S_TASK_ID, &local) != ESPANK_SUCCESS
        || spank_get_item (sp, S_JOB_TOTAL_TASK_COUNT, &ntasks) != ESPANK_SUCCESS
        || spank_get_item (sp, S_JOB_UID, &uid) != ESPANK_SUCCESS)
        return -1;
    snprintf (id->job, sizeof (id->job), "%u", job);
    if (*stepid == SLURM_BATCH_SCRIPT)
        snprintf (id->step, sizeof (id->step), "batch");
    else
        snprintf (id->step, sizeof (id->step), "%u", *stepid);
    id->rank = rank;
    id->local = (uint32_t)local;
    id->ntasks = ntasks;
    id->uid = uid;
    /* slurmstepd puts its node's Slurm name in its own environment; it
     * differs from the host name when one host runs several slurmd. */
    if ((node = getenv ("SLURMD_NODENAME")) && *node)
        snprintf (id->node, sizeof (id->node), "%s", node);
    else if (expand_hostname (id->node, sizeof (id->node)) < 0)
        snprintf (id->node, sizeof (id->node), "unknown");
    id->interval_ms = sp_opt_get ()->interval_ms;
    return 0;
}

/* On a step over several nodes, rank 0's ibcrd leads the job's
 * generations: the others name it ("NODE@ADDR", the Slurm address of the
 * step's first node, which holds task 0).  "" on that node or when alone;
 * -1 with why when it cannot be found. */
static int sp_stepd_leader (spank_t sp, struct sp_task_id *id)
{
    uint32_t nnodes = 0, nodeid = 0;
    char list[8192];
    node_info_msg_t *ni = NULL;
    hostlist_t hl;
    char *first;

    id->leader[0] = '\0';
    if (spank_get_item (sp, S_JOB_NNODES, &nnodes) != ESPANK_SUCCESS
        || spank_get_item (sp, S_JOB_NODEID, &nodeid) != ESPANK_SUCCESS || nnodes <= 1
        || nodeid == 0)
        return 0;
    if (spank_getenv (sp, "SLURM_STEP_NODELIST", list, sizeof (list)) != ESPANK_SUCCESS
        && spank_getenv (sp, "SLURM_NODELIST", list, sizeof (list)) != ESPANK_SUCCESS) {
        snprintf (sp_st.why, sizeof (sp_st.why),
                  "the step's node list is not known "
                  "(SLURM_STEP_NODELIST): rank 0's ibcrd cannot be named");
        return -1;
    }
    if (!(hl = slurm_hostlist_create (list)) || !(first = slurm_hostlist_shift (hl))) {
        if (hl)
            slurm_hostlist_destroy (hl);
        snprintf (sp_st.why, sizeof (sp_st.why), "cannot read the step's node list '%.200s'", list);
        return -1;
    }
    slurm_hostlist_destroy (hl);
    /* One question to slurmctld per task start of a multi-node step: the
     * node's address is what the member's ibcrd must reach. */
    if (slurm_load_node_single (&ni, first, SHOW_ALL) != SLURM_SUCCESS || !ni
        || ni->record_count < 1 || !ni->node_array[0].node_addr) {
        snprintf (sp_st.why, sizeof (sp_st.why),
                  "cannot ask slurmctld for the address of "
                  "node %s (rank 0's): %s",
                  first, slurm_strerror (slurm_get_errno ()));
        if (ni)
            slurm_free_node_info_msg (ni);
        free (first);
        return -1;
    }
    snprintf (id->leader, sizeof (id->leader), "%.60s@%.250s", first, ni->node_array[0].node_addr);
    slurm_free_node_info_msg (ni);
    free (first);
    return 0;
}

/* Expand %n/%h of a plugstack path for this node into dst. */
static int sp_stepd_expand (const char *key, const char *in, const char *node, char *dst,
                            size_t len)
{
    char bad[3] = "";
    char *out;

    if (!(out = expand_path (in, node, NULL, bad)) || strlen (out) >= len) {
        snprintf (sp_st.why, sizeof (sp_st.why),
                  "plugstack.conf %s=%s cannot be expanded "
                  "for node %s: %s",
                  key, in, node,
                  out        ? "too long"
                      : *bad ? "unknown escape"
                             : strerror (errno));
        free (out);
        return -1;
    }
    strcpy (dst, out);
    free (out);
    return 0;
}

/* The task cannot be protected: hold why, and act per on_daemon_down. */
static int sp_stepd_cannot (void)
{
    sp_st.state = sp_st.on_down == SP_DOWN_FAIL ? SP_FAILED : SP_UNPROTECTED;
    if (sp_st.fd >= 0) {
        (void)close (sp_st.fd);
        sp_st.fd = -1;
    }
    return 0;
}

/* Is this a run of a requeued job?  Slurm's restart count for the job
 * (slurm_load_job, resolved from slurmstepd's own libslurm), never
 * SLURM_RESTART_COUNT from the job's environment: the user sets that one
 * (srun --export), and would make a fresh step restore.  When slurmctld
 * cannot say, the step starts afresh and says why. */
static int sp_stepd_restarting (spank_t sp)
{
    job_info_msg_t *msg = NULL;
    uint32_t jobid = 0;
    int cnt = -1;

    if (spank_get_item (sp, S_JOB_ID, &jobid) != ESPANK_SUCCESS || !jobid)
        return 0;
    if (slurm_load_job (&msg, jobid, SHOW_ALL) == SLURM_SUCCESS && msg && msg->record_count >= 1)
        cnt = msg->job_array[0].restart_cnt;
    if (msg)
        slurm_free_job_info_msg (msg);
    if (cnt < 0) {
        slurm_error ("ibcr: job %u: cannot ask slurmctld whether the job was requeued (%s): "
                     "starting afresh, not from a checkpoint",
                     jobid, slurm_strerror (slurm_get_errno ()));
        return 0;
    }
    return cnt > 0;
}

/* Which image this task restores: 1 (plan set), 0 none yet, -1 failed
 * (state SP_RESTORE_FAILED, why held). */
static int sp_stepd_pick (void)
{
    struct sp_restore_in in = {
        .conf = sp_st.conf,
        .node = sp_st.id.node,
        .job = sp_st.id.job,
        .step = sp_st.id.step,
        .rank = sp_st.id.rank,
        .ntasks = sp_st.id.ntasks,
        .conf_given = sp_st.conf_given,
    };
    char err[4096];
    int rc;

    rc = sp_restore_pick (&in, &sp_st.plan, sp_st.note, sizeof (sp_st.note), err, sizeof (err));
    if (rc < 0) {
        snprintf (sp_st.why, sizeof (sp_st.why), "%s", err);
        sp_st.state = SP_RESTORE_FAILED;
    } else if (rc == 0) {
        snprintf (sp_st.note, sizeof (sp_st.note),
                  "the job was requeued before its first "
                  "checkpoint: starting afresh");
        /* ibcrd, the authority on storage, checks that at registration:
         * if it holds generations of this job, this looked elsewhere. */
        snprintf (sp_st.id.fresh_after, sizeof (sp_st.id.fresh_after), "%s", sp_st.plan.looked);
    }
    return rc;
}

/* The control sockets not handed in (the restored tree holds its own). */
static void sp_stepd_close_ctl (void)
{
    for (int i = 0; i < sp_st.nctl; i++)
        (void)close (sp_st.ctl_fd[i]);
    sp_st.nctl = 0;
}

/* Is fd one of the control sockets to hand in? */
static int sp_stepd_is_ctl (long fd)
{
    for (int i = 0; i < sp_st.nctl; i++)
        if (sp_st.ctl_fd[i] == fd)
            return 1;
    return 0;
}

/* As root: fork the restorer, and reach ibcrd to register the restored
 * task (a restore goes on without it, unprotected). */
static int sp_stepd_restore_prepare (void)
{
    char err[1024];

    sp_st.id.restore_ms = -1;
    if ((sp_st.restore_fd = sp_restore_prepare (&sp_st.plan, err, sizeof (err))) < 0) {
        snprintf (sp_st.why, sizeof (sp_st.why), "%s", err);
        sp_st.state = SP_RESTORE_FAILED;
        return 0;
    }
    if ((sp_st.fd = sp_reg_open (sp_st.socket, sp_st.timeout_ms, err, sizeof (err))) < 0)
        snprintf (sp_st.why, sizeof (sp_st.why), "%s", err);
    /* A verbs task: without its control sockets back (one per process
     * that used verbs), libibcr could never rebuild, and the restored
     * program would wait at the gate forever. */
    while (sp_st.nctl < sp_st.plan.nctl) {
        int cfd = sp_st.fd < 0
            ? -1
            : sp_reg_ctl_attach (sp_st.socket, &sp_st.id, sp_st.timeout_ms, err, sizeof (err));
        if (cfd < 0) {
            if (sp_st.fd >= 0)
                snprintf (sp_st.why, sizeof (sp_st.why), "%s", err);
            sp_st.state = SP_RESTORE_FAILED;
            (void)close (sp_st.restore_fd);
            sp_st.restore_fd = -1;
            sp_stepd_close_ctl ();
            return 0;
        }
        sp_st.ctl_fd[sp_st.nctl++] = cfd;
    }
    sp_st.id.restored = sp_st.plan.nctl > 0;
    sp_st.id.restored_gen = sp_st.plan.gen;
    sp_st.state = SP_RESTORE;
    return 0;
}

int sp_stepd_privileged (spank_t sp, const struct sp_args *a)
{
    const struct sp_opt *o = sp_opt_get ();
    struct stat sb;
    uint32_t stepid;
    char err[1024];

    if (!o->set)
        return 0;
    if (sp_stepd_ids (sp, &sp_st.id, &stepid) < 0) {
        slurm_error ("ibcr: cannot read the job's ids from Slurm; task left unprotected");
        return 0;
    }
    if (stepid == SLURM_EXTERN_CONT || stepid == SLURM_INTERACTIVE_STEP
        || (stepid == SLURM_BATCH_SCRIPT && !a->batch_step))
        return 0;
    if (sp_stepd_leader (sp, &sp_st.id) < 0)
        return sp_stepd_cannot ();
    sp_st.on_down = a->on_down;
    sp_st.timeout_ms = (int)a->timeout_ms;
    sp_st.term_wait_ms = (int)a->term_wait_ms;

    if (sp_stepd_expand ("socket", a->socket, sp_st.id.node, sp_st.socket, sizeof (sp_st.socket))
            < 0
        || sp_stepd_expand ("libibcr", a->libibcr, sp_st.id.node, sp_st.libibcr,
                            sizeof (sp_st.libibcr))
            < 0)
        return sp_stepd_cannot ();
    if (access (a->init, X_OK) < 0) {
        snprintf (sp_st.why, sizeof (sp_st.why),
                  "the task init %s cannot run: %s "
                  "(plugstack.conf init=)",
                  a->init, strerror (errno));
        return sp_stepd_cannot ();
    }
    tasktree_set_init (a->init);
    if (stat (sp_st.libibcr, &sb) < 0 || !S_ISREG (sb.st_mode)) {
        snprintf (sp_st.why, sizeof (sp_st.why),
                  "the checkpoint library %s %s "
                  "(plugstack.conf libibcr=)",
                  sp_st.libibcr, errno == ENOENT ? "does not exist" : "is not a regular file");
        return sp_stepd_cannot ();
    }
    sp_st.conf_given = a->conf[0] != '\0';
    if (sp_stepd_expand ("conf", a->conf[0] ? a->conf : conf_default_path (), sp_st.id.node,
                         sp_st.conf, sizeof (sp_st.conf))
        < 0)
        return sp_stepd_cannot ();
    if (sp_stepd_restarting (sp)) {
        switch (sp_stepd_pick ()) {
        case 1:
            return sp_stepd_restore_prepare ();
        case -1:
            return 0;
        default:
            break; /* nothing checkpointed yet: start afresh */
        }
    }
    /* Ask before making the namespace: a task that will not be protected
     * must not be changed at all. */
    if ((sp_st.fd = sp_reg_open (sp_st.socket, sp_st.timeout_ms, err, sizeof (err))) < 0) {
        snprintf (sp_st.why, sizeof (sp_st.why), "%s", err);
        return sp_stepd_cannot ();
    }
    if (tasktree_prepare (err, sizeof (err)) < 0) {
        /* Not a matter of policy: the node cannot do what ibcr needs. */
        snprintf (sp_st.why, sizeof (sp_st.why), "%s", err);
        sp_st.on_down = SP_DOWN_FAIL;
        return sp_stepd_cannot ();
    }
    sp_st.state = SP_ACTIVE;
    return 0;
}

static int sp_stepd_started (pid_t init, pid_t app, void *arg)
{
    char err[1024];
    int keep[3];

    (void)arg;
    /* The record was kept open by tasktree_start already. */
    (void)sp_pmix_start (&sp_st.pmix, keep);
    if (sp_reg_register (sp_st.fd, &sp_st.id, init, app, sp_st.timeout_ms, err, sizeof (err)) == 0)
        return 0;
    /* Never a matter of policy: starting afresh would lose the job's
     * checkpointed work, and its retention could delete it. */
    if (errno == EEXIST && sp_st.id.fresh_after[0]) {
        sp_stepd_say (1, "ibcr: job %s step %s task %u on %s: %s; the task is not started",
                      sp_st.id.job, sp_st.id.step, sp_st.id.rank, sp_st.id.node, err);
        return -1;
    }
    if (sp_st.on_down == SP_DOWN_FAIL) {
        sp_stepd_say (1,
                      "ibcr: job %s step %s task %u on %s: %s; on_daemon_down=fail: "
                      "the task is not started",
                      sp_st.id.job, sp_st.id.step, sp_st.id.rank, sp_st.id.node, err);
        return -1;
    }
    sp_stepd_say (0,
                  "ibcr: job %s step %s task %u on %s: %s; running UNPROTECTED: "
                  "this task will not be checkpointed",
                  sp_st.id.job, sp_st.id.step, sp_st.id.rank, sp_st.id.node, err);
    return 0;
}

/* In the waiter (ibcr-task), at SIGTERM: a preempted job is checkpointed
 * before its tasks get the signal; ibcrd says when they may.  Whatever
 * goes wrong, the signal goes on: it is never lost, only delayed. */
static void sp_stepd_term (void *arg)
{
    char err[1024];

    (void)arg;
    if (sp_st.fd < 0 || sp_st.term_wait_ms <= 0)
        return;
    if (sp_reg_term (sp_st.fd, &sp_st.id, sp_st.term_wait_ms, err, sizeof (err)) < 0) {
        sp_stepd_say (0,
                      "ibcr: job %s step %s task %u on %s: SIGTERM passed on without a "
                      "final checkpoint: %s",
                      sp_st.id.job, sp_st.id.step, sp_st.id.rank, sp_st.id.node, err);
        /* One try per task: a daemon that did not answer will not now. */
        (void)close (sp_st.fd);
        sp_st.fd = -1;
    }
}

/* The image's MPI rank talked PMI to the dumped step's slurmstepd
 * (common/pmi.h): this step's socket for the task, greeted as the rank's
 * MPI library did at MPI_Init.  The fd, or -1 with err.  PMI_FD comes
 * from the task's environment, which its user may set: it must be a
 * socket whose other end slurmstepd (our parent) made. */
static int sp_stepd_pmi (spank_t sp, char *err, size_t errlen)
{
    char val[32], *end;
    struct ucred cr;
    socklen_t crlen = sizeof (cr);
    struct stat sb;
    long fd;

    if (spank_getenv (sp, "PMI_FD", val, sizeof (val)) != ESPANK_SUCCESS) {
        snprintf (err, errlen,
                  "the checkpointed rank talked to Slurm's PMI (srun "
                  "--mpi=pmi2) and this step has no PMI_FD: run it with --mpi=pmi2 again");
        return -1;
    }
    fd = strtol (val, &end, 10);
    if (end == val || *end || fd < 3 || fd > 65535 || fd == sp_st.restore_fd || sp_stepd_is_ctl (fd)
        || fd == sp_st.fd || fstat ((int)fd, &sb) < 0 || !S_ISSOCK (sb.st_mode)
        || getsockopt ((int)fd, SOL_SOCKET, SO_PEERCRED, &cr, &crlen) < 0 || cr.pid != getppid ()) {
        snprintf (err, errlen, "PMI_FD=%.20s is not slurmstepd's PMI socket", val);
        return -1;
    }
    if (pmi_greet ((int)fd, sp_st.timeout_ms, err, errlen) < 0)
        return -1;
    return (int)fd;
}

/* In task_init, as the user: restore instead of returning to exec. */
static int sp_stepd_restore (spank_t sp)
{
    char err[4096], changed[2048] = "";
    int pmi_fd = -1, keep[4], nkeep = 0;
    pid_t init;

    if (sp_st.note[0])
        sp_stepd_say (0, "ibcr: job %s step %s task %u on %s: %s", sp_st.id.job, sp_st.id.step,
                      sp_st.id.rank, sp_st.id.node, sp_st.note);
    if ((sp_st.plan.pmi_ino > 0 && (pmi_fd = sp_stepd_pmi (sp, err, sizeof (err))) < 0)
        || (sp_st.plan.pmix_ino > 0
            && sp_pmix_reconnect (sp, &sp_st.pmix, sp_st.plan.pmix_hello, sp_st.plan.pmix_hello_len,
                                  sp_st.timeout_ms, err, sizeof (err))
                < 0)) {
        (void)close (sp_st.restore_fd); /* the restorer leaves */
        init = -1;
    } else {
        double t_restore = mono_ms_f ();
        init = sp_restore_run (sp_st.restore_fd, &sp_st.plan, sp_st.ctl_fd, sp_st.nctl, pmi_fd,
                               sp_st.pmix.task_end, err, sizeof (err));
        /* For the leader's restore timeline, as ibcr restart says it. */
        sp_st.id.restore_ms = (int64_t)(mono_ms_f () - t_restore);
    }
    if (init >= 0)
        memcpy (changed, err, sizeof (changed) - 1); /* sp_restore_run */
    sp_stepd_close_ctl ();                           /* the restored tree holds them now */
    if (pmi_fd >= 0)
        (void)close (pmi_fd); /* so does it this one */
    if (init < 0) {
        sp_stepd_say (1,
                      "ibcr: job %s step %s task %u on %s: cannot restore generation "
                      "%d: %s; the task is not started",
                      sp_st.id.job, sp_st.id.step, sp_st.id.rank, sp_st.id.node, sp_st.plan.gen,
                      err);
        return -1;
    }
    sp_st.restore_fd = -1;
    /* init is the restore's holder; what ibcrd dumps next is its child
     * (taskns.h). */
    if (sp_st.fd < 0
        || sp_reg_register (sp_st.fd, &sp_st.id, proc_first_child (init),
                            proc_first_child (proc_first_child (init)), sp_st.timeout_ms, err,
                            sizeof (err))
            < 0)
        sp_stepd_say (0,
                      "ibcr: job %s step %s task %u on %s: restored, but %s; running "
                      "UNPROTECTED: it will not be checkpointed again",
                      sp_st.id.job, sp_st.id.step, sp_st.id.rank, sp_st.id.node,
                      sp_st.fd < 0 ? sp_st.why : err);
    sp_stepd_say (0,
                  "ibcr: job %s step %s task %u on %s: restored from generation %d "
                  "(init pid %ld)%s%s",
                  sp_st.id.job, sp_st.id.step, sp_st.id.rank, sp_st.id.node, sp_st.plan.gen,
                  (long)init, changed[0] ? "; " : "", changed);
    if (sp_st.id.restored
        && sp_reg_resume (sp_st.fd, &sp_st.id, SP_STEPD_RESUME_MS, err, sizeof (err)) < 0) {
        /* Its verbs objects are gone: it could only wait at the gate. */
        sp_stepd_say (1,
                      "ibcr: job %s step %s task %u on %s: restored, but its verbs "
                      "objects were not rebuilt: %s; ending it",
                      sp_st.id.job, sp_st.id.step, sp_st.id.rank, sp_st.id.node, err);
        (void)kill (init, SIGKILL);
        (void)waitpid (init, NULL, 0);
        return -1;
    }
    /* The connection to ibcrd stays open in the waiter: the registration
     * lives as long as it; so does the relay of the rank's PMIx. */
    if (sp_st.fd >= 0)
        keep[nkeep++] = sp_st.fd;
    nkeep += sp_pmix_start (&sp_st.pmix, keep + nkeep);
    tasktree_on_term (sp_stepd_term, NULL);
    tasktree_adopt (init, keep, nkeep);
}

/* Prepend 'lib' to the task's LD_PRELOAD, keeping what the user set. */
static int sp_stepd_preload (spank_t sp, const char *lib)
{
    char cur[4096], val[8192];

    if (spank_getenv (sp, "LD_PRELOAD", cur, sizeof (cur)) == ESPANK_SUCCESS && *cur)
        snprintf (val, sizeof (val), "%s:%s", lib, cur);
    else
        snprintf (val, sizeof (val), "%s", lib);
    return spank_setenv (sp, "LD_PRELOAD", val, 1) == ESPANK_SUCCESS ? 0 : -1;
}

int sp_stepd_task (spank_t sp, const struct sp_args *a)
{
    char err[1024];
    int keep[3], nkeep = 0;

    (void)a;
    switch (sp_st.state) {
    case SP_OFF:
        return 0;
    case SP_UNPROTECTED:
        sp_stepd_say (0,
                      "ibcr: job %s step %s task %u on %s: %s; running UNPROTECTED: "
                      "this task will not be checkpointed (on_daemon_down=warn)",
                      sp_st.id.job, sp_st.id.step, sp_st.id.rank, sp_st.id.node, sp_st.why);
        return 0;
    case SP_FAILED:
        sp_stepd_say (1,
                      "ibcr: job %s step %s task %u on %s: %s; the task is not "
                      "started (on_daemon_down=fail)",
                      sp_st.id.job, sp_st.id.step, sp_st.id.rank, sp_st.id.node, sp_st.why);
        return -1;
    case SP_RESTORE_FAILED:
        sp_stepd_say (1, "ibcr: job %s step %s task %u on %s: %s; the task is not started",
                      sp_st.id.job, sp_st.id.step, sp_st.id.rank, sp_st.id.node, sp_st.why);
        return -1;
    case SP_RESTORE:
        return sp_stepd_restore (sp);
    case SP_ACTIVE:
        break;
    }
    if (sp_st.note[0])
        sp_stepd_say (0, "ibcr: job %s step %s task %u on %s: %s", sp_st.id.job, sp_st.id.step,
                      sp_st.id.rank, sp_st.id.node, sp_st.note);
    if (sp_stepd_preload (sp, sp_st.libibcr) < 0
        || spank_setenv (sp, "IBCR_SOCKET", sp_st.socket, 1) != ESPANK_SUCCESS
        || spank_setenv (sp, "IBCR_CHECKPOINT_INTERVAL", sp_opt_get ()->text, 1)
            != ESPANK_SUCCESS) {
        sp_stepd_say (1, "ibcr: job %s step %s task %u: cannot set the task's environment",
                      sp_st.id.job, sp_st.id.step, sp_st.id.rank);
        return -1;
    }
    /* MPICH's intra-node shared-memory segment is an unlinked file in
     * /dev/shm mapped by every rank of the node: each rank's image would
     * hold its own copy, and the restore of the second one fails (CRIU's
     * ghost file of the first is gone) or the copies are no longer
     * shared.  Protected ranks talk through the network module instead,
     * unless the user said otherwise. */
    if (spank_setenv (sp, "MPIR_CVAR_NOLOCAL", "1", 0) != ESPANK_SUCCESS
        && spank_getenv (sp, "MPIR_CVAR_NOLOCAL", err, sizeof (err)) != ESPANK_SUCCESS) {
        sp_stepd_say (1, "ibcr: job %s step %s task %u: cannot set the task's environment",
                      sp_st.id.job, sp_st.id.step, sp_st.id.rank);
        return -1;
    }
    /* Open MPI's PMIx connection goes through a relay the waiter forks
     * (sp_pmix.h), outside the dumped tree. */
    if (sp_pmix_prepare (sp, &sp_st.pmix, err, sizeof (err)) < 0) {
        sp_stepd_say (1, "ibcr: job %s step %s task %u on %s: %s; the task is not started",
                      sp_st.id.job, sp_st.id.step, sp_st.id.rank, sp_st.id.node, err);
        return -1;
    }
    /* What a protected rank's MPI needs to be checkpointable, each set
     * unless the job set it itself. */
    static const struct {
        const char *name, *value;
    } mpi_env[] = {
        /* Open MPI's posix shmem component, when it probes at MPI_Init,
         * leaves an fd on an unlinked /dev/shm/open_mpi.NNNN of the same
         * name in every rank of a node: their images each hold a ghost
         * copy of it, and the second rank's restore fails on the first's.
         * The mmap component probes without one; nothing else changes
         * unless shared memory is used (which a protected rank cannot
         * carry either). */
        { "OMPI_MCA_shmem", "mmap" },
        /* Open MPI connects to a peer at its first message to it by
         * default, asking the PMIx server for the peer's UCX address then;
         * a restored rank asks the new step's server, which has no such
         * data (it was published to the old one at MPI_Init), and fails
         * ("Failed to receive UCX worker address: Not found").  Above this
         * cutoff every peer is connected in MPI_Init, while the step's own
         * server answers: an endpoint per peer from the start. */
        { "OMPI_MCA_mpi_add_procs_cutoff", "4294967295" },
        /* UCX's timers run on the CPU's time-stamp counter, with unsigned
         * arithmetic: after a restore (later, or on a host whose counter
         * is anywhere else) the time since a peer last answered looks
         * huge, and the UD transport's peer timeout (30 s) and the
         * keepalive (20 s) declare every peer dead, which aborts the
         * rank.  The keepalive off; the peer timeout 30 days ("inf" makes
         * UCX time out at once).  A rank that really dies ends its step
         * anyway. */
        { "UCX_UD_TIMEOUT", "2592000s" },
        { "UCX_KEEPALIVE_INTERVAL", "inf" },
        /* UCX's shared-memory transports between the ranks of a node
         * (sysv and posix segments, cma and knem reaching into a peer's
         * memory) cannot be carried by a dump of one rank, and its TCP
         * transport keeps listeners and connections bound to this node's
         * addresses.  Protected ranks talk through verbs (libibcr's
         * drain and rebuild), the ranks of a node included. */
        { "UCX_TLS", "^shm,tcp" },
    };
    for (size_t i = 0; i < sizeof (mpi_env) / sizeof (mpi_env[0]); i++)
        if (spank_setenv (sp, mpi_env[i].name, mpi_env[i].value, 0) != ESPANK_SUCCESS
            && spank_getenv (sp, mpi_env[i].name, err, sizeof (err)) != ESPANK_SUCCESS) {
            sp_stepd_say (1,
                          "ibcr: job %s step %s task %u: cannot set %s in the task's "
                          "environment",
                          sp_st.id.job, sp_st.id.step, sp_st.id.rank, mpi_env[i].name);
            return -1;
        }
    keep[nkeep++] = sp_st.fd;
    if (sp_st.pmix.relay_end >= 0)
        keep[nkeep++] = sp_st.pmix.relay_end;
    if (sp_st.pmix.memfd >= 0)
        keep[nkeep++] = sp_st.pmix.memfd;
    tasktree_on_term (sp_stepd_term, NULL);
    if (tasktree_start (sp_stepd_started, NULL, keep, nkeep, err, sizeof (err)) < 0) {
        sp_stepd_say (1, "ibcr: job %s step %s task %u on %s: %s; the task is not started",
                      sp_st.id.job, sp_st.id.step, sp_st.id.rank, sp_st.id.node, err);
        return -1;
    }
    /* The application process: the connection is the waiter's alone, and
     * so is the relay's end (close-on-exec besides). */
    (void)close (sp_st.fd);
    sp_st.fd = -1;
    if (sp_st.pmix.relay_end >= 0)
        (void)close (sp_st.pmix.relay_end);
    if (sp_st.pmix.memfd >= 0)
        (void)close (sp_st.pmix.memfd);
    return 0;
}
