/* ident.h - names that become parts of paths or log lines: job ids, step
 * ids, node and cluster names.
 *
 * A job id names a folder under the storage root, so a name like ".." or
 * "a/b" would let one user write outside their job: every such name is
 * checked here before anything uses it.
 */
#ifndef IBCR_COMMON_IDENT_H
#define IBCR_COMMON_IDENT_H

#define IDENT_MAX 64

/* 1 when s is 1..IDENT_MAX characters of [A-Za-z0-9._-], not starting
 * with '.' or '-'; else 0. */
int ident_ok (const char *s);

/* A job name of digits only: a Slurm job id, which only Slurm (through
 * root) starts or registers. */
int ident_is_slurm_id (const char *id);

#endif
