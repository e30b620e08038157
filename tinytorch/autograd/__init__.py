"""tinytorch.autograd: automatic differentiation (module 06), mirroring torch.autograd.

Module 01's dispatch point `apply` records the graph; module 06's engine (engine.py,
generated from modules/06_autograd/autograd.ipynb) walks it backwards with one backward
rule per op name (BACKWARD_RULES); functional.py (the same notebook) pushes a direction
forward through the graph with one forward rule per op name (JVP_RULES).
"""
from tinytorch._tensor import is_grad_enabled, set_grad_enabled
from tinytorch.autograd.engine import (
    BACKWARD_RULES, Function, FunctionCtx, GradcheckError, LogSumExp, Softplus, backward,
    backward_rule, enable_grad, format_graph, grad, gradcheck, logsumexp, no_grad, numerical_grad,
    print_graph, to_dot, topological_order, unbroadcast,
)
from tinytorch.autograd import functional  # forward mode: functional.jvp (module 06, section 17)

__all__ = [
    "backward", "grad", "no_grad", "enable_grad", "is_grad_enabled", "set_grad_enabled",
    "gradcheck", "GradcheckError", "numerical_grad", "unbroadcast", "topological_order",
    "BACKWARD_RULES", "backward_rule", "format_graph", "print_graph", "to_dot",
    "Function", "FunctionCtx", "Softplus", "LogSumExp", "logsumexp", "functional",
]
