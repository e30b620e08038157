"""What every compatibility program shares: the same starting weights in both frameworks."""
import numpy as np


def same_start(torch, model, seed=0, scale=0.3):
    """Overwrite every parameter of `model`, in registration order, with numbers drawn from
    one numpy generator: both frameworks start from identical weights."""
    rng = np.random.default_rng(seed)
    with torch.no_grad():
        for _, p in model.named_parameters():
            p.copy_(torch.tensor((rng.standard_normal(tuple(p.shape)) * scale).astype(str(p.dtype).split(".")[-1])))
    return model
