"""A second writer for memd's lock tests, speaking the Python memory writer's lock protocol
(c-daly/memory lib/lock.py): create <path> with O_CREAT|O_EXCL (0644), write pid / hostname /
acquired_at / context lines, poll every POLL seconds while it exists, unlink on release.

Usage:
  pylock.py PATH hold [POLL]     acquire (printing "waiting" once if it has to wait), print
                                 "acquired <pid>", wait for one line on stdin, release,
                                 print "released".
  pylock.py PATH count N COUNTER [POLL]
                                 N times: acquire, check no one else is inside (an O_EXCL
                                 marker file), read-increment-write COUNTER, release.
Exits 2 on a timeout (30 s) and 3 when mutual exclusion was broken.
"""
import os
import socket
import sys
import time
from datetime import datetime, timezone

TIMEOUT = 30.0


def metadata(context):
    lines = [
        f"pid: {os.getpid()}",
        f"hostname: {socket.gethostname()}",
        f"acquired_at: {datetime.now(timezone.utc).isoformat()}",
        f"context: {context}",
    ]
    return "\n".join(lines) + "\n"


def acquire(path, poll, context, announce):
    deadline = time.monotonic() + TIMEOUT
    said = False
    while True:
        try:
            fd = os.open(path, os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o644)
        except FileExistsError:
            if announce and not said:
                print("waiting", flush=True)
                said = True
            if time.monotonic() >= deadline:
                print("timeout", flush=True)
                sys.exit(2)
            time.sleep(poll)
            continue
        os.write(fd, metadata(context).encode("utf-8"))
        os.close(fd)
        return


def release(path):
    try:
        os.unlink(path)
    except FileNotFoundError:
        pass


def main():
    path, mode = sys.argv[1], sys.argv[2]
    if mode == "hold":
        poll = float(sys.argv[3]) if len(sys.argv) > 3 else 0.05
        acquire(path, poll, "pylock.hold", True)
        print(f"acquired {os.getpid()}", flush=True)
        sys.stdin.readline()
        release(path)
        print("released", flush=True)
        return
    if mode == "count":
        n, counter = int(sys.argv[3]), sys.argv[4]
        poll = float(sys.argv[5]) if len(sys.argv) > 5 else 0.05
        inside = counter + ".inside"
        for _ in range(n):
            acquire(path, poll, "pylock.count", False)
            try:
                marker = os.open(inside, os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o644)
            except FileExistsError:
                print("overlap", flush=True)
                sys.exit(3)
            os.close(marker)
            with open(counter) as fh:
                value = int(fh.read().strip() or "0")
            with open(counter, "w") as fh:
                fh.write(str(value + 1))
            os.unlink(inside)
            release(path)
        print("done", flush=True)
        return
    sys.exit(f"unknown mode {mode!r}")


if __name__ == "__main__":
    main()
