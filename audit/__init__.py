"""Who did what: one `Entry` per change that a team admin or an operator may need to trace.

The app sits below every other (it knows no model but the user), so that knowledge,
ingestion and assistant can all record; the pages that show entries are knowledge's, which
knows who may see which team. See docs/audit.md."""
