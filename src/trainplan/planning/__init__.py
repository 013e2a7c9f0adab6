"""Planning: typed inputs from a workload, the one evaluation, sweep grids, solve and decisions."""
