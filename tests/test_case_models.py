"""The case models and the field table are one source: a model with a field the table does
not list (or missing one it lists) is refused where it is defined, and each model field's
description is its table entry's."""

import pytest

from contextlens.fields import TEST_CASE_FIELDS
from contextlens.schemas import CaseModel, ModelTestCase


def test_every_case_model_field_is_described_by_its_table_entry():
    for field in TEST_CASE_FIELDS.fields:
        assert ModelTestCase.model_fields[field.name].description == field.doc
    schema = ModelTestCase.model_json_schema()["properties"]
    assert schema["retrieval_context"]["description"] == TEST_CASE_FIELDS["retrieval_context"].doc


def test_a_model_that_differs_from_its_table_is_refused_where_it_is_defined():
    with pytest.raises(TypeError, match=r"in the model only \['retrieved_chunks'\]"):

        class Misnamed(CaseModel):
            fields_table = TEST_CASE_FIELDS
            retrieved_chunks: list[str] | None = None

    with pytest.raises(TypeError, match=r"in the table only \[.*'retrieval_context'"):

        class Partial(CaseModel):
            fields_table = TEST_CASE_FIELDS
            input: str = ""
