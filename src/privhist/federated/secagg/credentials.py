"""Who may take part: a certificate authority per deployment and one certificate per client id.

The operator issues, out of band, one X.509 certificate per client, signed by a CA that exists
only for the deployment; the client id is in the certificate's subject (common name
``privhist-client-<id>``) and nowhere else. The server is started with the CA's certificate and
requires every connection to present a certificate it signed (mutual TLS): the id of every call
is read from the verified certificate, never from a field the client fills. The server's own
certificate (common name ``privhist-server``) is signed by the same CA, so clients verify the
server with the CA too, and it can never pass for a client.

:func:`issue` writes a deployment's files (``privhist federated credentials``); ``privhist
federated run`` issues fresh ones for its child processes in a private temporary folder.
Keys are P-256 (ECDSA with SHA-256), certificates valid for ``days``.
"""

from __future__ import annotations

import datetime
import ipaddress
import os
import re
from dataclasses import dataclass
from pathlib import Path

from cryptography import x509
from cryptography.exceptions import InvalidSignature
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

from privhist.core.errors import ValidationError

CLIENT_PREFIX = "privhist-client-"
SERVER_NAME = "privhist-server"
_CLIENT_NAME = re.compile(r"privhist-client-(0|[1-9][0-9]{0,6})")
#: client ids are below this (as in the protocol's messages)
MAX_CLIENT_ID = 1 << 20


@dataclass(frozen=True)
class Pem:
    """A PEM private key and its PEM certificate."""

    key: bytes
    cert: bytes


def _key_pem(key: ec.EllipticCurvePrivateKey) -> bytes:
    return key.private_bytes(
        serialization.Encoding.PEM,
        serialization.PrivateFormat.PKCS8,
        serialization.NoEncryption(),
    )


def _name(common: str) -> x509.Name:
    return x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, common)])


def _builder(
    subject: str, issuer: x509.Name, public: ec.EllipticCurvePublicKey, days: int
) -> x509.CertificateBuilder:
    now = datetime.datetime.now(datetime.UTC)
    return (
        x509.CertificateBuilder()
        .subject_name(_name(subject))
        .issuer_name(issuer)
        .public_key(public)
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(minutes=5))
        .not_valid_after(now + datetime.timedelta(days=days))
    )


class Authority:
    """A deployment's certificate authority (its key never leaves the operator)."""

    def __init__(self, days: int = 30) -> None:
        self.days = days
        self._key = ec.generate_private_key(ec.SECP256R1())
        name = _name("privhist federated deployment CA")
        self.cert = (
            _builder("privhist federated deployment CA", name, self._key.public_key(), days)
            .add_extension(x509.BasicConstraints(ca=True, path_length=0), critical=True)
            .add_extension(
                x509.KeyUsage(
                    digital_signature=False,
                    content_commitment=False,
                    key_encipherment=False,
                    data_encipherment=False,
                    key_agreement=False,
                    key_cert_sign=True,
                    crl_sign=True,
                    encipher_only=False,
                    decipher_only=False,
                ),
                critical=True,
            )
            .sign(self._key, hashes.SHA256())
        )

    @property
    def cert_pem(self) -> bytes:
        return self.cert.public_bytes(serialization.Encoding.PEM)

    def _leaf(self, subject: str, usage: x509.ObjectIdentifier, san: list[x509.GeneralName]) -> Pem:
        key = ec.generate_private_key(ec.SECP256R1())
        builder = (
            _builder(subject, self.cert.subject, key.public_key(), self.days)
            .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
            .add_extension(x509.ExtendedKeyUsage([usage]), critical=False)
        )
        if san:
            builder = builder.add_extension(x509.SubjectAlternativeName(san), critical=False)
        cert = builder.sign(self._key, hashes.SHA256())
        return Pem(_key_pem(key), cert.public_bytes(serialization.Encoding.PEM))

    def server(self, host: str) -> Pem:
        """The server's key and certificate for ``host`` (an IP address or a DNS name)."""
        san: list[x509.GeneralName] = [x509.DNSName("localhost")]
        try:
            san.append(x509.IPAddress(ipaddress.ip_address(host)))
        except ValueError:
            san.append(x509.DNSName(host))
        return self._leaf(SERVER_NAME, ExtendedKeyUsageOID.SERVER_AUTH, san)

    def client(self, client_id: int) -> Pem:
        """Client ``client_id``'s key and certificate."""
        if isinstance(client_id, bool) or not isinstance(client_id, int):
            raise ValidationError("client_id", "Authority.client", "an integer", client_id)
        if not 0 <= client_id < MAX_CLIENT_ID:
            raise ValidationError(
                "client_id", "Authority.client", f"in [0, {MAX_CLIENT_ID})", client_id
            )
        return self._leaf(f"{CLIENT_PREFIX}{client_id}", ExtendedKeyUsageOID.CLIENT_AUTH, [])


