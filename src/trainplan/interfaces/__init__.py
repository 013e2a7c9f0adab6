"""Faces over the one evaluation: the command line and the web page."""
