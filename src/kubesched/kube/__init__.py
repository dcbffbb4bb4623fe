"""kubesched.kube."""
