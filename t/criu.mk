# criu tests (see t/Makefile.am)
