"""The model zoo: 19 models in PyTorch, JAX and TensorFlow over shared weights (docs/zoo.md)."""
