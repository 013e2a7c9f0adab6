"""Catalogues as data (TOML beside this file, every figure with its unit and source) and their loaders."""
