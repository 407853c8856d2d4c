"""One module per format; formats.py lists them all (formats.parser_for picks one)."""
