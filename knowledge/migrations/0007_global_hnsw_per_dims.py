from django.db import migrations


def create_global_indexes(apps, schema_editor):  # type: ignore[no-untyped-def]
    """One HNSW index per embedding size in use, over every version's searchable chunks of
    that size (the statements of ingestion.index.vector_index_sql; later sizes get theirs
    when their first version is created)."""
    IndexVersion = apps.get_model("knowledge", "IndexVersion")
    for dims in IndexVersion.objects.values_list("dims", flat=True).distinct():
        schema_editor.execute(
            f"CREATE INDEX IF NOT EXISTS chunk_hnsw_d{int(dims)} ON knowledge_chunk "
            f"USING hnsw ((embedding::vector({int(dims)})) vector_cosine_ops) "
            f"WHERE vector_dims(embedding) = {int(dims)} AND searchable"
        )
    for dims in IndexVersion.objects.exclude(image_dims=None).values_list("image_dims", flat=True).distinct():
        schema_editor.execute(
            f"CREATE INDEX IF NOT EXISTS chunk_image_hnsw_d{int(dims)} ON knowledge_chunk "
            f"USING hnsw ((image_embedding::vector({int(dims)})) vector_cosine_ops) "
            f"WHERE vector_dims(image_embedding) = {int(dims)} AND searchable"
        )


def drop_global_indexes(apps, schema_editor):  # type: ignore[no-untyped-def]
    with schema_editor.connection.cursor() as cursor:
        cursor.execute(
            "SELECT indexname FROM pg_indexes WHERE tablename = 'knowledge_chunk' "
            "AND indexname ~ '^chunk_(image_)?hnsw_d[0-9]+$'"
        )
        names = [row[0] for row in cursor.fetchall()]
    for name in names:
        schema_editor.execute(f'DROP INDEX IF EXISTS "{name}"')


class Migration(migrations.Migration):
    dependencies = [
        ("knowledge", "0006_chunk_searchable"),
    ]

    operations = [migrations.RunPython(create_global_indexes, drop_global_indexes)]
