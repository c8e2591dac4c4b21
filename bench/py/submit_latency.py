"""Submit -> running latency over one kept-alive HTTP connection (bench/jobs.sh).

Each run POSTs a 1-GPU job to $ATRIUM_URL/api/v1/jobs whose first command writes
`date +%s%N` to a file in STAMP_DIR; the latency is that time minus the clock read just
before the request. Runs one job at a time, each waited for until the queue is empty.
Prints one latency in ms per line.

    python3 bench/py/submit_latency.py RUNS STAMP_DIR
"""

import http.client
import json
import os
import sys
import time
import urllib.parse


def main() -> None:
    runs, stamp_dir = int(sys.argv[1]), sys.argv[2]
    url = urllib.parse.urlparse(os.environ["ATRIUM_URL"])
    headers = {
        "Authorization": "Bearer " + os.environ["ATRIUM_TOKEN"],
        "Content-Type": "application/json",
    }
    conn = http.client.HTTPConnection(url.hostname, url.port, timeout=30)

    def call(method: str, path: str, body: str | None = None) -> dict:
        conn.request(method, path, body, headers)
        response = conn.getresponse()
        response_body = response.read()
        if response.status >= 300:
            sys.exit(f"submit_latency: {method} {path}: HTTP {response.status}: {response_body!r}")
        return json.loads(response_body)

    for i in range(runs):
        stamp = os.path.join(stamp_dir, f"http-stamp-{i}")
        script = f"#!/bin/bash\n#SBATCH --gres=gpu:1\ndate +%s%N >{stamp}\n"
        body = json.dumps({"script": script, "working_directory": stamp_dir})
        t0 = time.time_ns()
        call("POST", "/api/v1/jobs", body)
        deadline = time.monotonic() + 120
        while not (os.path.exists(stamp) and os.path.getsize(stamp) > 0):
            if time.monotonic() > deadline:
                sys.exit(f"submit_latency: job {i} did not start within 120 s")
            time.sleep(0.001)
        with open(stamp) as f:
            print(f"{(int(f.read()) - t0) / 1e6:.1f}", flush=True)
        while call("GET", "/api/v1/jobs")["total"] != 0:
            if time.monotonic() > deadline:
                sys.exit(f"submit_latency: job {i} did not finish within 120 s")
            time.sleep(0.02)


if __name__ == "__main__":
    main()
