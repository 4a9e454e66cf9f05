"""mrecord against MindSpore 2.10's recorded outputs (tests/cases/conformance_cases.json)."""
