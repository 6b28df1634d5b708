/*
 * strings.c - the name and rate helpers of the verbs ABI
 * (ibv_*_str, ibv_rate_to_mult, ibv_rate_to_mbps and their inverses).
 * Pure functions, no state.
 */
#include "config.h"

#include "softib.h"

const char *sib_wc_status_str (enum ibv_wc_status st)
{
    static const char *const s[] = {
        [IBV_WC_SUCCESS] = "success",
        [IBV_WC_LOC_LEN_ERR] = "local length error",
        [IBV_WC_LOC_QP_OP_ERR] = "local QP operation error",
        [IBV_WC_LOC_EEC_OP_ERR] = "local EE context operation error",
        [IBV_WC_LOC_PROT_ERR] = "local protection error",
        [IBV_WC_WR_FLUSH_ERR] = "Work Request Flushed Error",
        [IBV_WC_MW_BIND_ERR] = "memory management operation error",
        [IBV_WC_BAD_RESP_ERR] = "bad response error",
        [IBV_WC_LOC_ACCESS_ERR] = "local access error",
        [IBV_WC_REM_INV_REQ_ERR] = "remote invalid request error",
        [IBV_WC_REM_ACCESS_ERR] = "remote access error",
        [IBV_WC_REM_OP_ERR] = "remote operation error",
        [IBV_WC_RETRY_EXC_ERR] = "transport retry counter exceeded",
        [IBV_WC_RNR_RETRY_EXC_ERR] = "RNR retry counter exceeded",
        [IBV_WC_LOC_RDD_VIOL_ERR] = "local RDD violation error",
        [IBV_WC_REM_INV_RD_REQ_ERR] = "remote invalid RD request",
        [IBV_WC_REM_ABORT_ERR] = "aborted error",
        [IBV_WC_INV_EECN_ERR] = "invalid EE context number",
        [IBV_WC_INV_EEC_STATE_ERR] = "invalid EE context state",
        [IBV_WC_FATAL_ERR] = "fatal error",
        [IBV_WC_RESP_TIMEOUT_ERR] = "response timeout error",
        [IBV_WC_GENERAL_ERR] = "general error",
        [IBV_WC_TM_ERR] = "TM error",
        [IBV_WC_TM_RNDV_INCOMPLETE] = "TM software rendezvous",
    };

    if ((unsigned)st < sizeof (s) / sizeof (s[0]) && s[st])
        return s[st];
    return "unknown";
}

const char *sib_event_str (enum ibv_event_type ev)
{
    static const char *const s[] = {
        [IBV_EVENT_CQ_ERR] = "CQ error",
        [IBV_EVENT_QP_FATAL] = "local work queue catastrophic error",
        [IBV_EVENT_QP_REQ_ERR] = "invalid request local work queue "
                                 "error",
        [IBV_EVENT_QP_ACCESS_ERR] = "local access violation work "
                                    "queue error",
        [IBV_EVENT_COMM_EST] = "communication established",
        [IBV_EVENT_SQ_DRAINED] = "send queue drained",
        [IBV_EVENT_PATH_MIG] = "path migrated",
        [IBV_EVENT_PATH_MIG_ERR] = "path migration request error",
        [IBV_EVENT_DEVICE_FATAL] = "local catastrophic error",
        [IBV_EVENT_PORT_ACTIVE] = "port active",
        [IBV_EVENT_PORT_ERR] = "port error",
        [IBV_EVENT_LID_CHANGE] = "LID change",
        [IBV_EVENT_PKEY_CHANGE] = "P_Key change",
        [IBV_EVENT_SM_CHANGE] = "SM change",
        [IBV_EVENT_SRQ_ERR] = "SRQ catastrophic error",
        [IBV_EVENT_SRQ_LIMIT_REACHED] = "SRQ limit reached",
        [IBV_EVENT_QP_LAST_WQE_REACHED] = "last WQE reached",
        [IBV_EVENT_CLIENT_REREGISTER] = "client reregistration",
        [IBV_EVENT_GID_CHANGE] = "GID table change",
        [IBV_EVENT_WQ_FATAL] = "WQ fatal",
    };

    if ((unsigned)ev < sizeof (s) / sizeof (s[0]) && s[ev])
        return s[ev];
    return "unknown";
}

