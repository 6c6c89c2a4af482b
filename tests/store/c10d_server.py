#!/usr/bin/env python3
"""A c10d TCPStore server for idist's tests, and a Python client of it driven through stdin.

    c10d_server.py [--fake v2-threaded|v2-libuv] [--libuv 0|1] [--lifetime SECONDS]

Serves on 127.0.0.1 (a free port) and prints "PORT <n>". Without --fake the server is torch's own
TCPStore (this python's torch: 1.13 speaks protocol 1, 2.1 and later protocol 2). With --fake it is a
small stand-in for torch 2.x's servers, written from their sources (TCPStoreBackend.cpp,
TCPStoreLibUvBackend.cpp): the first query of a connection must be VALIDATE; "v2-threaded" closes a
connection that starts otherwise, "v2-libuv" ignores that first query and answers nothing. --libuv picks
torch 2.x's own backend (TCPStore's use_libuv; the default is torch's).

Then one command per line on stdin, each answered by one line on stdout, as a client of the server
(through torch's TCPStore client, or directly on the fake's table):
    set KEY HEX          -> OK
    get KEY              -> VALUE HEX        (waits up to 10 s)
    add KEY N            -> VALUE N
    check KEY...         -> TRUE | FALSE
    numkeys              -> VALUE N          (keys on the server)
    pset PREFIX KEY HEX  -> OK               (through torch's PrefixStore)
    pget PREFIX KEY      -> VALUE HEX
    torch                -> TORCH <version> (the server's torch; "none" for a stand-in)
    quit                 (or end of input)
Errors are answered "ERROR <text>". Exits on quit, at the end of input, or after --lifetime seconds.
"""
import argparse
import datetime
import socket
import struct
import sys
import threading

MAGIC = 0x3C85F7CE


class FakeV2:
    """torch 2.x's protocol: VALIDATE 0, SET 1, GET 3, ADD 4, CHECK 5, WAIT 6, GETNUMKEYS 7, PING 13."""

    def __init__(self, mode):
        self.mode = mode
        self.data = {}
        self.cond = threading.Condition()
        self.listener = socket.socket()
        self.listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        self.listener.bind(("127.0.0.1", 0))
        self.listener.listen(64)
        self.port = self.listener.getsockname()[1]
        threading.Thread(target=self.accept, daemon=True).start()

    def accept(self):
        while True:
            conn, _ = self.listener.accept()
            threading.Thread(target=self.serve, args=(conn,), daemon=True).start()

    @staticmethod
    def recv(conn, n):
        out = b""
        while len(out) < n:
            chunk = conn.recv(n - len(out))
            if not chunk:
                raise EOFError
            out += chunk
        return out

    def string(self, conn):
        (n,) = struct.unpack("<Q", self.recv(conn, 8))
        if n > 1 << 20:
            raise ValueError("oversized string")
        return self.recv(conn, n)

    def serve(self, conn):
        try:
            first = self.recv(conn, 1)[0]
            if first != 0:
                if self.mode == "v2-threaded":
                    return  # closes
                while conn.recv(4096):  # libuv: nothing answered; later bytes would be re-read
                    pass
                return
            (magic,) = struct.unpack("<I", self.recv(conn, 4))
            if magic != MAGIC:
                return
            while True:
                self.query(conn, self.recv(conn, 1)[0])
        except (EOFError, ConnectionError, ValueError):
            pass
        finally:
            conn.close()

    def query(self, conn, q):
        if q == 1:  # SET
            key, value = self.string(conn), self.string(conn)
            with self.cond:
                self.data[key] = value
                self.cond.notify_all()
        elif q == 3:  # GET of a missing key: the threaded server closes, libuv's answers an empty value
            key = self.string(conn)
            with self.cond:
                value = self.data[key] if key in self.data else None
            if value is None and self.mode == "v2-threaded":
                raise EOFError
            value = value or b""
            conn.sendall(struct.pack("<Q", len(value)) + value)
        elif q == 4:  # ADD
            key = self.string(conn)
            (delta,) = struct.unpack("<q", self.recv(conn, 8))
            with self.cond:
                value = int(self.data.get(key, b"0")) + delta
                self.data[key] = str(value).encode()
                self.cond.notify_all()
            conn.sendall(struct.pack("<q", value))
        elif q in (5, 6):  # CHECK, WAIT
            (n,) = struct.unpack("<Q", self.recv(conn, 8))
            keys = [self.string(conn) for _ in range(n)]
            with self.cond:
                if q == 5:
                    conn.sendall(bytes([0 if all(k in self.data for k in keys) else 1]))
                    return
                while not all(k in self.data for k in keys):
                    self.cond.wait(0.05)
                    if conn.fileno() < 0:
                        return
            conn.sendall(b"\x00")
        elif q == 7:  # GETNUMKEYS
            with self.cond:
                conn.sendall(struct.pack("<q", len(self.data)))
        elif q == 13:  # PING
            conn.sendall(self.recv(conn, 4))
        else:
            raise EOFError

    # The Python-client side of the commands, with torch's "/" key prefix.
    def set(self, key, value):
        with self.cond:
            self.data[b"/" + key.encode()] = value
            self.cond.notify_all()

    def get(self, key):
        with self.cond:
            if not self.cond.wait_for(lambda: b"/" + key.encode() in self.data, timeout=10):
                raise TimeoutError(key)
            return self.data[b"/" + key.encode()]

    def add(self, key, n):
        with self.cond:
            value = int(self.data.get(b"/" + key.encode(), b"0")) + n
            self.data[b"/" + key.encode()] = str(value).encode()
            self.cond.notify_all()
            return value

    def check(self, keys):
        with self.cond:
            return all(b"/" + k.encode() in self.data for k in keys)


