/* phase.c - see phase.h. */
#include "config.h"

#include <string.h>

#include "phase.h"

static const char *const names[PHASE_COUNT] = {
    [PHASE_BEGIN] = "begin",     [PHASE_QUIESCE] = "quiesce", [PHASE_DRAIN] = "drain",
    [PHASE_RELEASE] = "release", [PHASE_DUMP] = "dump",       [PHASE_REBUILD] = "rebuild",
    [PHASE_CONNECT] = "connect", [PHASE_RESUME] = "resume",   [PHASE_COPY] = "copy",
    [PHASE_COMMIT] = "commit",   [PHASE_END] = "end",         [PHASE_ABORT] = "abort",
    [PHASE_RESTORE] = "restore",
};

const char *phase_name (int phase)
{
    return phase >= 0 && phase < PHASE_COUNT ? names[phase] : "?";
}

int phase_from_name (const char *name)
{
    for (int i = 0; name && i < PHASE_COUNT; i++)
        if (!strcmp (names[i], name))
            return i;
    return -1;
}
