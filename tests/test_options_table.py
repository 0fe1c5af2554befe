"""docs/options.md is what ``fairseq_ext.options_table`` generates from the dataclass configs
(regenerate with ``python -m fairseq_ext.options_table > docs/options.md``), and the table
reads the configs rather than a copy: a changed default shows up in it."""

import dataclasses

from fairseq_ext import options_table
from fairseq_ext.common.config_fields import Range, option
from fairseq_ext.models.hi_cmlm_transformer import HiCMLMConfig
from tests.conftest import ROOT


def test_committed_options_page_equals_the_generated_one():
    committed = (ROOT / "docs" / "options.md").read_text(encoding="utf-8")
    assert committed == options_table.options_page(), (
        "docs/options.md is stale: python -m fairseq_ext.options_table > docs/options.md"
    )


def test_every_plugin_model_task_and_criterion_has_a_section():
    page = options_table.options_page()
    for name in (
        "hi_cmlm_transformer",
        "prophetnet",
        "unilm_transformer",
        "position_masked_roberta",
        "cmlm_hybrid",
        "translation_prophetnet",
        "prophetnet_denoising",
        "position_masked_lm",
        "unilm_seq2seq",
        "permutation_lm",
        "ngram_language_loss",
    ):
        assert f"`{name}`" in page.split("## ", 1)[1], name


def test_a_row_shows_the_configs_default_range_and_help():
    section = options_table.section("Model", "hi_cmlm_transformer", HiCMLMConfig)
    row = next(line for line in section.splitlines() if line.startswith("| `--copy-temperature`"))
    field = next(f for f in dataclasses.fields(HiCMLMConfig) if f.name == "copy_temperature")
    assert row == f"| `--copy-temperature` | `{field.default}` | > 0 | {field.metadata['help']} |"

    @dataclasses.dataclass
    class Changed(HiCMLMConfig):
        copy_temperature: float = option(0.7, "another help", range=Range(0.1, 2, high_open=True))

    changed = options_table.section("Model", "x", Changed)
    assert "| `--copy-temperature` | `0.7` | in [0.1, 2) | another help |" in changed


# numeric options whose range depends on another option: the model checks them together
CROSS_CHECKED = {("prophetnet", "relative_max_distance")}


def test_every_numeric_option_states_its_range_in_its_config():
    """The range each option is checked against at build time is the one its config states
    (and the table shows): no numeric option is left without one."""
    missing = []
    for _kind, name, config, _note in options_table.registered():
        for f in options_table._own_fields(config):
            if (
                f.type in (int, float)
                and "range" not in f.metadata
                and (name, f.name) not in CROSS_CHECKED
            ):
                missing.append(f"{name} --{f.name.replace('_', '-')}")
    assert not missing, missing
