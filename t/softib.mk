# softib tests (see t/Makefile.am)
