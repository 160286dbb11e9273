"""heddle's torch integration, above the core (heddle.core) and tuning (heddle.tuning):

  custom_ops  kernels as torch custom ops (Kernel.op, torch.ops.heddle.*)
  matmul      heddle.matmul: one custom op per problem signature, automatic schedule (buckets: its M buckets)
  resolver    torch.ops.heddle registers a heddle op from its name on first lookup (torch.export.load)
  autograd    backward formulas for heddle.matmul's ops (eager training)
  export      load_ops(path): register the heddle ops a saved program (an AOTInductor package) calls
  dynamo      the torch.compile backend (`backend="heddle"`) and its graph matcher (dynamo_fuse), loaded
              on demand: they import torch._dynamo, which `import heddle` never does
"""
from . import custom_ops  # noqa: F401  (installs Kernel.op)
from . import resolver  # noqa: F401  (installs torch.ops.heddle's resolver)
from .export import load_ops  # noqa: F401
