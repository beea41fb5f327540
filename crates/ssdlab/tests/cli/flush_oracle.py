# The FLUSH promise of a page-cache export, seen from outside the server: after a FLUSH's reply, no page of the
# image is dirty or under writeback (cachestat(2), Linux 6.5). Before the FLUSH the write must have left dirty
# pages, or the export bypasses the page cache and the check proves nothing. A write with FUA must leave nothing
# dirty when its reply comes. Prints one line per round: "flush DIRTY_BEFORE DIRTY_AFTER", then "fua DIRTY".
import ctypes, os, random, struct, sys
import nbd

libc = ctypes.CDLL(None, use_errno=True)
SYS_CACHESTAT = 451  # x86_64

def dirty(fd):
    rng = struct.pack("QQ", 0, 0)  # offset 0, length 0: to the end of the file
    out = ctypes.create_string_buffer(40)
    if libc.syscall(SYS_CACHESTAT, fd, rng, out, 0) != 0:
        raise OSError(ctypes.get_errno(), "cachestat")
    _cache, nr_dirty, nr_writeback, _evicted, _recent = struct.unpack("5Q", out.raw)
    return nr_dirty + nr_writeback

uri, image, rounds = sys.argv[1], sys.argv[2], int(sys.argv[3])
fd = os.open(image, os.O_RDONLY)
h = nbd.NBD()
h.connect_uri(uri)
blocks = h.get_size() // 4096
rnd = random.Random(7)
for i in range(rounds):
    for _ in range(4):
        h.pwrite(bytes([i + 1]) * 4096, rnd.randrange(blocks) * 4096)
    before = dirty(fd)
    h.flush()
    print("flush", before, dirty(fd), flush=True)
for i in range(rounds):
    h.pwrite(bytes([i + 101]) * 4096, rnd.randrange(blocks) * 4096, nbd.CMD_FLAG_FUA)
    print("fua", dirty(fd), flush=True)
h.shutdown()
