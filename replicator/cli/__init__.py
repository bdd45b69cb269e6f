"""The command line: one module per command, ``main.py`` wires them, ``render.py`` prints."""
