"""The witness's receiving end in a script grader: run by trialbox as root (``python3 -I -S``), before the test
script starts, in a folder of its own that only root can write (``/dev/shm/...``, mode 0711).

It listens on a Unix socket (``SOCK_SEQPACKET``, anyone may connect) and prints every message it receives to its
standard output, which the engine streams to trialbox on the host: nothing of it is a file in the container, and
the sandbox user cannot write to a root process's output, signal it or trace it. Each line names who sent it as the
kernel says, not as the message says:

* ``open``: a connection, with the peer's pid and uid (``SO_PEERCRED``), its start time and its chain of parents
  (from ``/proc``), read while the connecting process waits for this side's ``ok`` (it is alive and cannot have
  moved);
* ``msg``: a message, with the pid of the process that sent it (``SCM_CREDENTIALS``, filled in by the kernel) and
  its text;
* ``close``: the connection's end; ``overflow``: the bound on what is kept was reached; ``stopped``: the last line,
  printed only when trialbox stops this server (``SIGTERM``, sent by root) after draining what was sent.

Python 3.6 or later, standard library only (it runs on whatever Python the task's image has).
"""

import json
import os
import select
import signal
import socket
import struct
import sys

MAX_MESSAGE = 4096
MAX_OUTPUT = 1 << 20
MAX_CONNECTIONS = 256
UCRED = struct.Struct("3i")

_stop = []
_written = [0]
_overflowed = [False]


def emit(record):
    if _overflowed[0]:
        return
    line = json.dumps(record, sort_keys=True) + "\n"
    if _written[0] + len(line) > MAX_OUTPUT - 64:
        _overflowed[0] = True
        line = json.dumps({"event": "overflow"}) + "\n"
    _written[0] += len(line)
    sys.stdout.write(line)
    sys.stdout.flush()


def stat_of(pid):
    """(ppid, start time in clock ticks) of ``pid``, or None."""
    try:
        with open("/proc/%d/stat" % pid, "rb") as fh:
            data = fh.read()
        fields = data[data.rindex(b")") + 2:].split()
        return int(fields[1]), int(fields[19])
    except (OSError, ValueError, IndexError):
        return None


def chain_of(pid):
    """``pid`` and its parents up to the first one whose parent is outside this pid namespace (0); ``None``
    appended when a link could not be read."""
    out = []
    while pid > 0 and len(out) < 64:
        out.append(pid)
        st = stat_of(pid)
        if st is None:
            out.append(None)
            break
        pid = st[0]
    return out


def main():
    folder = sys.argv[1]
    os.chdir("/")
    path = os.path.join(folder, "s")
    listener = socket.socket(socket.AF_UNIX, socket.SOCK_SEQPACKET)
    listener.bind(path)
    os.chmod(path, 0o666)
    listener.listen(64)
    listener.setblocking(False)
    signal.signal(signal.SIGTERM, lambda *_: _stop.append(1))
    with open(os.path.join(folder, "pid.tmp"), "w") as fh:
        fh.write("%d\n" % os.getpid())
    os.rename(os.path.join(folder, "pid.tmp"), os.path.join(folder, "pid"))  # ready: trialbox waits for this
    conns = {}
    opened = 0
    cmsg_size = socket.CMSG_SPACE(UCRED.size)

    def receive(sock, cid):
        try:
            data, ancdata, flags, _ = sock.recvmsg(MAX_MESSAGE + 1, cmsg_size)
        except (BlockingIOError, InterruptedError):
            return True
        except OSError:
            data, ancdata, flags = b"", [], 0
        if not data:
            emit({"event": "close", "conn": cid})
            sock.close()
            del conns[cid]
            return False
        pid = None
        for level, kind, payload in ancdata:
            if level == socket.SOL_SOCKET and kind == socket.SCM_CREDENTIALS and len(payload) >= UCRED.size:
                pid = UCRED.unpack(payload[:UCRED.size])[0]
        text = data[:MAX_MESSAGE].decode("utf-8", "replace")
        emit({"event": "msg", "conn": cid, "pid": pid, "text": text,
              "truncated": bool(len(data) > MAX_MESSAGE or flags & socket.MSG_TRUNC)})
        return True

    while True:
        if _stop:
            # drain: whatever was sent before the stop is still queued on its connection
            for cid, sock in list(conns.items()):
                sock.setblocking(False)
                while cid in conns and receive(sock, cid):
                    try:
                        ready = select.select([sock], [], [], 0)[0]
                    except (OSError, ValueError):
                        break
                    if not ready:
                        break
            emit({"event": "stopped"} if not _overflowed[0] else {"event": "overflow"})
            _overflowed[0] = True  # nothing after the last line
            return 0
        try:
            ready = select.select([listener] + list(conns.values()), [], [], 0.2)[0]
        except InterruptedError:
            continue
        except (OSError, ValueError):
            ready = []
        for sock in ready:
            if sock is listener:
                try:
                    conn, _ = listener.accept()
                except (BlockingIOError, InterruptedError, OSError):
                    continue
                if len(conns) >= MAX_CONNECTIONS:
                    emit({"event": "refused"})
                    conn.close()
                    continue
                conn.setsockopt(socket.SOL_SOCKET, socket.SO_PASSCRED, 1)
                pid, uid, _gid = UCRED.unpack(conn.getsockopt(socket.SOL_SOCKET, socket.SO_PEERCRED, UCRED.size))
                opened += 1
                cid = opened
                st = stat_of(pid)
                emit({"event": "open", "conn": cid, "pid": pid, "uid": uid, "start": st[1] if st else None,
                      "chain": chain_of(pid)})
                try:
                    conn.setblocking(True)
                    conn.settimeout(1.0)
                    conn.send(b"ok")  # the peer sends nothing before this: every message carries its sender
                except OSError:
                    pass
                conn.setblocking(False)
                conns[cid] = conn
            else:
                for cid, s in list(conns.items()):
                    if s is sock:
                        receive(sock, cid)
                        break


if __name__ == "__main__":
    sys.exit(main())
