#!/usr/bin/python3
"""NBD clients for the CLI tests of `ssdlab serve`: hostile ones (a trickled handshake, silent connections,
replies never read, hang-ups in the middle of a write's payload, crowds of idle connections), a protocol
checker, and a random transaction log checked against a model (the NBD project's tester's kind of test).

Each subcommand prints one JSON object on stdout; the Rust tests judge it. The well-behaved client is libnbd's
(python3-libnbd); the others speak the protocol by hand over a Unix socket. Every loop is bounded in count and
time, and every random choice comes from a seeded generator whose seed is in the output and in any failure.
"""
import json
import os
import random
import signal
import socket
import struct
import sys
import threading
import time

import nbd

NBDMAGIC = b"NBDMAGIC"
IHAVEOPT = 0x49484156454F5054
OPT_EXPORT_NAME, OPT_GO = 1, 7
REP_ACK = 1
INFO_BLOCK_SIZE = 3
REQUEST_MAGIC, SIMPLE_REPLY_MAGIC = 0x25609513, 0x67446698
CMD_READ, CMD_WRITE, CMD_DISC, CMD_FLUSH, CMD_TRIM, CMD_CACHE, CMD_WRITE_ZEROES = 0, 1, 2, 3, 4, 5, 6
FLAG_FUA, FLAG_DF, FLAG_FAST_ZERO = 1, 4, 16


def recv_exact(s, n):
    out = bytearray()
    while len(out) < n:
        chunk = s.recv(n - len(out))
        if not chunk:
            raise EOFError(f"the server closed the connection after {len(out)} of {n} bytes")
        out += chunk
    return bytes(out)


class Raw:
    """The client side of the protocol by hand, simple replies only, one request at a time unless told
    otherwise. `go=True` negotiates with NBD_OPT_GO asking for block sizes; `go=False` uses
    NBD_OPT_EXPORT_NAME and so negotiates nothing (the protocol's default block sizes hold)."""

    def __init__(self, path, go=True, client_flags=3, timeout=30):
        self.s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self.s.settimeout(timeout)
        self.s.connect(path)
        greeting = recv_exact(self.s, 18)
        assert greeting[:8] == NBDMAGIC, greeting
        self.s.sendall(struct.pack(">I", client_flags))
        self.cookie = 0
        if go:
            data = struct.pack(">I", 0) + struct.pack(">HH", 1, INFO_BLOCK_SIZE)
            self.s.sendall(struct.pack(">QII", IHAVEOPT, OPT_GO, len(data)) + data)
            while True:
                _, _, kind, length = struct.unpack(">QIII", recv_exact(self.s, 20))
                body = recv_exact(self.s, length)
                if kind == 3 and struct.unpack(">H", body[:2])[0] == 0:
                    self.size = struct.unpack(">Q", body[2:10])[0]
                if kind == REP_ACK:
                    break
                assert kind < 1 << 31, f"option error {kind:#x}: {body!r}"
        else:
            self.s.sendall(struct.pack(">QII", IHAVEOPT, OPT_EXPORT_NAME, 0))
            self.size, _flags = struct.unpack(">QH", recv_exact(self.s, 10))

    def send(self, command, offset, length, flags=0, payload=b""):
        self.cookie += 1
        self.s.sendall(struct.pack(">IHHQQI", REQUEST_MAGIC, flags, command, self.cookie, offset, length) + payload)
        return self.cookie

    def reply(self, data_len=0):
        magic, error, cookie = struct.unpack(">IIQ", recv_exact(self.s, 16))
        assert magic == SIMPLE_REPLY_MAGIC, hex(magic)
        data = recv_exact(self.s, data_len) if error == 0 and data_len else b""
        return error, cookie, data

    def call(self, command, offset, length, flags=0, payload=b""):
        self.send(command, offset, length, flags, payload)
        return self.reply(length if command == CMD_READ else 0)

    def close(self):
        self.s.close()


