# Slurm watcher (job end times, node drains, requeue) used by ibcrd
