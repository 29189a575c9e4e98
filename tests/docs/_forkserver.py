"""Run the docs' ``privhist`` commands without paying the interpreter's start-up each time.

``python _forkserver.py SOCKET`` imports the command line once (with NumPy, Polars and the rest),
then serves requests on a Unix socket: each request brings the caller's standard streams (as file
descriptors), its argv, working directory and environment; the server forks, the child takes
them over and runs ``privhist.cli.main.main(argv)`` (what the installed ``privhist`` script runs),
and the exit status goes back to the caller. Every command runs in a fresh fork, so no state
carries over from one command to the next. ``python _forkserver.py --client SOCKET ARGS...`` is
the caller (it imports nothing heavy).
"""

from __future__ import annotations

import json
import os
import socket
import struct
import sys
import traceback


def _recv_exact(conn: socket.socket, n: int) -> bytes:
    data = b""
    while len(data) < n:
        chunk = conn.recv(n - len(data))
        if not chunk:
            raise ConnectionError("caller went away")
        data += chunk
    return data


def _child(fds: list[int], request: dict[str, object]) -> int:
    for target, fd in enumerate(fds):
        os.dup2(fd, target)
        os.close(fd)
    os.chdir(str(request["cwd"]))
    env = request["env"]
    assert isinstance(env, dict)
    os.environ.clear()
    os.environ.update({str(k): str(v) for k, v in env.items()})
    argv = [str(a) for a in request["argv"]]  # type: ignore[attr-defined]
    sys.argv = ["privhist", *argv]
    from privhist.cli.main import main

    try:
        code = main(argv)
    except SystemExit as stop:
        code = stop.code if isinstance(stop.code, int) else (0 if stop.code is None else 1)
    except BaseException:
        traceback.print_exc()
        code = 1
    sys.stdout.flush()
    sys.stderr.flush()
    return int(code or 0)


def serve(path: str) -> None:
    # the expensive imports, done once: the parser imports every command and planner module
    import privhist.engines.local.weighting
    import privhist.mechanisms.user_level.caps
    import privhist.session  # noqa: F401
    from privhist.cli.main import _parser

    _parser()

    server = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    server.bind(path)
    server.listen(8)
    print("ready", flush=True)
    while True:
        conn, _ = server.accept()
        with conn:
            size = struct.unpack("!I", _recv_exact(conn, 4))[0]
            msg, fds, _, _ = socket.recv_fds(conn, size, 3)
            while len(msg) < size:
                msg += _recv_exact(conn, size - len(msg))
            request = json.loads(msg)
            pid = os.fork()
            if pid == 0:
                server.close()
                conn.close()
                os._exit(_child(fds, request))
            for fd in fds:
                os.close(fd)
            _, status = os.waitpid(pid, 0)
            conn.sendall(struct.pack("!i", os.waitstatus_to_exitcode(status)))


def client(path: str, argv: list[str]) -> int:
    payload = json.dumps({"argv": argv, "cwd": os.getcwd(), "env": dict(os.environ)}).encode()
    conn = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    conn.connect(path)
    conn.sendall(struct.pack("!I", len(payload)))
    socket.send_fds(conn, [payload], [0, 1, 2])
    code = struct.unpack("!i", _recv_exact(conn, 4))[0]
    return code if code >= 0 else 128 - code


if __name__ == "__main__":
    if sys.argv[1] == "--client":
        sys.exit(client(sys.argv[2], sys.argv[3:]))
    serve(sys.argv[1])
