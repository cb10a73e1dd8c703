"""A throw-away S3 endpoint for the tests: moto's server on 127.0.0.1, in a thread of the test process.

    with s3_server() as s3:          # s3.endpoint == "http://127.0.0.1:PORT", bucket s3.bucket exists
        subprocess.run([...], env=s3.env())
        ds.write_dataset(f"s3://{s3.bucket}/ds.zarr", arrays, storage_options=s3.storage_options)

Nothing here talks to anything but the loopback server: every client gets the
endpoint explicitly, and the credentials are moto's dummies.
"""
from __future__ import annotations

import contextlib
import os
from dataclasses import dataclass, field

KEY, SECRET, REGION = "evalcore-test", "evalcore-test-secret", "us-east-1"


@dataclass
class S3Server:
    endpoint: str
    bucket: str
    _server: object = field(repr=False, default=None)

    @property
    def storage_options(self) -> dict:
        """fsspec/s3fs options reaching this server (what parse_storage_options builds from the CLI)."""
        return {"key": KEY, "secret": SECRET, "client_kwargs": {"endpoint_url": self.endpoint, "region_name": REGION}}

    def cli_options(self) -> list[str]:
        """The same as --storage-option arguments."""
        return ["--storage-option", f"endpoint_url={self.endpoint}", "--storage-option", f"key={KEY}",
                "--storage-option", f"secret={SECRET}", "--storage-option", f"region_name={REGION}"]

    def env(self, base: dict | None = None, *, aws: bool = True) -> dict:
        """Environment for a subprocess, with no real AWS configuration in it.

        ``aws=True``: endpoint and credentials the usual way (AWS_ENDPOINT_URL,
        AWS_ACCESS_KEY_ID, AWS_SECRET_ACCESS_KEY). ``aws=False``: no credentials and
        an endpoint where nothing listens, so only --storage-option reaches the server.
        """
        env = dict(os.environ if base is None else base)
        for name in [k for k in env if k.startswith("AWS_")]:
            del env[name]
        # never a shared config, a profile or the instance metadata service
        env.update({"AWS_CONFIG_FILE": os.devnull, "AWS_SHARED_CREDENTIALS_FILE": os.devnull,
                    "AWS_EC2_METADATA_DISABLED": "true", "AWS_DEFAULT_REGION": REGION})
        if aws:
            env.update({"AWS_ACCESS_KEY_ID": KEY, "AWS_SECRET_ACCESS_KEY": SECRET, "AWS_ENDPOINT_URL": self.endpoint})
        else:
            # a closed loopback port: whatever does not get the endpoint from its options fails here,
            # never reaching out to the real AWS
            env["AWS_ENDPOINT_URL"] = f"http://127.0.0.1:{_closed_port()}"
        return env

    def client(self):
        import boto3

        return boto3.client("s3", endpoint_url=self.endpoint, aws_access_key_id=KEY,
                            aws_secret_access_key=SECRET, region_name=REGION)

    def keys(self, prefix: str = "") -> list[str]:
        pages = self.client().get_paginator("list_objects_v2").paginate(Bucket=self.bucket, Prefix=prefix)
        return sorted(obj["Key"] for page in pages for obj in page.get("Contents", []))


def _closed_port() -> int:
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@contextlib.contextmanager
def s3_server(bucket: str = "evalcore"):
    """Start moto's S3 server on 127.0.0.1 (a free port), create ``bucket``, yield an S3Server; stop it after."""
    import logging

    from moto.server import ThreadedMotoServer

    logging.getLogger("werkzeug").setLevel(logging.ERROR)  # no line per request
    server = ThreadedMotoServer(ip_address="127.0.0.1", port=0, verbose=False)
    server.start()
    try:
        host, port = server.get_host_and_port()
        s3 = S3Server(endpoint=f"http://{host}:{port}", bucket=bucket, _server=server)
        s3.client().create_bucket(Bucket=bucket)
        yield s3
    finally:
        server.stop()
