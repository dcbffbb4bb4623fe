"""kubesched.bench."""