def good_client(uri, seconds, size, stop=None):
    """A well-behaved libnbd client doing 4 KiB reads at queue depth 1: (reads, worst latency in ms)."""
    h = nbd.NBD()
    start = time.monotonic()
    h.connect_uri(uri)
    worst = time.monotonic() - start
    rng = random.Random(7)
    count = 0
    end = time.monotonic() + seconds
    while time.monotonic() < end and not (stop and stop.is_set()):
        t = time.monotonic()
        h.pread(4096, rng.randrange(size // 4096) * 4096)
        worst = max(worst, time.monotonic() - t)
        count += 1
    h.shutdown()
    return count, worst * 1000


def settled(uri, size):
    """One well-behaved request first, so the server has opened everything it keeps (the device is prepared
    after the socket listens) before its memory and descriptors are counted."""
    good_client(uri, 0, size)


def rss_kib(pid):
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
    return 0


def fds(pid):
    return len(os.listdir(f"/proc/{pid}/fd"))


def handshake_hostile(path, uri, size):
    """Ten silent connections and one that trickles a 64 KiB option a byte at a time, then a well-behaved
    client: when is it done, and when did the server cut the trickler and the silent ones off?"""
    t0 = time.monotonic()
    silent = []
    for _ in range(10):
        s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        s.connect(path)
        silent.append(s)
    cut = {}

    def trickle():
        s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        s.connect(path)
        s.settimeout(0.2)
        data = struct.pack(">I", 3) + struct.pack(">QII", IHAVEOPT, OPT_GO, 65536) + b"\0" * 65536
        received = b""
        # Bounded: at most 60 s of trickling, one byte each 0.2 s.
        for b in data[:300]:
            try:
                s.sendall(bytes([b]))
                chunk = s.recv(4096)
                if not chunk:
                    cut["trickler"] = time.monotonic() - t0
                    return
                received += chunk
            except socket.timeout:
                pass
            except OSError:
                cut["trickler"] = time.monotonic() - t0
                return
        s.close()

    trickler = threading.Thread(target=trickle)
    trickler.start()
    time.sleep(0.5)
    count, worst = good_client(uri, 0, size)
    good_done = time.monotonic() - t0
    trickler.join()
    closed = 0
    for s in silent:
        s.settimeout(max(0.1, 30 - (time.monotonic() - t0)))
        try:
            while s.recv(4096):
                pass
            closed += 1
        except OSError:
            pass
        s.close()
    return {
        "good_done_s": good_done,
        "good_worst_ms": worst,
        "trickler_cut_s": cut.get("trickler"),
        "silent_closed": closed,
    }


def unread_replies(path, uri, size, pid, count):
    """A client pipelines `count` 4 MiB READs and never reads a reply, while a well-behaved client reads: the
    server's memory, and what the good client saw."""
    settled(uri, size)
    before = rss_kib(pid)
    fds_before = fds(pid)
    hog = Raw(path)
    payload_len = 4 << 20
    requests = b"".join(
        struct.pack(">IHHQQI", REQUEST_MAGIC, 0, CMD_READ, k, 0, payload_len) for k in range(count)
    )
    hog.s.setblocking(False)
    sent = 0
    peak = before
    stop = threading.Event()
    result = {}

    def good():
        result["reads"], result["worst_ms"] = good_client(uri, 3, size, stop)

    t = threading.Thread(target=good)
    t.start()
    end = time.monotonic() + 4
    while time.monotonic() < end:
        if sent < len(requests):
            try:
                sent += hog.s.send(requests[sent:])
            except BlockingIOError:
                pass
        peak = max(peak, rss_kib(pid))
        time.sleep(0.02)
    t.join()
    during = rss_kib(pid)
    hog.close()
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline and fds(pid) > fds_before:
        time.sleep(0.05)
    time.sleep(0.5)
    return {
        "rss_before_kib": before,
        "rss_peak_kib": peak,
        "rss_during_kib": during,
        "rss_after_kib": rss_kib(pid),
        "fds_before": fds_before,
        "fds_after": fds(pid),
        "request_bytes_sent": sent,
        "good_reads": result.get("reads"),
        "good_worst_ms": result.get("worst_ms"),
    }


def hangups(path, pid, count):
    """`count` clients each start a 4 MiB WRITE, send 1 MiB of its payload and hang up."""
    settled(f"nbd+unix:///?socket={path}", 1 << 20)
    before_rss, before_fds = rss_kib(pid), fds(pid)
    for _ in range(count):
        c = Raw(path)
        c.s.sendall(struct.pack(">IHHQQI", REQUEST_MAGIC, 0, CMD_WRITE, 1, 0, 4 << 20) + b"\xab" * (1 << 20))
        c.close()
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline and fds(pid) > before_fds:
        time.sleep(0.05)
    time.sleep(0.5)
    return {
        "rss_before_kib": before_rss,
        "rss_after_kib": rss_kib(pid),
        "fds_before": before_fds,
        "fds_after": fds(pid),
    }


def crowd(path, uri, size, pid, idle, seconds):
    """`idle` connections that negotiated and then do nothing, and a well-behaved client reading for
    `seconds`; then one more client: refused with the reason past the server's limit, or served."""
    settled(uri, size)
    before_rss, before_fds = rss_kib(pid), fds(pid)
    conns = []
    refused_raw = 0
    for _ in range(idle):
        try:
            conns.append(Raw(path))
        except (AssertionError, EOFError, OSError):
            refused_raw += 1
    extra = {}
    try:
        Raw(path).close()
        extra["one_more_raw"] = "served"
    except AssertionError as e:
        extra["one_more_raw"] = str(e)
    during_rss, during_fds = rss_kib(pid), fds(pid)
    try:
        h = nbd.NBD()
        h.connect_uri(uri)
        extra["one_more"] = "served"
        h.shutdown()
    except nbd.Error as e:
        extra["one_more"] = str(e)
    reads, worst = (0, 0.0)
    if seconds > 0 and extra["one_more"] == "served":
        reads, worst = good_client(uri, seconds, size)
    for c in conns[:1]:
        c.close()
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline and fds(pid) >= during_fds:
        time.sleep(0.05)
    try:
        h = nbd.NBD()
        h.connect_uri(uri)
        extra["after_one_left"] = "served"
        h.shutdown()
    except nbd.Error as e:
        extra["after_one_left"] = str(e)
    for c in conns[1:]:
        c.close()
    return {
        "idle_connected": len(conns),
        "idle_refused": refused_raw,
        "good_reads": reads,
        "good_worst_ms": worst,
        "rss_before_kib": before_rss,
        "rss_during_kib": during_rss,
        "fds_before": before_fds,
        "fds_during": during_fds,
        **extra,
    }


def conformance(path):
    """The error each questionable request gets, and whether unknown client flags end the connection."""
    out = {}
    c = Raw(path)
    size = c.size
    checks = {
        "cache_fua": (CMD_CACHE, FLAG_FUA, 0, 4096),
        "flush_fua": (CMD_FLUSH, FLAG_FUA, 0, 0),
        "read_df": (CMD_READ, FLAG_DF, 0, 4096),
        "zeroes_fast_zero": (CMD_WRITE_ZEROES, FLAG_FAST_ZERO, 0, 4096),
        "read_bit7": (CMD_READ, 1 << 7, 0, 4096),
        "read_bit9": (CMD_READ, 1 << 9, 0, 4096),
        "trim_past_end": (CMD_TRIM, 0, size - 4096, 8192),
        "zeroes_past_end": (CMD_WRITE_ZEROES, 0, size - 4096, 8192),
        "read_past_end": (CMD_READ, 0, size - 4096, 8192),
        "read_oversize": (CMD_READ, 0, 0, (4 << 20) + 4096),
    }
    for name, (command, flags, offset, length) in checks.items():
        out[name] = c.call(command, offset, length, flags)[0]
    # Writes carry their payload whatever the answer; the connection must go on after each.
    out["write_past_end"] = c.call(CMD_WRITE, size - 4096, 8192, 0, b"\x11" * 8192)[0]
    out["write_oversize"] = c.call(CMD_WRITE, 0, (4 << 20) + 4096, 0, b"\x22" * ((4 << 20) + 4096))[0]
    out["write_then"] = c.call(CMD_WRITE, 0, 4096, FLAG_FUA, b"\x33" * 4096)[0]
    error, _, data = c.call(CMD_READ, 0, 4096)
    out["read_back"] = error == 0 and data == b"\x33" * 4096
    c.close()
    for flags in (1 << 2, 1 << 31):
        try:
            r = Raw(path, client_flags=3 | flags, timeout=10)
            r.close()
            out[f"client_flags_{flags:#x}"] = "accepted"
        except (EOFError, ConnectionError) as e:
            out[f"client_flags_{flags:#x}"] = "closed"
    return out


def defaults(path):
    """A client that negotiated nothing (NBD_OPT_EXPORT_NAME) writes and reads 12.5 MiB at odd offsets and
    lengths: what came back, and the errors."""
    c = Raw(path, go=False)
    rng = random.Random(12)
    huge = 25 << 19
    data = rng.randbytes(huge)
    out = {"size": c.size}
    out["write_error"] = c.call(CMD_WRITE, 1001, huge, 0, data)[0]
    error, _, back = c.call(CMD_READ, 1001, huge)
    out["read_error"] = error
    out["read_back"] = back == data
    small = rng.randbytes(3)
    out["small_write_error"] = c.call(CMD_WRITE, 7, 3, FLAG_FUA, small)[0]
    error, _, back = c.call(CMD_READ, 5, 7)
    out["small_read_back"] = error == 0 and back[2:5] == small
    out["zeroes_error"] = c.call(CMD_WRITE_ZEROES, 4000, 200)[0]
    error, _, back = c.call(CMD_READ, 3999, 202)
    out["zeroes_read_back"] = error == 0 and back[1:201] == bytes(200)
    out["too_long_error"] = c.call(CMD_READ, 0, (32 << 20) + 1)[0]
    # 300 small writes to different bytes of the same few blocks, pipelined: each is a read-modify-write of
    # its block, and none may write another's block back over it.
    base = 20000
    pieces = [(base + 5 * k, rng.randbytes(3)) for k in range(300)]
    for offset, piece in pieces:
        c.send(CMD_WRITE, offset, 3, 0, piece)
    errors = [c.reply()[0] for _ in pieces]
    error, _, back = c.call(CMD_READ, base, 5 * 300)
    out["pipelined_errors"] = sum(1 for e in errors if e)
    out["pipelined_read_back"] = error == 0 and all(
        back[5 * k : 5 * k + 3] == piece for k, (_, piece) in enumerate(pieces)
    )
    c.close()
    return out


class Model:
    """What the export must hold: its bytes, and the ranges whose contents are undefined (trimmed)."""

    def __init__(self, size):
        self.data = bytearray(size)
        self.defined = bytearray(b"\1" * size)

    def write(self, offset, data):
        self.data[offset : offset + len(data)] = data
        self.defined[offset : offset + len(data)] = b"\1" * len(data)

    def trim(self, offset, length):
        self.defined[offset : offset + length] = b"\0" * length

    def check(self, offset, data, what):
        want = self.data[offset : offset + len(data)]
        defined = self.defined[offset : offset + len(data)]
        if data == want:
            return
        for i in range(len(data)):
            if defined[i] and data[i] != want[i]:
                raise AssertionError(
                    f"{what}: byte {offset + i} is {data[i]:#x}, the model says {want[i]:#x}"
                )


def txlog(path, uri, seed, ops, read_only, pid, image):
    """A random transaction log of overlapping writes, reads, trims, zeroes and flushes over two libnbd
    connections (aligned to what they negotiated) and a raw one that negotiated nothing (any alignment,
    requests up to 12.5 MiB), every read checked against the model. Then a write on each connection, a FLUSH
    on the other libnbd connection only, SIGKILL of the server, and the image checked against the model: the
    flush covered every connection's writes."""
    rng = random.Random(seed)
    a, b = nbd.NBD(), nbd.NBD()
    a.connect_uri(uri)
    b.connect_uri(uri)
    c = Raw(path, go=False)
    size = a.get_size()
    model = Model(size)
    with open(image, "rb") as f:
        model.data[:] = f.read(size)
    min_block = a.get_block_size(nbd.SIZE_MINIMUM)
    counts = {"read": 0, "write": 0, "trim": 0, "zero": 0, "flush": 0, "huge": 0, "refused": 0}
    log = []

    def span(align, longest):
        length = rng.randrange(1, longest // align + 1) * align
        offset = rng.randrange(0, (size - length) // align + 1) * align
        return offset, length

    def payload(n):
        return rng.randbytes(n)

    for step in range(ops):
        who = rng.choice("aabbc")
        kind = rng.choices(["read", "write", "trim", "zero", "flush"], [40, 35, 8, 7, 10])[0]
        huge = who == "c" and rng.random() < 0.06
        if who == "c":
            offset, length = span(1, (25 << 19) if huge else 256 << 10)
            if huge:
                length = min(25 << 19, size - offset)
                offset = min(offset, size - length)
        else:
            offset, length = span(min_block, 256 << 10)
        counts["huge"] += huge
        log.append((step, who, kind, offset, length))
        if read_only and kind != "read":
            h = a if who == "a" else b
            if who == "c":
                command = {"write": CMD_WRITE, "trim": CMD_TRIM, "zero": CMD_WRITE_ZEROES, "flush": CMD_FLUSH}[kind]
                body = b"\0" * length if kind == "write" else b""
                error = c.call(command, offset, length if command != CMD_FLUSH else 0, 0, body)[0]
                refused = error == 1 or command == CMD_FLUSH
            else:
                try:
                    if kind == "write":
                        h.pwrite(b"\0" * length, offset)
                    elif kind == "trim":
                        h.trim(length, offset)
                    elif kind == "zero":
                        h.zero(length, offset)
                    else:
                        h.flush()
                    refused = kind == "flush"
                except nbd.Error:
                    refused = True
            assert refused, f"seed {seed} step {step}: {kind} on a read-only export was not refused"
            counts["refused"] += kind != "flush"
            continue
        counts[kind] += 1
        if who == "c":
            if kind == "read":
                error, _, data = c.call(CMD_READ, offset, length)
                assert error == 0, f"seed {seed} step {step}: raw read error {error}"
                model.check(offset, data, f"seed {seed} step {step}: raw read {offset}+{length}")
            elif kind == "write":
                data = payload(length)
                error = c.call(CMD_WRITE, offset, length, 0, data)[0]
                assert error == 0, f"seed {seed} step {step}: raw write error {error}"
                model.write(offset, data)
            elif kind == "trim":
                assert c.call(CMD_TRIM, offset, length)[0] == 0
                model.trim(offset, length)
            elif kind == "zero":
                assert c.call(CMD_WRITE_ZEROES, offset, length)[0] == 0
                model.write(offset, bytes(length))
            else:
                assert c.call(CMD_FLUSH, 0, 0)[0] == 0
            continue
        h = a if who == "a" else b
        if kind == "read":
            data = h.pread(length, offset)
            model.check(offset, data, f"seed {seed} step {step}: read {offset}+{length} on {who}")
        elif kind == "write":
            data = payload(length)
            h.pwrite(data, offset, nbd.CMD_FLAG_FUA if rng.random() < 0.1 else 0)
            model.write(offset, data)
        elif kind == "trim":
            h.trim(length, offset)
            model.trim(offset, length)
        elif kind == "zero":
            h.zero(length, offset)
            model.write(offset, bytes(length))
        else:
            h.flush()
    result = {"seed": seed, "ops": ops, "counts": counts, "size": size}
    if read_only:
        a.shutdown()
        b.shutdown()
        c.close()
        return result
    # Multi-connection flush coverage: writes on a and c, the flush on b only, then the power goes.
    for who in "ac":
        offset, length = span(min_block, 64 << 10)
        data = payload(length)
        if who == "a":
            a.pwrite(data, offset)
        else:
            assert c.call(CMD_WRITE, offset, length, 0, data)[0] == 0
        model.write(offset, data)
    b.flush()
    os.kill(pid, signal.SIGKILL)
    with open(image, "rb") as f:
        durable = f.read(size)
    model.check(0, durable, f"seed {seed}: the image after SIGKILL following a FLUSH on another connection")
    result["flush_covered_every_connection"] = True
    return result


def main():
    command, path = sys.argv[1], sys.argv[2]
    uri = f"nbd+unix:///?socket={path}"
    if command == "handshake-hostile":
        out = handshake_hostile(path, uri, int(sys.argv[3]))
    elif command == "unread-replies":
        out = unread_replies(path, uri, int(sys.argv[3]), int(sys.argv[4]), int(sys.argv[5]))
    elif command == "hangups":
        out = hangups(path, int(sys.argv[3]), int(sys.argv[4]))
    elif command == "crowd":
        out = crowd(path, uri, int(sys.argv[3]), int(sys.argv[4]), int(sys.argv[5]), float(sys.argv[6]))
    elif command == "conformance":
        out = conformance(path)
    elif command == "defaults":
        out = defaults(path)
    elif command == "txlog":
        seed, ops, read_only, pid, image = (
            int(sys.argv[3]),
            int(sys.argv[4]),
            sys.argv[5] == "ro",
            int(sys.argv[6]),
            sys.argv[7],
        )
        out = txlog(path, uri, seed, ops, read_only, pid, image)
    else:
        raise SystemExit(f"unknown command {command}")
    print(json.dumps(out))


if __name__ == "__main__":
    main()
