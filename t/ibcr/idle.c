/* idle.c - a verbs user that holds no device: it lists devices (which
 * starts libibcr and its control channel), reports how many mappings of a
 * libibverbs it had before that, then waits for stdin to close.  Used to
 * check the backend's load/unload cycle on a machine without a device.
 */
#include "config.h"
#include <stdio.h>
#include <string.h>
#include <unistd.h>
#include <infiniband/verbs.h>

static int count_maps (void)
{
    char line[4096];
    int n = 0;
    FILE *f = fopen ("/proc/self/maps", "r");
    while (f && fgets (line, sizeof (line), f))
        if (strstr (line, "libibverbs"))
            n++;
    if (f)
        fclose (f);
    return n;
}

int main (void)
{
    char c;
    int before = count_maps ();
    int n = -1;
    struct ibv_device **l = ibv_get_device_list (&n);
    printf ("baseline_maps %d devices %d\n", before, l ? n : 0);
    fflush (stdout);
    if (l)
        ibv_free_device_list (l);
    while (read (0, &c, 1) > 0)
        ;
    return 0;
}
