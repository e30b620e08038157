"""Fixtures shared by module 06's tests."""
import pytest

from tinytorch import autograd


@pytest.fixture
def custom_rules():
    """Register test-only backward rules; removed afterwards."""
    added = []

    def register(op, rule):
        autograd.BACKWARD_RULES[op] = rule
        added.append(op)

    yield register
    for op in added:
        autograd.BACKWARD_RULES.pop(op, None)
