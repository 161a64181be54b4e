//! The Chirp protocol as roost speaks it: requests, replies, stat lines, URL-encoding and the
//! one table mapping Chirp error codes to and from errno. No I/O happens here.
