#!/usr/bin/python3
"""What hostile and careless NBD clients cost everyone else: `ssdlab serve` on a file, a well-behaved libnbd
client doing 4 KiB reads at queue depth 1 the whole time, and one hostile client per row (issue 36's table):

  scripts/nbd-hostile.py [BINARY] [--only NAME] [--max-connections N] [--page-cache]
(--page-cache serves `file:IMG?cache=page`, whose large reads are sent from the page cache with sendfile.)

Each row: the well-behaved client's reads and worst latency while the hostile one was at it, and the server's
RSS and open descriptors before (after one good request) and after (the hostile client gone, the server given
a moment). Needs Debian's python3-libnbd; runs on loopback Unix sockets only, every loop bounded in time.
"""
import os
import signal
import socket
import struct
import subprocess
import sys
import tempfile
import threading
import time

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "crates", "ssdlab", "tests", "cli"))
import nbd_clients as c  # noqa: E402

SIZE = 256 << 20


class Serve:
    def __init__(self, binary, extra, query=""):
        self.dir = tempfile.TemporaryDirectory(prefix="nbd-hostile-")
        image = os.path.join(self.dir.name, "export.img")
        with open(image, "wb") as f:
            f.write(os.urandom(SIZE))
        self.socket = os.path.join(self.dir.name, "nbd.sock")
        self.proc = subprocess.Popen(
            [binary, "serve", "--target", f"file:{image}{query}", "--socket", self.socket, *extra],
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
        )
        deadline = time.monotonic() + 20
        while True:
            try:
                s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
                s.connect(self.socket)
                s.close()
                break
            except OSError:
                assert time.monotonic() < deadline, "the server never listened"
                time.sleep(0.02)
        self.uri = f"nbd+unix:///?socket={self.socket}"
        c.settled(self.uri, SIZE)
        time.sleep(0.2)

    def sample(self):
        return c.rss_kib(self.proc.pid), c.fds(self.proc.pid)

    def stop(self):
        self.proc.send_signal(signal.SIGTERM)
        try:
            self.proc.wait(60)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
        self.dir.cleanup()


class Good(threading.Thread):
    """The well-behaved client: QD1 4 KiB reads until stopped; its connect counts as a request too."""

    def __init__(self, uri):
        super().__init__()
        self.uri, self.stop, self.reads, self.worst, self.error = uri, threading.Event(), 0, 0.0, None

    def run(self):
        try:
            self.reads, self.worst = c.good_client(self.uri, 3600, SIZE, self.stop)
        except Exception as e:  # noqa: BLE001 - reported in the table
            self.error = str(e)


def row(server, name, hostile, seconds):
    """Runs `hostile(server)` (which returns when its clients are set up or done and a cleanup function) with
    the good client reading for at least `seconds`."""
    rss0, fds0 = server.sample()
    good = Good(server.uri)
    good.start()
    time.sleep(0.3)
    t0 = time.monotonic()
    peak = [rss0]
    sampling = threading.Event()

    def sampler():
        while not sampling.is_set():
            try:
                peak[0] = max(peak[0], c.rss_kib(server.proc.pid))
            except OSError:
                return
            time.sleep(0.05)

    s = threading.Thread(target=sampler)
    s.start()
    cleanup = hostile(server)
    while time.monotonic() - t0 < seconds:
        time.sleep(0.1)
    good.stop.set()
    good.join(3600)
    during = server.sample()
    if cleanup:
        cleanup()
    deadline = time.monotonic() + 15
    while time.monotonic() < deadline and c.fds(server.proc.pid) > fds0:
        time.sleep(0.1)
    time.sleep(1)
    sampling.set()
    s.join()
    rss1, fds1 = server.sample()
    return {
        "name": name,
        "reads": good.reads,
        "worst_ms": good.worst,
        "error": good.error,
        "rss_before_mib": rss0 / 1024,
        "rss_peak_mib": peak[0] / 1024,
        "rss_after_mib": rss1 / 1024,
        "fds_before": fds0,
        "fds_during": during[1],
        "fds_after": fds1,
        "seconds": seconds,
    }


