"""A real S3 server on 127.0.0.1 for the tests of issue 26: moto's server mode (the `moto[server]`
package), started on a free port; the clients (s3fs, botocore) reach it through the standard
`AWS_ENDPOINT_URL` variable and read test credentials from the standard variables, as they would
a real store's. Nothing of the client is mocked: requests go over HTTP to the server."""

from __future__ import annotations

import logging
import os
from contextlib import contextmanager
from typing import Iterator

import pytest

CREDENTIALS = {"AWS_ACCESS_KEY_ID": "trainplan-test-key", "AWS_SECRET_ACCESS_KEY": "trainplan-secret-not-to-print",
               "AWS_DEFAULT_REGION": "us-east-1"}


@contextmanager
def s3_server() -> Iterator[str]:
    """Start moto's S3 server on a free port; yield its endpoint URL with the environment set."""
    server_mod = pytest.importorskip("moto.server", reason="moto[server] is not installed (the test extra)")
    pytest.importorskip("s3fs", reason="s3fs is not installed (the s3 extra)")
    logging.getLogger("werkzeug").setLevel(logging.ERROR)  # one line a request otherwise
    server = server_mod.ThreadedMotoServer(ip_address="127.0.0.1", port=0, verbose=False)
    server.start()
    host, port = server.get_host_and_port()
    endpoint = f"http://{host}:{port}"
    saved = {k: os.environ.get(k) for k in [*CREDENTIALS, "AWS_ENDPOINT_URL"]}
    os.environ.update(CREDENTIALS, AWS_ENDPOINT_URL=endpoint)
    import fsspec

    fsspec.filesystem("s3").clear_instance_cache()
    try:
        yield endpoint
    finally:
        server.stop()
        for k, v in saved.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v
        fsspec.filesystem("s3").clear_instance_cache()
