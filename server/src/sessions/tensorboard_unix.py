"""Serve TensorBoard on a unix socket, for atrium's TensorBoard sessions.

TensorBoard can only listen on TCP ports, which every user of a node can reach. This
launcher builds TensorBoard's own WSGI application and serves it, threaded, on a unix
socket that only the session's owner may open (mode 0600); the portal's proxy connects
to that socket.

    python3 tensorboard_unix.py --sock PATH --logdir DIR --path_prefix /user/U/S [flags]

On a compute node (sessions under Slurm) the portal reaches the server over TCP: the
launcher binds a free port of the --listen address itself (no moment where another
process could take it), answers only requests carrying "Authorization: token T" with
the token read from --token-file, and then writes {"host": ..., "port": ...} to
--connection-file (atomically, by renaming). Before it sends the token, the portal asks
GET <path_prefix>/atrium/proof?challenge=C, answered with HMAC-SHA256(T, C) in hex.

    python3 tensorboard_unix.py --listen ADDR --token-file PATH --connection-file PATH \
        --logdir DIR --path_prefix /user/U/S [flags]

Every other flag is TensorBoard's own. --load_fast defaults to "false"
here: the faster loader runs a helper that serves the logs over gRPC on a TCP port of
localhost, which any local user could read.

The socket file is replaced when a stale socket is in the way (never a file of another
kind) and removed on exit. SIGTERM, SIGINT and SIGHUP stop the server; exit status 0.
Run it with the Python that has the tensorboard package.
"""

import argparse
import hashlib
import hmac
import json
import logging
import mimetypes
import os
import re
import signal
import socket
import stat
import sys
import urllib.parse

# Exit statuses.
OK = 0
USAGE = 2
FAILED = 1

# Bytes written to the wake-up pipe by the server thread (signals write their number).
SERVER_STOPPED = b"\xff"


def parse_arguments(argv):
    """Split argv into ours (where to listen) and TensorBoard's own arguments."""
    parser = argparse.ArgumentParser(
        prog="tensorboard_unix.py",
        description="Serve TensorBoard on a unix socket, or on TCP with a token.",
        epilog="All other arguments are passed to TensorBoard.",
    )
    where = parser.add_mutually_exclusive_group(required=True)
    where.add_argument("--sock", help="path of the unix socket")
    where.add_argument("--listen", help="address to serve on, on a free TCP port")
    parser.add_argument("--token-file", help="with --listen: the file holding the token")
    parser.add_argument(
        "--connection-file", help="with --listen: where to write the host and port"
    )
    ours, theirs = parser.parse_known_args(argv)
    if ours.listen is not None and not (ours.token_file and ours.connection_file):
        parser.error("--listen needs --token-file and --connection-file")
    if not any(a == "--load_fast" or a.startswith("--load_fast=") for a in theirs):
        theirs.append("--load_fast=false")
    return ours, theirs


def read_token(path):
    """The session's token: the file's first line, which must not be empty."""
    with open(path, encoding="utf-8") as f:
        token = f.readline().strip()
    if not token:
        raise SystemExit(f"tensorboard_unix: {path} holds no token")
    return token


def proof(token, challenge):
    """The answer to the portal's challenge: HMAC-SHA256 under the token, in hex."""
    return hmac.new(token.encode(), challenge.encode(), hashlib.sha256).hexdigest()


def token_required(app, token, path_prefix=""):
    """Wrap a WSGI app: requests without "Authorization: token <token>" get 403, but
    GET <path_prefix>/atrium/proof?challenge=<64 hex> is answered with the proof that
    this server knows the token (the portal asks before it sends the token)."""
    expected = ("token " + token).encode()
    proof_path = path_prefix.rstrip("/") + "/atrium/proof"

    def guarded(environ, start_response):
        if environ.get("PATH_INFO") == proof_path:
            query = urllib.parse.parse_qs(environ.get("QUERY_STRING", ""))
            challenge = query.get("challenge", [""])[0]
            if not re.fullmatch(r"[0-9a-f]{64}", challenge):
                start_response("400 Bad Request", [("Content-Length", "0")])
                return [b""]
            answer = proof(token, challenge).encode()
            start_response(
                "200 OK",
                [
                    ("Content-Type", "text/plain"),
                    ("Content-Length", str(len(answer))),
                    ("Cache-Control", "no-store"),
                ],
            )
            return [answer]
        given = environ.get("HTTP_AUTHORIZATION", "").encode()
        if not hmac.compare_digest(given, expected):
            start_response(
                "403 Forbidden",
                [("Content-Type", "text/plain"), ("Content-Length", "10")],
            )
            return [b"forbidden\n"]
        return app(environ, start_response)

    return guarded


