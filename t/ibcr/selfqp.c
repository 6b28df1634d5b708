/* selfqp.c - see selfqp.h. */
#include "config.h"

#include <errno.h>
#include <stdio.h>
#include <fcntl.h>
#include <string.h>
#include <unistd.h>

#include "selfqp.h"
#include "tap.h"

struct ibv_context *selfqp_open (struct ibv_device ***list, struct ibv_port_attr *pa)
{
    struct ibv_context *ctx;
    int n;

    *list = ibv_get_device_list (&n);
    if (!*list || n < 1)
        BAIL_OUT ("no verbs device (is softib on LD_LIBRARY_PATH?)");
    ctx = ibv_open_device ((*list)[0]);
    if (!ctx || ibv_query_port (ctx, 1, pa))
        BAIL_OUT ("open/query the device: %s", strerror (errno));
    return ctx;
}

int selfqp_connect (struct ibv_qp *qp, uint16_t lid, uint32_t dqpn, unsigned access)
{
    struct ibv_qp_attr a = { .qp_state = IBV_QPS_INIT, .port_num = 1, .qp_access_flags = access };

    if (ibv_modify_qp (qp, &a,
                       IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT | IBV_QP_ACCESS_FLAGS))
        return -1;
    memset (&a, 0, sizeof (a));
    a.qp_state = IBV_QPS_RTR;
    a.path_mtu = IBV_MTU_1024;
    a.dest_qp_num = dqpn;
    a.rq_psn = 0;
    a.max_dest_rd_atomic = 1;
    a.min_rnr_timer = 1;
    a.ah_attr.dlid = lid;
    a.ah_attr.port_num = 1;
    if (ibv_modify_qp (qp, &a,
                       IBV_QP_STATE | IBV_QP_AV | IBV_QP_PATH_MTU | IBV_QP_DEST_QPN | IBV_QP_RQ_PSN
                           | IBV_QP_MAX_DEST_RD_ATOMIC | IBV_QP_MIN_RNR_TIMER))
        return -1;
    memset (&a, 0, sizeof (a));
    a.qp_state = IBV_QPS_RTS;
    a.timeout = 14;
    a.retry_cnt = 7;
    a.rnr_retry = 7; /* retry for ever: a SEND may wait in RNR */
    a.sq_psn = 0;
    a.max_rd_atomic = 1;
    return ibv_modify_qp (qp, &a,
                          IBV_QP_STATE | IBV_QP_TIMEOUT | IBV_QP_RETRY_CNT | IBV_QP_RNR_RETRY
                              | IBV_QP_SQ_PSN | IBV_QP_MAX_QP_RD_ATOMIC);
}

void selfqp_handshake (const char *ready, const char *go)
{
    int fd = open (ready, O_CREAT | O_WRONLY, 0644);

    if (fd >= 0)
        close (fd);
    /* The checkpoint cycle happens now, while this thread sleeps. */
    for (int i = 0; access (go, F_OK) != 0; i++) {
        if (i > 30000)
            BAIL_OUT ("no %s after 60 s", go);
        usleep (2000);
    }
}

void selfqp_write_addr (const char *dir, const char *role, uint16_t lid, uint32_t qpn)
{
    char path[4096], tmp[4200];
    snprintf (path, sizeof (path), "%s/%s.addr", dir, role);
    snprintf (tmp, sizeof (tmp), "%s.tmp", path);
    FILE *f = fopen (tmp, "w");
    if (!f || fprintf (f, "%u %u\n", lid, qpn) < 0 || fclose (f) != 0 || rename (tmp, path) != 0)
        BAIL_OUT ("cannot write %s: %s", path, strerror (errno));
}

void selfqp_read_addr (const char *dir, const char *role, unsigned *lid, unsigned *qpn)
{
    char path[4096];
    snprintf (path, sizeof (path), "%s/%s.addr", dir, role);
    for (int i = 0;; i++) {
        FILE *f = fopen (path, "r");
        if (f) {
            int n = fscanf (f, "%u %u", lid, qpn);
            fclose (f);
            if (n == 2)
                return;
            BAIL_OUT ("%s: want \"LID QPN\"", path);
        }
        if (i > 15000)
            BAIL_OUT ("no %s after 30 s", path);
        usleep (2000);
    }
}

void selfqp_touch (const char *dir, const char *name)
{
    char path[4096];
    snprintf (path, sizeof (path), "%s/%s", dir, name);
    FILE *f = fopen (path, "w");
    if (!f || fclose (f) != 0)
        BAIL_OUT ("cannot create %s: %s", path, strerror (errno));
}
