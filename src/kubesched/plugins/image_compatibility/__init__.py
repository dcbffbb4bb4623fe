"""ImageCompatibility: Node Feature Discovery image compatibility, evaluated in process.

An image may carry an OCI artifact (artifactType
``application/vnd.nfd.image-compatibility.v1alpha1``) whose spec lists compatibility sets of
NFD rules; a node is compatible with the image when every rule of at least one set matches the
node's NodeFeature objects.
"""