def write_connection(path, port):
    """{"host": this node, "port": port} at `path`, replaced in one rename."""
    new = path + ".new"
    with open(new, "w", encoding="utf-8") as f:
        json.dump({"host": socket.gethostname(), "port": port}, f)
        f.write("\n")
    os.replace(new, path)


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


def server_class(wake_fd, token=None):
    """TensorBoard's server hook, bound to the wake-up pipe: on a unix socket, or with
    a token on a free TCP port. Imported lazily so that --help works without
    TensorBoard."""
    from tensorboard import program
    from werkzeug import serving

    class RequestHandler(serving.WSGIRequestHandler):
        """HTTP/1.1 with keep-alive, as TensorBoard's own server speaks."""

        protocol_version = "HTTP/1.1"

    class Server(serving.ThreadedWSGIServer, program.TensorBoardServer):
        """Werkzeug's threaded WSGI server that wakes the main thread when it stops."""

        daemon_threads = True

        def quiet(self):
            # As TensorBoard's own server: werkzeug's logger inherits the root level
            # (WARNING) instead of logging every request.
            self.log("debug", "werkzeug logger initialised")
            logging.getLogger("werkzeug").setLevel(logging.NOTSET)

        def serve_forever(self, poll_interval=0.5):
            try:
                super().serve_forever(poll_interval)
            finally:
                os.write(wake_fd, SERVER_STOPPED)

    class UnixSocketServer(Server):
        """On a unix socket (`unix://PATH` host)."""

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
            self.quiet()

        def server_bind(self):
            # http.server's server_bind treats the address as (host, port) and looks
            # the "host" up in DNS; a unix socket has neither.
            socket.socket.bind(self.socket, self.server_address)
            self.server_address = self.socket.getsockname()
            self.server_name = "localhost"
            self.server_port = 0

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

    class TokenTcpServer(Server):
        """On port 0 of the address: the kernel picks a free port while the socket is
        bound, so nothing can take it first. Every request must carry the token."""

        def __init__(self, host, wsgi_app, flags):
            self._flags = flags
            super().__init__(
                host,
                0,
                token_required(wsgi_app, token, flags.path_prefix),
                RequestHandler,
            )
            self.quiet()

        def get_url(self):
            return "http://%s:%d%s/" % (
                socket.gethostname(),
                self.server_port,
                self._flags.path_prefix.rstrip("/"),
            )

        def remove_socket(self):
            pass

    return UnixSocketServer if token is None else TokenTcpServer


def main(argv):
    ours, tensorboard_argv = parse_arguments(argv[1:])
    if ours.sock is not None:
        path = os.path.abspath(ours.sock)
        if len(os.fsencode(path)) >= 108:  # sizeof(sun_path) on Linux, with its NUL
            print(f"tensorboard_unix: socket path too long: {path}", file=sys.stderr)
            return USAGE
        clear_stale_socket(path)
    else:
        token = read_token(ours.token_file)

    # Signals and the server thread's end both write to this pipe; the main thread
    # blocks reading it. (No Python-level locking in signal handlers.)
    wake_read, wake_write = os.pipe()
    os.set_blocking(wake_write, False)
    signal.set_wakeup_fd(wake_write)
    for signum in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP):
        signal.signal(signum, lambda *_: None)

    from tensorboard import program

    servers = []
    if ours.sock is not None:
        where, server_type = path, server_class(wake_write)
    else:
        where, server_type = ours.listen, server_class(wake_write, token)

    def make_server(wsgi_app, flags):
        server = server_type(where, wsgi_app, flags)
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
    if ours.listen is not None:
        write_connection(ours.connection_file, server.server_port)
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
