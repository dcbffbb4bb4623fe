"""The two OCI registries the image-compatibility tests run on loopback, as :class:`GoTool`\\ s.

Both are built from the Go module ``hack/registry`` and cached per version like the control
plane's binaries:

    <cache>/bin/distribution-v3.1.2/registry
    <cache>/bin/ociregistry-<version>/ociserver

``registry`` is the CNCF distribution registry with only the storage drivers (filesystem,
in-memory) and authentication (htpasswd, token) a local registry needs; its upstream command
also links the cloud storage drivers. Distribution v3 has no Referrers API: clients find
referrers there through the referrers tag schema. ``ociserver`` serves
cuelabs.dev/go/oci/ociregistry's in-memory registry, which implements the Referrers API with its
``artifactType`` filter (conformant to the OCI distribution spec 1.1).
"""

from __future__ import annotations

from kubesched.cluster._gotools import GoTool

DISTRIBUTION_REGISTRY = GoTool(
    command="registry",
    hack="registry",
    module="github.com/distribution/distribution/v3",
    package="./cmd/registry",
    prefix="distribution",
    version_variable="github.com/distribution/distribution/v3/version.version",
    version_args=("--version",),
    version_text="github.com/distribution/distribution/v3 {version}",
)

OCISERVER = GoTool(
    command="ociserver",
    hack="registry",
    module="cuelabs.dev/go/oci/ociregistry",
    package="./cmd/ociserver",
    prefix="ociregistry",
    version_variable="main.version",
    version_args=("-version",),
    version_text="ociserver cuelabs.dev/go/oci/ociregistry {version}",
)

#: Every registry the tests start, in the order ``kubesched cluster binaries`` builds them.
REGISTRIES = (DISTRIBUTION_REGISTRY, OCISERVER)
