"""Certificates and keys of the local control plane, made with ``cryptography``.

One self-signed CA signs the API server's serving certificate (SANs 127.0.0.1, localhost and the in-cluster
``kubernetes`` Service names) and one client certificate per identity (``CN`` = user, ``O`` = groups), the way
kubeadm lays them out; a separate RSA key signs ServiceAccount tokens. Keys are ECDSA P-256 (the service-account key
is RSA 2048, which every token consumer accepts). Validity: 1 year — a dev cluster lives for a session.
"""

from __future__ import annotations

import datetime as dt
import ipaddress
from dataclasses import dataclass
from pathlib import Path

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec, rsa
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

VALIDITY = dt.timedelta(days=365)


@dataclass(frozen=True)
class Pair:
    """Paths of one PEM certificate and its PEM private key."""

    cert: Path
    key: Path


@dataclass(frozen=True)
class Pki:
    """Every file the control plane needs, under one directory.

    Attributes:
        ca: the cluster CA (also the client CA and the kubeconfigs' ``certificate-authority``).
        apiserver: kube-apiserver's serving certificate.
        admin: client ``admin`` in group ``system:masters``.
        controller_manager: client ``system:kube-controller-manager``.
        scheduler: client ``system:kube-scheduler``.
        sa_key: RSA private key that signs ServiceAccount tokens (PEM, PKCS#8).
        sa_pub: its public key (PEM).
    """

    ca: Pair
    apiserver: Pair
    admin: Pair
    controller_manager: Pair
    scheduler: Pair
    sa_key: Path
    sa_pub: Path


def _write_key(path: Path, key: ec.EllipticCurvePrivateKey | rsa.RSAPrivateKey) -> None:
    path.write_bytes(
        key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption())
    )
    path.chmod(0o600)


def _name(common_name: str, groups: tuple[str, ...] = ()) -> x509.Name:
    attrs = [x509.NameAttribute(NameOID.ORGANIZATION_NAME, g) for g in groups]
    return x509.Name([*attrs, x509.NameAttribute(NameOID.COMMON_NAME, common_name)])


def _sign(
    subject: x509.Name,
    public_key: ec.EllipticCurvePublicKey,
    issuer: x509.Name,
    issuer_key: ec.EllipticCurvePrivateKey,
    *,
    ca: bool = False,
    usages: tuple[x509.ObjectIdentifier, ...] = (),
    sans: list[x509.GeneralName] | None = None,
) -> x509.Certificate:
    now = dt.datetime.now(dt.UTC)
    builder = (
        x509.CertificateBuilder()
        .subject_name(subject)
        .issuer_name(issuer)
        .public_key(public_key)
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - dt.timedelta(minutes=5))
        .not_valid_after(now + VALIDITY)
        .add_extension(x509.BasicConstraints(ca=ca, path_length=None), critical=True)
        .add_extension(
            x509.KeyUsage(
                digital_signature=True, key_encipherment=not ca, key_cert_sign=ca, crl_sign=ca,
                content_commitment=False, data_encipherment=False, key_agreement=False,
                encipher_only=False, decipher_only=False,
            ),
            critical=True,
        )
    )
    if usages:
        builder = builder.add_extension(x509.ExtendedKeyUsage(list(usages)), critical=False)
    if sans:
        builder = builder.add_extension(x509.SubjectAlternativeName(sans), critical=False)
    return builder.sign(issuer_key, hashes.SHA256())


def _write_pair(directory: Path, stem: str, cert: x509.Certificate, key: ec.EllipticCurvePrivateKey) -> Pair:
    pair = Pair(directory / f"{stem}.crt", directory / f"{stem}.key")
    pair.cert.write_bytes(cert.public_bytes(serialization.Encoding.PEM))
    _write_key(pair.key, key)
    return pair


def make_pki(directory: Path, service_ip: str) -> Pki:
    """Create the CA, serving and client certificates and the service-account key pair in ``directory``.

    Args:
        directory: created if missing; files are overwritten.
        service_ip: the ``kubernetes`` Service's cluster IP (first address of the service range), put in the
            serving certificate like kubeadm does.
    """
    directory.mkdir(parents=True, exist_ok=True)
    ca_key = ec.generate_private_key(ec.SECP256R1())
    ca_name = _name("glm-localcluster-ca")
    ca_cert = _sign(ca_name, ca_key.public_key(), ca_name, ca_key, ca=True)
    ca = _write_pair(directory, "ca", ca_cert, ca_key)

    def leaf(stem: str, cn: str, groups: tuple[str, ...], server: bool) -> Pair:
        key = ec.generate_private_key(ec.SECP256R1())
        sans: list[x509.GeneralName] | None = None
        usages = (ExtendedKeyUsageOID.CLIENT_AUTH,)
        if server:
            usages = (ExtendedKeyUsageOID.SERVER_AUTH,)
            sans = [
                x509.IPAddress(ipaddress.ip_address("127.0.0.1")),
                x509.IPAddress(ipaddress.ip_address(service_ip)),
                *(x509.DNSName(n) for n in (
                    "localhost", "kubernetes", "kubernetes.default", "kubernetes.default.svc",
                    "kubernetes.default.svc.cluster.local",
                )),
            ]
        cert = _sign(_name(cn, groups), key.public_key(), ca_name, ca_key, usages=usages, sans=sans)
        return _write_pair(directory, stem, cert, key)

    sa_private = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    sa_key, sa_pub = directory / "sa.key", directory / "sa.pub"
    _write_key(sa_key, sa_private)
    sa_pub.write_bytes(
        sa_private.public_key().public_bytes(
            serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo
        )
    )
    return Pki(
        ca=ca,
        apiserver=leaf("apiserver", "kube-apiserver", (), server=True),
        admin=leaf("admin", "admin", ("system:masters",), server=False),
        controller_manager=leaf("controller-manager", "system:kube-controller-manager", (), server=False),
        scheduler=leaf("scheduler", "system:kube-scheduler", (), server=False),
        sa_key=sa_key,
        sa_pub=sa_pub,
    )
