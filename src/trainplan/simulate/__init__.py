"""Simulation beside the formulas: the queue engine of the input pipeline and its report."""
