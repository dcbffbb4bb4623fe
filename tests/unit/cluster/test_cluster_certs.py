"""Certificates of the local control plane."""

from __future__ import annotations

import ipaddress
import stat
from pathlib import Path

from cryptography import x509
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import rsa
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

from kubesched.cluster import CertificateAuthority


def _sans(cert: x509.Certificate) -> tuple[set[str], set[str]]:
    san = cert.extensions.get_extension_for_class(x509.SubjectAlternativeName).value
    return set(san.get_values_for_type(x509.DNSName)), {
        str(ip) for ip in san.get_values_for_type(x509.IPAddress)
    }


def test_apiserver_serving_cert_names_loopback_and_in_cluster_names() -> None:
    ca = CertificateAuthority.generate()
    cert = ca.issue_serving_cert().certificate

    dns, ips = _sans(cert)
    assert dns == {
        "localhost",
        "kubernetes",
        "kubernetes.default",
        "kubernetes.default.svc",
        "kubernetes.default.svc.cluster.local",
    }
    assert ips == {"127.0.0.1", "10.0.0.1"}
    usage = cert.extensions.get_extension_for_class(x509.ExtendedKeyUsage).value
    assert ExtendedKeyUsageOID.SERVER_AUTH in usage
    cert.verify_directly_issued_by(ca.cert)
    assert ipaddress.ip_address("10.0.0.1") in ipaddress.ip_network("10.0.0.0/24")


def test_client_cert_carries_user_as_cn_and_groups_as_o() -> None:
    ca = CertificateAuthority.generate()
    cert = ca.issue_client_cert("kubesched-admin", ["system:masters"]).certificate

    assert [a.value for a in cert.subject.get_attributes_for_oid(NameOID.COMMON_NAME)] == [
        "kubesched-admin"
    ]
    assert [a.value for a in cert.subject.get_attributes_for_oid(NameOID.ORGANIZATION_NAME)] == [
        "system:masters"
    ]
    usage = cert.extensions.get_extension_for_class(x509.ExtendedKeyUsage).value
    assert list(usage) == [ExtendedKeyUsageOID.CLIENT_AUTH]
    cert.verify_directly_issued_by(ca.cert)


def test_client_cert_for_any_user_and_several_groups() -> None:
    ca = CertificateAuthority.generate()
    cert = ca.issue_client_cert("system:serviceaccount:kube-system:kubesched", ["a", "b"])
    subject = cert.certificate.subject

    assert subject.get_attributes_for_oid(NameOID.COMMON_NAME)[0].value == (
        "system:serviceaccount:kube-system:kubesched"
    )
    assert [a.value for a in subject.get_attributes_for_oid(NameOID.ORGANIZATION_NAME)] == [
        "a",
        "b",
    ]


def test_ca_round_trips_through_files_and_keys_are_private(tmp_path: Path) -> None:
    ca = CertificateAuthority.generate()
    ca.write(tmp_path / "ca.crt", tmp_path / "ca.key")

    loaded = CertificateAuthority.load(tmp_path / "ca.crt", tmp_path / "ca.key")

    assert loaded.cert == ca.cert
    assert stat.S_IMODE((tmp_path / "ca.key").stat().st_mode) == 0o600
    assert loaded.cert.extensions.get_extension_for_class(x509.BasicConstraints).value.ca
    loaded.issue_client_cert("x").certificate.verify_directly_issued_by(ca.cert)


def test_service_account_keys_are_a_matching_rsa_pair() -> None:
    from kubesched.cluster._certs import generate_service_account_keys

    pair = generate_service_account_keys()
    private = serialization.load_pem_private_key(pair.key_pem, password=None)
    public = serialization.load_pem_public_key(pair.cert_pem)

    assert isinstance(private, rsa.RSAPrivateKey)
    assert isinstance(public, rsa.RSAPublicKey)
    assert private.public_key().public_numbers() == public.public_numbers()
