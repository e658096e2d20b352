#!/usr/bin/env python3
"""Inside the sandbox: forward 127.0.0.1:PORT to trialbox's model proxy on a Unix socket.

For command-line agents that want an HTTP URL. The sandbox has no network
interface but loopback; this socket, mounted from the host, is its only way
out. Usage: forwarder.py PORT SOCKET (runs until killed).
"""

import socket
import sys
import threading


def pipe(src: socket.socket, dst: socket.socket) -> None:
    try:
        while True:
            data = src.recv(65536)
            if not data:
                break
            dst.sendall(data)
    except OSError:
        pass
    finally:
        try:
            dst.shutdown(socket.SHUT_WR)
        except OSError:
            pass


def serve(conn: socket.socket, path: str) -> None:
    upstream = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        upstream.connect(path)
    except OSError:
        conn.close()
        return
    t = threading.Thread(target=pipe, args=(upstream, conn), daemon=True)
    t.start()
    pipe(conn, upstream)
    t.join()
    conn.close()
    upstream.close()


def main() -> None:
    port, path = int(sys.argv[1]), sys.argv[2]
    listener = socket.socket()
    listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    listener.bind(("127.0.0.1", port))
    listener.listen(16)
    print("ready", flush=True)
    while True:
        conn, _ = listener.accept()
        threading.Thread(target=serve, args=(conn, path), daemon=True).start()


if __name__ == "__main__":
    main()