def raw_check(port, keys):
    """CHECK in protocol 1 on a connection of its own (torch 1.13's Python TCPStore has no check())."""
    with socket.create_connection(("127.0.0.1", port), timeout=10) as conn:
        request = bytes([4]) + struct.pack("<Q", len(keys))
        for k in keys:
            wire = b"/" + k.encode()
            request += struct.pack("<Q", len(wire)) + wire
        conn.sendall(request)
        return FakeV2.recv(conn, 1) == b"\x00"


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--fake", choices=["v2-threaded", "v2-libuv"])
    parser.add_argument("--lifetime", type=float, default=600)
    parser.add_argument("--libuv", choices=["0", "1"], help="torch 2.x: serve with (1) or without (0) libuv")
    args = parser.parse_args()
    threading.Timer(args.lifetime, lambda: __import__("os")._exit(3)).start()

    if args.fake:
        store = FakeV2(args.fake)
        port = store.port
        prefixed = lambda prefix: None  # noqa: E731
    else:
        import torch.distributed as dist

        options = {"wait_for_workers": False}
        if args.libuv is not None:
            options["use_libuv"] = args.libuv == "1"  # torch 2.2 and later
        store = dist.TCPStore("127.0.0.1", 0, None, True, datetime.timedelta(seconds=10), **options)
        port = store.port
        prefixed = lambda prefix: dist.PrefixStore(prefix, store)  # noqa: E731
    print(f"PORT {port}", flush=True)

    for line in sys.stdin:
        words = line.split()
        if not words:
            continue
        try:
            cmd = words[0]
            if cmd == "quit":
                break
            if cmd == "set":
                store.set(words[1], bytes.fromhex(words[2]) if len(words) > 2 else b"")
                print("OK", flush=True)
            elif cmd == "get":
                print("VALUE", store.get(words[1]).hex(), flush=True)
            elif cmd == "add":
                print("VALUE", store.add(words[1], int(words[2])), flush=True)
            elif cmd == "check":
                found = store.check(words[1:]) if hasattr(store, "check") else raw_check(port, words[1:])
                print("TRUE" if found else "FALSE", flush=True)
            elif cmd == "numkeys":
                print("VALUE", store.num_keys() if hasattr(store, "num_keys") else len(store.data), flush=True)
            elif cmd == "torch":
                print("TORCH", "none" if args.fake else __import__("torch").__version__, flush=True)
            elif cmd == "pset":
                prefixed(words[1]).set(words[2], bytes.fromhex(words[3]) if len(words) > 3 else b"")
                print("OK", flush=True)
            elif cmd == "pget":
                print("VALUE", prefixed(words[1]).get(words[2]).hex(), flush=True)
            else:
                print("ERROR unknown command", cmd, flush=True)
        except Exception as e:  # the test reads the answer; the server keeps serving
            print("ERROR", type(e).__name__, str(e).replace("\n", " "), flush=True)
    sys.stdout.flush()
    __import__("os")._exit(0)


if __name__ == "__main__":
    main()
