# ibcr tests (see t/Makefile.am)
