# Builds zlib's static library from its bare sources (as shipped in the libz-sys crate, which
# has no Makefile of its own): one gcc per source file, then ar. Used by run.sh.
SRCS = $(wildcard *.c)
OBJS = $(SRCS:.c=.o)
CFLAGS = -O2 -D_LARGEFILE64_SOURCE=1 -DHAVE_HIDDEN

libz.a: $(OBJS)
	ar rcsD $@ $(OBJS)

%.o: %.c
	$(CC) $(CFLAGS) -c -o $@ $<

clean:
	rm -f $(OBJS) libz.a
