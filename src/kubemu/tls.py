"""Optional HTTPS: a throwaway self-signed certificate for 127.0.0.1, made with openssl."""

from __future__ import annotations

import asyncio
import shutil
import ssl
import tempfile
from dataclasses import dataclass
from pathlib import Path


@dataclass(frozen=True)
class ServingCert:
    """The PEM certificate clients must trust, and the server's SSL context."""

    cert_pem: bytes
    context: ssl.SSLContext


async def make_serving_cert(host: str) -> ServingCert:
    """Self-signed P-256 certificate valid for `host` (an IP) for one day."""
    openssl = shutil.which("openssl")
    if openssl is None:
        raise RuntimeError("HTTPS needs the openssl binary")
    with tempfile.TemporaryDirectory(prefix="eipctl-emulator-") as tmp:
        key, cert = Path(tmp) / "key.pem", Path(tmp) / "cert.pem"
        proc = await asyncio.create_subprocess_exec(
            openssl, "req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1",
            "-nodes", "-days", "1", "-subj", "/CN=eipctl-emulator",
            "-addext", f"subjectAltName=IP:{host}", "-keyout", str(key), "-out", str(cert),
            stdout=asyncio.subprocess.DEVNULL, stderr=asyncio.subprocess.PIPE,
        )  # fmt: skip
        _, err = await proc.communicate()
        if proc.returncode != 0:
            raise RuntimeError(f"openssl failed: {err.decode().strip()}")
        ctx = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
        ctx.load_cert_chain(cert, key)
        return ServingCert(cert.read_bytes(), ctx)
