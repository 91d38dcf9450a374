"""The documentation's generated parts: the references under docs/reference/ (configuration,
CLI, HTTP) and the module map in docs/architecture.md, each made from the code it describes.

`python -m docs.gen` writes them (`make docs` runs it); `--check` only says which are stale.
The tests (tests/test_docs_generated.py) hold the committed files equal to what it makes.
"""
