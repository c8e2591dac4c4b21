"""The floor of a download for bench/files.sh: an HTTP server that does nothing but
answer every request with one file, sent by the kernel (sendfile, no copy in the
server), so what a download from it costs is the client's and the disk's alone.

Prints the port it listens on (127.0.0.1, chosen by the kernel), then serves one
connection at a time until it is killed.

    python3 bench/py/sendfile_server.py FILE
"""

import os
import socket
import sys


def main() -> None:
    path = sys.argv[1]
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen(8)
    print(listener.getsockname()[1], flush=True)
    while True:
        conn, _ = listener.accept()
        with conn:
            request = b""
            while b"\r\n\r\n" not in request:
                data = conn.recv(65536)
                if not data:
                    break
                request += data
            with open(path, "rb") as f:
                size = os.fstat(f.fileno()).st_size
                conn.sendall(
                    b"HTTP/1.1 200 OK\r\nContent-Length: %d\r\nConnection: close\r\n\r\n"
                    % size
                )
                conn.sendfile(f)
            # Close only after the client has: no reset of what it has not read yet.
            conn.shutdown(socket.SHUT_WR)
            while conn.recv(65536):
                pass


if __name__ == "__main__":
    main()
