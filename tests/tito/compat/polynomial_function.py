"""PyTorch's tutorial fit, "defining new autograd functions": y = a + b P3(c + d x) with
P3 the Legendre polynomial of degree 3 written as an `autograd.Function` (forward saves
its input with `ctx.save_for_backward`, backward uses `ctx.saved_tensors`), gradient
descent by hand on four scalar parameters. float64."""
import math

STEPS = 40


def main(torch):
    class LegendrePolynomial3(torch.autograd.Function):
        @staticmethod
        def forward(ctx, input):
            ctx.save_for_backward(input)
            return 0.5 * (5 * input ** 3 - 3 * input)

        @staticmethod
        def backward(ctx, grad_output):
            (input,) = ctx.saved_tensors
            return grad_output * 1.5 * (5 * input ** 2 - 1)

    x = torch.linspace(-math.pi, math.pi, 200, dtype=torch.float64)
    y = torch.sin(x)
    a, b, c, d = (torch.full((), v, dtype=torch.float64, requires_grad=True) for v in (0.0, -1.0, 0.0, 0.3))
    losses = []
    for _ in range(STEPS):
        y_pred = a + b * LegendrePolynomial3.apply(c + d * x)
        loss = (y_pred - y).pow(2).sum()
        loss.backward()
        with torch.no_grad():
            for p in (a, b, c, d):
                p -= 5e-6 * p.grad
                p.grad = None
        losses.append(loss.item())
    return losses