SIB_EXPORT const char *ibv_wc_status_str (enum ibv_wc_status st)
{
    return sib_wc_status_str (st);
}

SIB_EXPORT const char *ibv_event_type_str (enum ibv_event_type ev)
{
    return sib_event_str (ev);
}

SIB_EXPORT const char *ibv_node_type_str (enum ibv_node_type t)
{
    switch (t) {
    case IBV_NODE_CA:
        return "InfiniBand channel adapter";
    case IBV_NODE_SWITCH:
        return "InfiniBand switch";
    case IBV_NODE_ROUTER:
        return "InfiniBand router";
    case IBV_NODE_RNIC:
        return "iWARP NIC";
    case IBV_NODE_USNIC:
        return "usNIC";
    case IBV_NODE_USNIC_UDP:
        return "usNIC UDP";
    case IBV_NODE_UNSPECIFIED:
        return "unspecified";
    default:
        return "unknown";
    }
}

SIB_EXPORT const char *ibv_port_state_str (enum ibv_port_state s)
{
    switch (s) {
    case IBV_PORT_NOP:
        return "no state change (NOP)";
    case IBV_PORT_DOWN:
        return "down";
    case IBV_PORT_INIT:
        return "init";
    case IBV_PORT_ARMED:
        return "armed";
    case IBV_PORT_ACTIVE:
        return "active";
    case IBV_PORT_ACTIVE_DEFER:
        return "active defer";
    default:
        return "unknown";
    }
}

/* (rate enum, multiple of 2.5 Gb/s, Mb/s) */
static const struct {
    enum ibv_rate rate;
    int mult;
    int mbps;
} sib_rates[] = {
    { IBV_RATE_2_5_GBPS, 1, 2500 },     { IBV_RATE_5_GBPS, 2, 5000 },
    { IBV_RATE_10_GBPS, 4, 10000 },     { IBV_RATE_14_GBPS, 0, 14062 },
    { IBV_RATE_20_GBPS, 8, 20000 },     { IBV_RATE_25_GBPS, 10, 25781 },
    { IBV_RATE_30_GBPS, 12, 30000 },    { IBV_RATE_40_GBPS, 16, 40000 },
    { IBV_RATE_50_GBPS, 20, 53125 },    { IBV_RATE_56_GBPS, 0, 56250 },
    { IBV_RATE_60_GBPS, 24, 60000 },    { IBV_RATE_80_GBPS, 32, 80000 },
    { IBV_RATE_100_GBPS, 40, 103125 },  { IBV_RATE_112_GBPS, 0, 112500 },
    { IBV_RATE_120_GBPS, 48, 120000 },  { IBV_RATE_168_GBPS, 0, 168750 },
    { IBV_RATE_200_GBPS, 80, 206250 },  { IBV_RATE_300_GBPS, 120, 309375 },
    { IBV_RATE_28_GBPS, 11, 28125 },    { IBV_RATE_400_GBPS, 160, 425000 },
    { IBV_RATE_600_GBPS, 240, 637500 },
};

#define NRATES (sizeof (sib_rates) / sizeof (sib_rates[0]))

SIB_EXPORT int ibv_rate_to_mult (enum ibv_rate rate)
{
    for (unsigned i = 0; i < NRATES; i++)
        if (sib_rates[i].rate == rate)
            return sib_rates[i].mult ? sib_rates[i].mult : -1;
    return -1;
}

SIB_EXPORT enum ibv_rate mult_to_ibv_rate (int mult)
{
    for (unsigned i = 0; i < NRATES; i++)
        if (sib_rates[i].mult && sib_rates[i].mult == mult)
            return sib_rates[i].rate;
    return IBV_RATE_MAX;
}

SIB_EXPORT int ibv_rate_to_mbps (enum ibv_rate rate)
{
    for (unsigned i = 0; i < NRATES; i++)
        if (sib_rates[i].rate == rate)
            return sib_rates[i].mbps;
    return -1;
}

SIB_EXPORT enum ibv_rate mbps_to_ibv_rate (int mbps)
{
    for (unsigned i = 0; i < NRATES; i++)
        if (sib_rates[i].mbps == mbps)
            return sib_rates[i].rate;
    return IBV_RATE_MAX;
}
