/* ckpt_proto.h - the checkpoint messages between libibcr and its
 * coordinator (ibcrd, or t/ibcr/coord in the tests).
 *
 * Transport: the unix socket named by $IBCR_SOCKET, framed and versioned by
 * lib/common/proto.h (4-byte big-endian length + one JSON object with
 * "version":1 and "type").  libibcr connects at its first verbs call and
 * then only answers.  Every process that uses verbs connects on its own
 * (a forked child, a second program of the same task): the coordinator
 * takes each of them through every phase, and knows it by the kernel's
 * SO_PEERCRED, not by the hello's "pid".  Every request carries "gen" (the generation number);
 * every reply repeats it.  A failed step is answered with proto_error()
 * ("type":"error", "what": the request type) and the coordinator must abort.
 *
 *  libibcr -> coordinator, once after connecting:
 *    "ibcr-hello"  {"pid":N, "rank":R}      R from IBCR_RANK / SLURM_PROCID, -1
 *
 *  coordinator -> libibcr, in this order for one generation:
 *    "ckpt-quiesce"  {}            application threads stop at the gate
 *       <- "ckpt-quiesced"
 *    "ckpt-drain"  {"round":K}     poll every CQ into private buffers
 *       <- "ckpt-drain-report" {"round":K, "rank":R, "qps":[QP...]}
 *          QP = {"vlid","vqpn","rqpn","type":"rc"|"uc"|"ud","has_peer":0|1,
 *                "reset":0|1 (moved to RESET, not connected since),
 *                "err":0|1 (in the error state, or a WR of it failed),
 *                "peer_vlid","peer_vqpn","sq_posted","sq_done","rmsg_posted",
 *                "rmsg_done","recv_done","rq_avail","head_needs_recv":0|1,
 *                "ud_sent":[{"lid","qpn","n"}], "ud_recv":[{"lid","qpn","n"}]}
 *       repeated until drain_done() (drain.h) holds for all reports
 *    "ckpt-release"  {}            destroy every real object, unload backend
 *       <- "ckpt-released" {"fds":N, "verbs_maps":M, "backend_maps":B,
 *                           "rss_kb":R}
 *                                  open fds, mappings of any libibverbs, and
 *                                  of the backend's (M minus the process's
 *                                  own) after release: B must be 0; resident
 *                                  memory (diagnostics for tests)
 *    "ckpt-rebuild"  {"backend":PATH?}  reopen (PATH, else $IBCR_BACKEND,
 *                                  else the default), recreate, new PSNs
 *       <- "ckpt-ids" {"rank":R, "qps":[{"vlid","vqpn","rlid","rqpn","psn"}],
 *                      "mrs":[{"vrkey","rrkey"}]}
 *    "ckpt-connect"  {"procs":[every process's ckpt-ids body]}
 *                                  QPs to their prior state with translated
 *                                  peers; receives reposted, then sends
 *       <- "ckpt-connected"
 *    "ckpt-resume"   {}            application threads released
 *       <- "ckpt-resumed"
 *
 *  Abort before release: "ckpt-resume" right after quiesce or any drain
 *  round resumes with nothing lost (the real objects were never touched).
 *
 *  Query at any time (tests): "ckpt-stat" <- "ckpt-stat" {"rank", "cycles",
 *  "qps":[{"vqpn","rqpn"}], "mrs":[{"vrkey","rrkey"}], "backend":PATH}
 */
#ifndef IBCR_CKPT_PROTO_H
#define IBCR_CKPT_PROTO_H

#define CKPT_HELLO "ibcr-hello"
#define CKPT_QUIESCE "ckpt-quiesce"
#define CKPT_QUIESCED "ckpt-quiesced"
#define CKPT_DRAIN "ckpt-drain"
#define CKPT_DRAIN_REPORT "ckpt-drain-report"
#define CKPT_RELEASE "ckpt-release"
#define CKPT_RELEASED "ckpt-released"
#define CKPT_REBUILD "ckpt-rebuild"
#define CKPT_IDS "ckpt-ids"
#define CKPT_CONNECT "ckpt-connect"
#define CKPT_CONNECTED "ckpt-connected"
#define CKPT_RESUME "ckpt-resume"
#define CKPT_RESUMED "ckpt-resumed"
#define CKPT_STAT "ckpt-stat"

#endif
