"""heddle's torch integration: matmul (heddle.matmul and its custom ops), autograd (eager backward),
dynamo + dynamo_fuse (the torch.compile backend, loaded on demand)."""
