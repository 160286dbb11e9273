"""heddle's core: the Fusion definition, compiled kernels and their launch, input rules, the run-time
loaders, the reference evaluator, the simulator and the interpreter. Imports nothing above it
(heddle.pytorch, heddle.tuning)."""
