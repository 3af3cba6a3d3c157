"""A real S3 implementation on loopback for the remote-input tests: moto's server (not ours), reached
by pyarrow's S3 client exactly as a user's AWS or MinIO endpoint would be."""

from __future__ import annotations

import contextlib
import logging
from collections.abc import Iterator
from dataclasses import dataclass

import pytest

BUCKET = "captures"
# Credentials moto accepts (it checks none); never real ones. No instance-metadata lookups.
ENV = {
    "AWS_ACCESS_KEY_ID": "wirelog-test",
    "AWS_SECRET_ACCESS_KEY": "wirelog-test",
    "AWS_DEFAULT_REGION": "us-east-1",
    "AWS_EC2_METADATA_DISABLED": "true",
}


@dataclass(frozen=True)
class S3:
    endpoint: str  # host:port
    client: object  # a boto3 S3 client for putting test objects

    def put(self, key: str, data: bytes) -> str:
        """Store `data` under `key` in BUCKET; returns its s3:// URI (endpoint from the environment)."""
        self.client.put_object(Bucket=BUCKET, Key=key, Body=data)
        return f"s3://{BUCKET}/{key}"

    @property
    def query(self) -> str:
        """The endpoint as URI options, for processes that do not get AWS_ENDPOINT_URL (Spark workers)."""
        return f"?endpoint_override={self.endpoint}&scheme=http"


@contextlib.contextmanager
def s3_server() -> Iterator[S3]:
    """moto's S3 server on 127.0.0.1 with an empty BUCKET; the AWS_* environment points pyarrow at it."""
    moto_server = pytest.importorskip("moto.server")
    boto3 = pytest.importorskip("boto3")
    logging.getLogger("werkzeug").setLevel(logging.ERROR)  # no request log on stderr
    server = moto_server.ThreadedMotoServer(ip_address="127.0.0.1", port=0, verbose=False)
    server.start()
    host, port = server.get_host_and_port()
    endpoint = f"{host}:{port}"
    try:
        with pytest.MonkeyPatch.context() as mp:
            for key, value in {**ENV, "AWS_ENDPOINT_URL": f"http://{endpoint}"}.items():
                mp.setenv(key, value)
            client = boto3.client("s3", endpoint_url=f"http://{endpoint}")
            client.create_bucket(Bucket=BUCKET)
            yield S3(endpoint, client)
    finally:
        server.stop()
