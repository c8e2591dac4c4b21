"""atrium's proof of a session's token, as a Jupyter Server extension.

On a compute node (sessions under Slurm) the portal reaches the session's server over
TCP at the port named in the session's connection file, which its user can write.
Before it sends the session's token on a new connection, the portal asks the server
there to prove that it knows the token:

    GET <base_url>atrium/proof?challenge=<64 hex digits>

is answered with HMAC-SHA256(token, challenge) in hex. Only the session's own server
(which read the token from its 0600 file) can answer; whatever else listens on the port
never gets a request that carries the token.

Loaded with --ServerApp.jpserver_extensions atrium_proof=True and the session's
directory on PYTHONPATH; the token is the first line of $ATRIUM_SESSION_DIR/token.
"""

import hashlib
import hmac
import os
import re

from tornado import web

CHALLENGE = re.compile(r"[0-9a-f]{64}")


def read_token():
    """The session's token: the first line of its token file."""
    path = os.path.join(os.environ["ATRIUM_SESSION_DIR"], "token")
    with open(path, encoding="utf-8") as f:
        token = f.readline().strip()
    if not token:
        raise RuntimeError(f"atrium_proof: {path} holds no token")
    return token


def answer(token, challenge):
    """The proof for `challenge`: HMAC-SHA256 under the token, in hex."""
    return hmac.new(token.encode(), challenge.encode(), hashlib.sha256).hexdigest()


class ProofHandler(web.RequestHandler):
    """Answers a challenge; needs no login (the answer proves, it does not grant)."""

    def initialize(self, token):
        self.token = token

    def get(self):
        challenge = self.get_query_argument("challenge", "")
        if not CHALLENGE.fullmatch(challenge):
            raise web.HTTPError(400)
        self.set_header("Content-Type", "text/plain")
        self.set_header("Cache-Control", "no-store")
        self.finish(answer(self.token, challenge))


def _jupyter_server_extension_points():
    return [{"module": "atrium_proof"}]


def _load_jupyter_server_extension(serverapp):
    base = serverapp.base_url.rstrip("/")
    serverapp.web_app.add_handlers(
        ".*$", [(base + "/atrium/proof", ProofHandler, {"token": read_token()})]
    )
