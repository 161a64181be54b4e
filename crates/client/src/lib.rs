//! A Chirp client: connect, authenticate, and every RPC, with timeouts and pipelined bulk I/O.