def trickle(total_bytes, over_s):
    def hostile(server):
        done = threading.Event()

        def run():
            s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
            s.connect(server.socket)
            data = struct.pack(">I", 3) + struct.pack(">QII", c.IHAVEOPT, c.OPT_GO, 65536)
            for b in data[:total_bytes]:
                if done.is_set():
                    break
                try:
                    s.sendall(bytes([b]))
                except OSError:
                    break
                time.sleep(over_s / total_bytes)
            s.close()

        t = threading.Thread(target=run)
        t.start()

        def cleanup():
            done.set()
            t.join()

        return cleanup

    return hostile


def silent(count):
    def hostile(server):
        socks = []
        for _ in range(count):
            s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
            s.connect(server.socket)
            socks.append(s)
        return lambda: [s.close() for s in socks]

    return hostile


def unread(count):
    def hostile(server):
        hog = c.Raw(server.socket)
        hog.s.setblocking(False)
        requests = b"".join(
            struct.pack(">IHHQQI", c.REQUEST_MAGIC, 0, c.CMD_READ, k, 0, 4 << 20) for k in range(count)
        )
        state = {"sent": 0, "stop": False}

        def run():
            while not state["stop"] and state["sent"] < len(requests):
                try:
                    state["sent"] += hog.s.send(requests[state["sent"] :])
                except BlockingIOError:
                    time.sleep(0.01)
                except OSError:
                    return

        t = threading.Thread(target=run)
        t.start()

        def cleanup():
            state["stop"] = True
            t.join()
            hog.close()

        return cleanup

    return hostile


def hangups(count):
    def hostile(server):
        for _ in range(count):
            r = c.Raw(server.socket)
            r.s.sendall(struct.pack(">IHHQQI", c.REQUEST_MAGIC, 0, c.CMD_WRITE, 1, 0, 4 << 20) + b"\xab" * (1 << 20))
            r.close()
        return None

    return hostile


def idle(count):
    def hostile(server):
        conns, refused = [], 0
        for _ in range(count):
            try:
                conns.append(c.Raw(server.socket, timeout=15))
            except (AssertionError, EOFError, OSError):
                refused += 1
        print(f"  idle: {len(conns)} negotiated, {refused} refused", file=sys.stderr)
        return lambda: [r.close() for r in conns]

    return hostile


ROWS = [
    ("quiet (no hostile client)", lambda s: None, 5),
    ("20 handshake bytes trickled over 30 s", trickle(20, 30), 32),
    ("10 silent connections", silent(10), 25),
    # HOG_READS lowers the count for a server that would take them all (20,000 replies are 80 GiB).
    (
        f"{int(os.environ.get('HOG_READS', 20000)):,} pipelined 4 MiB READs, replies never read",
        unread(int(os.environ.get("HOG_READS", 20000))),
        10,
    ),
    ("80 hang-ups mid-WRITE payload (1 of 4 MiB sent)", hangups(80), 5),
    ("1,000 idle connections", idle(1000), 5),
    ("3,000 idle connections", idle(3000), 5),
]


def main():
    binary = sys.argv[1] if len(sys.argv) > 1 and not sys.argv[1].startswith("--") else "target/release/ssdlab"
    only = sys.argv[sys.argv.index("--only") + 1] if "--only" in sys.argv else None
    extra = []
    if "--max-connections" in sys.argv:
        extra = ["--max-connections", sys.argv[sys.argv.index("--max-connections") + 1]]
    print("| client | good client: reads, worst latency | server RSS before / peak / after | fds before / during / after |")
    print("| --- | --- | --- | --- |")
    for name, hostile, seconds in ROWS:
        if only and only not in name:
            continue
        server = Serve(binary, extra, "?cache=page" if "--page-cache" in sys.argv else "")
        try:
            r = row(server, name, hostile, seconds)
        finally:
            server.stop()
        good = f"{r['reads']} reads in {r['seconds']} s, worst {r['worst_ms']:.1f} ms"
        if r["error"]:
            good += f" (error: {r['error']})"
        print(
            f"| {name} | {good} | {r['rss_before_mib']:.0f} / {r['rss_peak_mib']:.0f} / {r['rss_after_mib']:.0f} MiB "
            f"| {r['fds_before']} / {r['fds_during']} / {r['fds_after']} |",
            flush=True,
        )


if __name__ == "__main__":
    main()
