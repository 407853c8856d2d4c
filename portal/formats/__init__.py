"""Dates and times in one form in every page, English and Chinese alike (FORMAT_MODULE_PATH):
2026-12-04 16:08, never 12/04/2026 4:08 p.m. on one page and 2026-12-04 16:08:39 on the next."""
