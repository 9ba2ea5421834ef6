"""Reference model architectures, one module per framework (import only the one you use)."""
