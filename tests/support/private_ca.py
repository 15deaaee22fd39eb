"""A private certificate authority made at test time with the ``openssl`` command (Debian has it), and a
server certificate it signs for 127.0.0.1 and localhost: what a corporate network's internal CA looks like
to toolmend."""

from __future__ import annotations

import shutil
import subprocess
from dataclasses import dataclass
from pathlib import Path

import pytest


@dataclass(frozen=True)
class PrivateCA:
    ca_cert: str  # trust this and the server certificate verifies
    server_cert: str
    server_key: str


def make_private_ca(folder: Path) -> PrivateCA:
    if shutil.which("openssl") is None:
        pytest.skip("the openssl command is not installed")

    def openssl(*args: str) -> None:
        subprocess.run(["openssl", *args], check=True, capture_output=True, cwd=folder)

    openssl("req", "-x509", "-newkey", "rsa:2048", "-nodes", "-keyout", "ca.key", "-out", "ca.pem", "-days", "2",
            "-subj", "/CN=toolmend test private CA", "-addext", "basicConstraints=critical,CA:TRUE",
            "-addext", "keyUsage=critical,keyCertSign,cRLSign")
    openssl("req", "-newkey", "rsa:2048", "-nodes", "-keyout", "server.key", "-out", "server.csr", "-subj", "/CN=localhost")
    (folder / "server.ext").write_text("subjectAltName=IP:127.0.0.1,DNS:localhost\nextendedKeyUsage=serverAuth\n")
    openssl("x509", "-req", "-in", "server.csr", "-CA", "ca.pem", "-CAkey", "ca.key", "-CAcreateserial",
            "-out", "server.pem", "-days", "1", "-extfile", "server.ext")
    return PrivateCA(str(folder / "ca.pem"), str(folder / "server.pem"), str(folder / "server.key"))
