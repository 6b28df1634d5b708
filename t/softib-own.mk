# softib's own C test programs
