# ibcrd and the ibcr CLI
