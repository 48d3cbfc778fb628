"""Bounded captures for later analysis (py-spy flame graphs and dumps; torch traces, memory
snapshots and nsys windows follow): one private folder each, with a manifest."""
