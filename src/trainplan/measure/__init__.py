"""Measurement: probes of this machine, the calibration file, the training-loop profiler."""
