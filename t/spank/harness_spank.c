/* harness_spank.c - a trivial SPANK plugin that proves the test harness
 * can load a plugin from the build tree through its own plugstack.conf.
 *
 * It registers --harness-test=VALUE (seen in `sbatch --help`), and hands
 * the value and its plugstack.conf argument tag=WORD to each task as
 * IBCR_HARNESS_TEST and IBCR_HARNESS_TAG, so a test can see both reach a
 * job.  It is test scaffolding only: it must never be installed, and it
 * does nothing beyond setting those two variables.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include <slurm/spank.h>

SPANK_PLUGIN (harness_spank, 1);

/* Set by the option callback; in slurmstepd Slurm replays the callback
 * with the value given to sbatch/srun, so this is valid in task_init. */
static char harness_value[256];
static int harness_value_set;
static char harness_tag[64];

static int harness_opt_cb (int val, const char *optarg, int remote)
{
    (void)val;
    (void)remote;
    if (!optarg || strlen (optarg) >= sizeof (harness_value)) {
        slurm_error ("harness_spank: --harness-test needs a value shorter than %zu characters",
                     sizeof (harness_value));
        return -1;
    }
    strcpy (harness_value, optarg);
    harness_value_set = 1;
    return 0;
}

static struct spank_option harness_opt = {
    .name = "harness-test",
    .arginfo = "VALUE",
    .usage = "ibcr test harness: pass VALUE to the job's tasks as IBCR_HARNESS_TEST",
    .has_arg = 1,
    .val = 0,
    .cb = harness_opt_cb,
};

/* Strict plugstack.conf arguments: only tag=WORD; anything else is an
 * error naming the argument, so a typo in a test's plugstack is loud. */
static int harness_parse_args (int ac, char **av)
{
    for (int i = 0; i < ac; i++) {
        if (strncmp (av[i], "tag=", 4) == 0 && strlen (av[i] + 4) < sizeof (harness_tag)) {
            strcpy (harness_tag, av[i] + 4);
            continue;
        }
        slurm_error ("harness_spank: unknown or too long plugstack.conf argument '%s' (only "
                     "tag=WORD is known)",
                     av[i]);
        return -1;
    }
    return 0;
}

int slurm_spank_init (spank_t sp, int ac, char **av)
{
    if (harness_parse_args (ac, av) < 0)
        return -1;
    /* sbatch only sees options registered here, not through the
	 * spank_options table, in every context. */
    if (spank_option_register (sp, &harness_opt) != ESPANK_SUCCESS) {
        slurm_error ("harness_spank: cannot register --%s", harness_opt.name);
        return -1;
    }
    return 0;
}

int slurm_spank_task_init (spank_t sp, int ac, char **av)
{
    (void)ac;
    (void)av;
    if (harness_tag[0] && spank_setenv (sp, "IBCR_HARNESS_TAG", harness_tag, 1) != ESPANK_SUCCESS)
        return -1;
    if (harness_value_set
        && spank_setenv (sp, "IBCR_HARNESS_TEST", harness_value, 1) != ESPANK_SUCCESS)
        return -1;
    return 0;
}
