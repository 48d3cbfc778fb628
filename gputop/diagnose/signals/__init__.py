"""Windows of samples reduced to the handful of numbers the rules reason about, one module
per reading: ``gpu``, ``host``, ``steps``, ``stacks``, and ``inputs`` (all of them together,
what a rule reads). Pure."""
