"""NFD image compatibility specs the ImageCompatibility tests attach to images."""

from __future__ import annotations

#: Two sets: AVX-512 (weight 90), or a kernel of major version 6 or later (weight 10).
AVX512_OR_NEW_KERNEL = b"""
version: v1alpha1
compatibilities:
- tag: avx512
  weight: 90
  rules:
  - name: avx512
    matchFeatures:
    - feature: cpu.cpuid
      matchExpressions:
        AVX512F: {op: Exists}
- tag: new-kernel
  weight: 10
  rules:
  - name: kernel
    matchFeatures:
    - feature: kernel.version
      matchExpressions:
        major: {op: Ge, value: ["6"]}
"""

#: One set: an NVIDIA PCI device (weight 5).
NVIDIA_GPU = b"""
version: v1alpha1
compatibilities:
- weight: 5
  rules:
  - name: gpu
    matchFeatures:
    - feature: pci.device
      matchExpressions:
        vendor: {op: In, value: ["10de"]}
"""
