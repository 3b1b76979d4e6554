"""Import order for the zoo tests: ``torch._dynamo`` (loaded by ``torch.export``) pulls
in triton, whose LLVM aborts the process when jaxlib's or TensorFlow's LLVM is loaded
first, so it is imported before either."""

import torch._dynamo  # noqa: F401
