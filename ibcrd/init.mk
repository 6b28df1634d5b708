# ibcr-init: the PID-namespace init (see init.c)
