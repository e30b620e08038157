"""A stand-in for a Dropout that records what reaches it, shared by the block and GPT tests."""
import pytest

from tinytorch import nn


class DropoutSpy(nn.Module):
    """Passes its input through and keeps a copy of each input it saw."""

    def __init__(self):
        super().__init__()
        self.seen = []

    def forward(self, x):
        self.seen.append(x.numpy().copy())
        return x


@pytest.fixture
def dropout_spy():
    return DropoutSpy
