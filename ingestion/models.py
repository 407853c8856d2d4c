# Document, Page, IngestionRun and friends arrive with the ingestion feature (issue 4).
