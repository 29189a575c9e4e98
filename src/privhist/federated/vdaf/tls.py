"""Mutual TLS for the two-aggregator deployment: per-party certificates, identity from them.

Every party (``leader``, ``helper``, ``collector``, ``client-<k>``) holds a key and a
certificate issued out of band by the deployment's certificate authority, whose common name is
the party's identity. Every gRPC link is mutually authenticated TLS: servers require a client
certificate signed by the CA (``require_client_auth``), clients check the server's certificate
against the same CA, and a handler takes the sender's identity from the *verified* peer
certificate (:func:`peer_identity`), never from the message. So one process cannot pose as many
clients (each report needs a certificate of its own) or as the leader or the collector.

:func:`issue` writes a small CA and party certificates for tests, ``privhist federated
vdaf-pki`` and loopback demonstrations; a deployment issues its own (any X.509 CA works as long
as each certificate's common name is the party's identity).
"""

from __future__ import annotations

import datetime
import ipaddress
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import grpc
from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import NameOID

from privhist.core.errors import ProtocolError, ValidationError


@dataclass(frozen=True)
class Credentials:
    """One party's PEM key and certificate, and the CA certificate it trusts."""

    identity: str
    key_pem: bytes
    cert_pem: bytes
    ca_pem: bytes


def _name(cn: str) -> x509.Name:
    return x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, cn)])


def _key_pem(key: ec.EllipticCurvePrivateKey) -> bytes:
    return key.private_bytes(
        serialization.Encoding.PEM,
        serialization.PrivateFormat.PKCS8,
        serialization.NoEncryption(),
    )


def issue(
    directory: str | Path, identities: list[str], hosts: tuple[str, ...] = ("127.0.0.1",)
) -> dict[str, Credentials]:
    """Create a CA and a certificate per identity under ``directory`` (``ca.pem``,
    ``<identity>.key``, ``<identity>.pem``); server certificates name ``hosts`` and
    ``localhost``. Returns the credentials by identity."""
    for ident in identities:
        if not ident or any(c in ident for c in "/\\ ") or ident == "ca":
            raise ValidationError("identities", "tls.issue", "names without / \\ or spaces", ident)
    out_dir = Path(directory)
    out_dir.mkdir(parents=True, exist_ok=True)
    now = datetime.datetime.now(datetime.UTC)
    ca_key = ec.generate_private_key(ec.SECP256R1())
    ca_name = _name("privhist vdaf CA")
    ca_cert = (
        x509.CertificateBuilder()
        .subject_name(ca_name)
        .issuer_name(ca_name)
        .public_key(ca_key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(minutes=5))
        .not_valid_after(now + datetime.timedelta(days=7))
        .add_extension(x509.BasicConstraints(ca=True, path_length=0), critical=True)
        .sign(ca_key, hashes.SHA256())
    )
    ca_pem = ca_cert.public_bytes(serialization.Encoding.PEM)
    (out_dir / "ca.pem").write_bytes(ca_pem)
    san: list[x509.GeneralName] = [x509.DNSName("localhost")]
    for h in hosts:
        try:
            san.append(x509.IPAddress(ipaddress.ip_address(h)))
        except ValueError:
            san.append(x509.DNSName(h))
    creds = {}
    for ident in identities:
        key = ec.generate_private_key(ec.SECP256R1())
        cert = (
            x509.CertificateBuilder()
            .subject_name(_name(ident))
            .issuer_name(ca_name)
            .public_key(key.public_key())
            .serial_number(x509.random_serial_number())
            .not_valid_before(now - datetime.timedelta(minutes=5))
            .not_valid_after(now + datetime.timedelta(days=7))
            .add_extension(x509.SubjectAlternativeName(san), critical=False)
            .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
            .sign(ca_key, hashes.SHA256())
        )
        cert_pem = cert.public_bytes(serialization.Encoding.PEM)
        key_pem = _key_pem(key)
        key_path = out_dir / f"{ident}.key"
        key_path.touch(mode=0o600)
        key_path.chmod(0o600)
        key_path.write_bytes(key_pem)
        (out_dir / f"{ident}.pem").write_bytes(cert_pem)
        creds[ident] = Credentials(ident, key_pem, cert_pem, ca_pem)
    return creds


def load(directory: str | Path, identity: str) -> Credentials:
    """Read ``identity``'s key and certificate and the CA certificate from ``directory``."""
    d = Path(directory)
    try:
        return Credentials(
            identity,
            (d / f"{identity}.key").read_bytes(),
            (d / f"{identity}.pem").read_bytes(),
            (d / "ca.pem").read_bytes(),
        )
    except OSError as exc:
        raise ValidationError("pki", "tls.load", f"a folder with {identity}.key/.pem", d) from exc


def server_credentials(creds: Credentials) -> Any:
    """gRPC server credentials that require a client certificate signed by the CA."""
    return grpc.ssl_server_credentials(
        [(creds.key_pem, creds.cert_pem)],
        root_certificates=creds.ca_pem,
        require_client_auth=True,
    )


def channel_credentials(creds: Credentials) -> Any:
    """gRPC channel credentials presenting this party's certificate."""
    return grpc.ssl_channel_credentials(
        root_certificates=creds.ca_pem,
        private_key=creds.key_pem,
        certificate_chain=creds.cert_pem,
    )


def peer_identity(context: Any) -> str:
    """The common name of the peer's verified certificate (raises if there is none)."""
    auth = context.auth_context()
    names = auth.get("x509_common_name") or []
    if len(names) != 1:
        raise ProtocolError("the peer presented no verified certificate")
    name = names[0]
    return name.decode() if isinstance(name, bytes) else str(name)
