/* pmixuri.c - the PMIx server's address (pmi.h), in libcommon: libibcr
 * needs it too. */
#include "config.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>

#include "pmi.h"

const char *const pmix_uri_vars[] = {
    "PMIX_SERVER_URI41", "PMIX_SERVER_URI4", "PMIX_SERVER_URI3",
    "PMIX_SERVER_URI21", "PMIX_SERVER_URI2", NULL,
};

int pmix_uri_addr (const char *uri, struct sockaddr_in *sa)
{
    const char *p = uri ? strstr (uri, ";tcp4://") : NULL;
    char host[64], *end;
    const char *colon;
    long port;

    if (!p)
        return -1;
    p += 8;
    if (!(colon = strrchr (p, ':')) || (size_t)(colon - p) >= sizeof (host))
        return -1;
    memcpy (host, p, (size_t)(colon - p));
    host[colon - p] = '\0';
    port = strtol (colon + 1, &end, 10);
    if (end == colon + 1 || (*end && *end != '\n') || port <= 0 || port > 65535)
        return -1;
    memset (sa, 0, sizeof (*sa));
    sa->sin_family = AF_INET;
    sa->sin_port = htons ((uint16_t)port);
    return inet_pton (AF_INET, host, &sa->sin_addr) == 1 ? 0 : -1;
}
