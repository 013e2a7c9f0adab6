"""Pure accounts: numbers (or numpy arrays) in SI units in, typed results out; no I/O, no defaults."""
