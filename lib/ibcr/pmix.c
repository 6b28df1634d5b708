/* pmix.c - an MPI rank's PMIx connection through the plugin's relay
 * (common/pmi.h): the one libc function libibcr stands in for.
 *
 * When the task was given the relay's end (IBCR_PMIX_FD) and a TCP
 * socket of the application connects to the address of the step's PMIx
 * server (PMIX_SERVER_URI*), that end takes the socket's place and the
 * connect succeeds at once: the relay outside the dumped tree connects
 * to the server on the first bytes it reads.  Once per process; every
 * other connect is the system's.
 */
#include "config.h"

#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "common/pmi.h"
#include "ibcr.h"

static int pmix_relay_taken;

/* Is sa, a TCP peer of fd, the step's PMIx server?  The relay's end when
 * it is and one was given, else -1. */
static int pmix_relay_fd (int fd, const struct sockaddr *sa, socklen_t len)
{
    const struct sockaddr_in *in = (const struct sockaddr_in *)sa;
    const char *v = getenv (PMIX_RELAY_ENV);
    struct sockaddr_in srv;
    struct stat sb;
    int type = 0, ours = 0;
    socklen_t tl = sizeof (type);
    char *end;
    long relay;

    if (!v || !sa || len < (socklen_t)sizeof (*in) || sa->sa_family != AF_INET)
        return -1;
    for (int i = 0; pmix_uri_vars[i] && !ours; i++)
        ours = pmix_uri_addr (getenv (pmix_uri_vars[i]), &srv) == 0 && srv.sin_port == in->sin_port
            && srv.sin_addr.s_addr == in->sin_addr.s_addr;
    relay = strtol (v, &end, 10);
    if (!ours || end == v || *end || relay < 3 || relay > 65535 || relay == fd
        || fstat ((int)relay, &sb) < 0 || !S_ISSOCK (sb.st_mode)
        || getsockopt (fd, SOL_SOCKET, SO_TYPE, &type, &tl) < 0 || type != SOCK_STREAM
        || __atomic_exchange_n (&pmix_relay_taken, 1, __ATOMIC_SEQ_CST))
        return -1;
    return (int)relay;
}

__attribute__ ((visibility ("default"))) int connect (int fd, const struct sockaddr *sa,
                                                      socklen_t len)
{
    int relay = pmix_relay_fd (fd, sa, len), fdfl, fl;

    if (relay >= 0) {
        /* The socket's flags stay its own: close-on-exec and O_NONBLOCK. */
        fdfl = fcntl (fd, F_GETFD);
        fl = fcntl (fd, F_GETFL);
        if (fdfl >= 0 && fl >= 0 && dup3 (relay, fd, (fdfl & FD_CLOEXEC) ? O_CLOEXEC : 0) == fd
            && fcntl (fd, F_SETFL, fl) == 0) {
            ibcr_debug ("PMIx connection on fd %d goes through the relay (fd %d)", fd, relay);
            return 0;
        }
        ibcr_log ("cannot put the PMIx relay in place of fd %d: %s; connecting directly", fd,
                  strerror (errno));
    }
    return (int)syscall (SYS_connect, fd, sa, len);
}
