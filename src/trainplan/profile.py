"""Kept so that training scripts written against `trainplan.profile` keep working: the profiler
lives in `trainplan.measure.profiler`, and this name is that same module."""

import sys

from trainplan.measure import profiler as _profiler

sys.modules[__name__] = _profiler
