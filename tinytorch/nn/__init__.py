"""tinytorch.nn: layers (modules 03, 04, ...) and `functional` ops, mirroring torch.nn."""
