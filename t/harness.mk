# harness tests (see t/Makefile.am)
