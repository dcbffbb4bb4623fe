"""kubesched.extender."""
