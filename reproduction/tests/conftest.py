"""The reproduction's tests share the product's fixtures (tiny data and checkpoints built
through fairseq's CLIs)."""
from tests.conftest import mono_data, spm_model, tiny_data  # noqa: F401  (pytest fixtures)
