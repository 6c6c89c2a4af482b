#!/usr/bin/env python3
"""One TCP stream of BYTES between two emulated hosts: the payload rate a shaped link gives TCP.

  tcp_stream.py recv ADDR PORT BYTES [SECONDS]   # listens on ADDR:PORT, prints the payload rate it received
  tcp_stream.py send ADDR PORT BYTES [SECONDS]   # connects to ADDR:PORT and sends BYTES

The receiver times from its first byte to its last, so the connection's set-up is not counted.
With SECONDS the sender stops after that long even short of BYTES, and the receiver takes a stream
that ends early as complete (load for run_network_contention.sh rather than a measured transfer).
"""
import socket
import sys
import time


def main() -> int:
    if len(sys.argv) not in (5, 6) or sys.argv[1] not in ("recv", "send"):
        print(__doc__, file=sys.stderr)
        return 2
    mode, addr, port, total = sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4])
    limit = float(sys.argv[5]) if len(sys.argv) == 6 else None
    if mode == "send":
        end = time.monotonic() + limit if limit else float("inf")
        with socket.create_connection((addr, port), timeout=60) as conn:
            chunk = bytes(1 << 20)
            sent = 0
            while sent < total and time.monotonic() < end:
                n = min(len(chunk), total - sent)
                conn.sendall(chunk[:n])
                sent += n
        return 0
    with socket.socket() as server:
        server.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        server.settimeout(60)
        server.bind((addr, port))
        server.listen(1)
        conn, _ = server.accept()
        with conn:
            conn.settimeout(60)
            buf = bytearray(1 << 20)
            got, first = 0, None
            while got < total:
                n = conn.recv_into(buf)
                if n == 0:
                    break
                if first is None:
                    first = time.perf_counter()
                got += n
            seconds = time.perf_counter() - first if first else 0.0
    if (got < total and limit is None) or seconds <= 0:
        print(f"tcp_stream: received {got} of {total} bytes", file=sys.stderr)
        return 1
    print(f"{got} bytes in {seconds * 1e3:.1f} ms: {got * 8 / seconds / 1e9:.4f} Gbit/s of payload")
    return 0


if __name__ == "__main__":
    sys.exit(main())
