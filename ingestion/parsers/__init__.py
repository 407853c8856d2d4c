"""One module per format (see base.parser_for, which imports them all through `formats`)."""
