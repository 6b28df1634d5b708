# ibcrd and ibcr CLI tests
