"""tinytorch.utils: small helpers the notebooks share (not part of any module's exercise)."""