def client_id_of(common_names: list[bytes]) -> int | None:
    """The client id in a verified certificate's common name, or None (not a client
    certificate)."""
    if len(common_names) != 1:
        return None
    try:
        name = common_names[0].decode("ascii")
    except UnicodeDecodeError:
        return None
    match = _CLIENT_NAME.fullmatch(name)
    if match is None:
        return None
    value = int(match.group(1))
    return value if value < MAX_CLIENT_ID else None


def _private(path: Path, data: bytes) -> None:
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "wb") as f:
        f.write(data)


@dataclass(frozen=True)
class Deployment:
    """Where :func:`issue` wrote a deployment's files."""

    folder: Path
    ca: Path
    server_key: Path
    server_cert: Path

    def client_key(self, client_id: int) -> Path:
        return self.folder / f"client-{client_id}.key"

    def client_cert(self, client_id: int) -> Path:
        return self.folder / f"client-{client_id}.pem"


def issue(folder: str | os.PathLike[str], clients: int, host: str, days: int = 30) -> Deployment:
    """A fresh CA, the server's credentials for ``host`` and one pair per client id
    ``0 .. clients - 1``, written into ``folder`` (private keys readable by the owner only).

    Files: ``ca.pem``; ``server.key``, ``server.pem``; ``client-<id>.key``, ``client-<id>.pem``.
    """
    out = Path(folder)
    out.mkdir(parents=True, exist_ok=True)
    authority = Authority(days)
    ca = out / "ca.pem"
    ca.write_bytes(authority.cert_pem)
    server = authority.server(host)
    _private(out / "server.key", server.key)
    (out / "server.pem").write_bytes(server.cert)
    dep = Deployment(out, ca, out / "server.key", out / "server.pem")
    for u in range(clients):
        pem = authority.client(u)
        _private(dep.client_key(u), pem.key)
        dep.client_cert(u).write_bytes(pem.cert)
    return dep


def read_pem(path: str | os.PathLike[str], what: str, function: str, parameter: str) -> bytes:
    """The bytes of a PEM file, checked to hold a ``what`` (``"key"``, ``"certificate"``); a
    missing or malformed file raises :class:`ValidationError` (one line)."""
    p = Path(path)
    try:
        data = p.read_bytes()
    except OSError as exc:
        raise ValidationError(
            parameter, function, f"a readable PEM {what} file", f"{p} ({exc.strerror})"
        ) from None
    try:
        if what == "key":
            serialization.load_pem_private_key(data, password=None)
        else:
            x509.load_pem_x509_certificates(data)
    except (ValueError, TypeError):
        raise ValidationError(parameter, function, f"a PEM {what} file", str(p)) from None
    return data


def check_pair(key_pem: bytes, cert_pem: bytes, function: str) -> None:
    """Raise :class:`ValidationError` unless the first certificate of ``cert_pem`` is for the
    key ``key_pem``."""
    key = serialization.load_pem_private_key(key_pem, password=None)
    cert = x509.load_pem_x509_certificates(cert_pem)[0]
    same = key.public_key().public_bytes(
        serialization.Encoding.DER, serialization.PublicFormat.SubjectPublicKeyInfo
    ) == cert.public_key().public_bytes(
        serialization.Encoding.DER, serialization.PublicFormat.SubjectPublicKeyInfo
    )
    if not same:
        raise ValidationError(
            "--tls-cert", function, "the certificate of --tls-key", "another key's"
        )


def check_signed_by(cert_pem: bytes, ca_pem: bytes, function: str, parameter: str) -> None:
    """Raise :class:`ValidationError` unless ``cert_pem`` was signed by the CA ``ca_pem``."""
    cert = x509.load_pem_x509_certificates(cert_pem)[0]
    ca = x509.load_pem_x509_certificates(ca_pem)[0]
    try:
        cert.verify_directly_issued_by(ca)
    except (ValueError, TypeError, InvalidSignature):
        raise ValidationError(
            parameter, function, "a certificate signed by --ca", "another issuer's"
        ) from None
