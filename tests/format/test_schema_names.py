"""Two schemas, two names: ``StoredSchema`` (the fields in a dataset's files) and
``mrecord.Schema`` (MindSpore's ``dataset.Schema`` of a pipeline source's columns)."""

from __future__ import annotations

import mrecord
from mrecord import DatasetReader
from mrecord.format import schema as format_schema
from mrecord.format.schema import StoredSchema, parse_schema
from mrecord.pipeline.sources.schema import Schema as PipelineSchema
from tests.factory import MakeDataset


def test_the_public_schema_is_mindspores_pipeline_schema() -> None:
    assert mrecord.Schema is PipelineSchema
    assert not issubclass(mrecord.Schema, StoredSchema)
    columns = mrecord.Schema()
    columns.add_column("label", de_type=mrecord.int32)
    assert columns.column_names() == ["label"]


def test_a_dataset_and_parse_schema_give_a_stored_schema(make_dataset: MakeDataset) -> None:
    with DatasetReader.open(make_dataset(10)) as reader:
        assert isinstance(reader.schema, StoredSchema)
        assert reader.schema.names == ["id", "label", "vec", "blob", "text", "points"]
    assert isinstance(parse_schema({"x": {"type": "int64"}}), StoredSchema)


def test_the_old_name_still_imports() -> None:
    """Code written against ``mrecord.format.schema.Schema`` keeps working."""
    assert format_schema.Schema is StoredSchema
