"""Serve TensorBoard on a unix socket, for atrium's TensorBoard sessions.

TensorBoard can only listen on TCP ports, which every user of a node can reach. This
launcher builds TensorBoard's own WSGI application and serves it, threaded, on a unix
socket that only the session's owner may open (mode 0600); the portal's proxy connects
to that socket.

    python3 tensorboard_unix.py --sock PATH --logdir DIR --path_prefix /user/U/S [flags]

Every flag other than --sock is TensorBoard's own. --load_fast defaults to "false"
here: the faster loader runs a helper that serves the logs over gRPC on a TCP port of
localhost, which any local user could read.

The socket file is replaced when a stale socket is in the way (never a file of another
kind) and removed on exit. SIGTERM, SIGINT and SIGHUP stop the server; exit status 0.
Run it with the Python that has the tensorboard package.
"""

import argparse
import logging
import mimetypes
import os
import signal
import socket
import stat
import sys

# Exit statuses.
OK = 0
USAGE = 2
FAILED = 1

# Bytes written to the wake-up pipe by the server thread (signals write their number).
SERVER_STOPPED = b"\xff"


def parse_arguments(argv):
    """Split argv into the socket path and TensorBoard's own arguments."""
    parser = argparse.ArgumentParser(
        prog="tensorboard_unix.py",
        description="Serve TensorBoard on a unix socket.",
        epilog="All other arguments are passed to TensorBoard.",
    )
    parser.add_argument("--sock", required=True, help="path of the unix socket")
    ours, theirs = parser.parse_known_args(argv)
    if not any(a == "--load_fast" or a.startswith("--load_fast=") for a in theirs):
        theirs.append("--load_fast=false")
    return ours.sock, theirs


def clear_stale_socket(path):
    """Remove a socket left behind at `path`; refuse to remove anything else."""
    try:
        mode = os.lstat(path).st_mode
    except FileNotFoundError:
        return
    if not stat.S_ISSOCK(mode):
        raise SystemExit(f"tensorboard_unix: {path} exists and is not a socket")
    probe = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        probe.connect(path)
    except OSError:
        os.unlink(path)  # nobody listens: stale
    else:
        raise SystemExit(f"tensorboard_unix: a server already listens on {path}")
    finally:
        probe.close()


def unix_server_class(wake_fd):
    """TensorBoard's server hook, bound to the wake-up pipe; imported lazily so that
    --help works without TensorBoard."""
    from tensorboard import program
    from werkzeug import serving

    class RequestHandler(serving.WSGIRequestHandler):
        """HTTP/1.1 with keep-alive, as TensorBoard's own server speaks."""

        protocol_version = "HTTP/1.1"

    class UnixSocketServer(serving.ThreadedWSGIServer, program.TensorBoardServer):
        """Werkzeug's threaded WSGI server on a unix socket (`unix://PATH` host)."""

        daemon_threads = True

        def __init__(self, path, wsgi_app, flags):
            self._path = path
            self._flags = flags
            # Created 0600 from the start: no moment where others could connect.
            old_umask = os.umask(0o177)
            try:
                super().__init__("unix://" + path, 0, wsgi_app, RequestHandler)
            finally:
                os.umask(old_umask)
            os.chmod(path, 0o600)
            # As TensorBoard's own server: werkzeug's logger inherits the root level
            # (WARNING) instead of logging every request.
            self.log("debug", "werkzeug logger initialised")
            logging.getLogger("werkzeug").setLevel(logging.NOTSET)

        def server_bind(self):
            # http.server's server_bind treats the address as (host, port) and looks
            # the "host" up in DNS; a unix socket has neither.
            socket.socket.bind(self.socket, self.server_address)
            self.server_address = self.socket.getsockname()
            self.server_name = "localhost"
            self.server_port = 0

        def serve_forever(self, poll_interval=0.5):
            try:
                super().serve_forever(poll_interval)
            finally:
                os.write(wake_fd, SERVER_STOPPED)

        def get_url(self):
            return "http+unix://%s%s/" % (
                self._path.replace("/", "%2F"),
                self._flags.path_prefix.rstrip("/"),
            )

        def remove_socket(self):
            try:
                if stat.S_ISSOCK(os.lstat(self._path).st_mode):
                    os.unlink(self._path)
            except FileNotFoundError:
                pass

    return UnixSocketServer


def main(argv):
    path, tensorboard_argv = parse_arguments(argv[1:])
    path = os.path.abspath(path)
    if len(os.fsencode(path)) >= 108:  # sizeof(sun_path) on Linux, with its NUL
        print(f"tensorboard_unix: socket path too long: {path}", file=sys.stderr)
        return USAGE
    clear_stale_socket(path)

    # Signals and the server thread's end both write to this pipe; the main thread
    # blocks reading it. (No Python-level locking in signal handlers.)
    wake_read, wake_write = os.pipe()
    os.set_blocking(wake_write, False)
    signal.set_wakeup_fd(wake_write)
    for signum in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP):
        signal.signal(signum, lambda *_: None)

    from tensorboard import program

    server_class = unix_server_class(wake_write)
    servers = []

    def make_server(wsgi_app, flags):
        server = server_class(path, wsgi_app, flags)
        servers.append(server)
        return server

    # The types TensorBoard's own entry point registers before serving.
    mimetypes.add_type("text/javascript", ".js")
    mimetypes.add_type("font/woff2", ".woff2")
    mimetypes.add_type("text/html", ".html")

    board = program.TensorBoard(server_class=make_server)
    try:
        board.configure(argv=["tensorboard", *tensorboard_argv])
    except ValueError as e:
        print(f"tensorboard_unix: {e}", file=sys.stderr)
        return USAGE
    try:
        url = board.launch()
    except program.TensorBoardServerException as e:
        print(f"tensorboard_unix: {e.msg}", file=sys.stderr)
        return FAILED
    server = servers[0]
    print(f"TensorBoard serving at {url}", file=sys.stderr, flush=True)
    try:
        woke_by = os.read(wake_read, 1)
    finally:
        server.shutdown()
        server.server_close()
        server.remove_socket()
    if woke_by == SERVER_STOPPED:
        print("tensorboard_unix: the server stopped on its own", file=sys.stderr)
        return FAILED
    return OK


if __name__ == "__main__":
    sys.exit(main(sys.argv))
