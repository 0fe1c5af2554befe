"""What a rank that fairseq spawns sees of ``patch_scope`` (``tests/test_patch_scope.py``): a fresh
process, which loads the plugin as ``fairseq_cli.train.main`` does, then asks whether a change
with no task of its own serves."""


def served_after_loading() -> bool:
    from fairseq_ext import plugin
    from fairseq_ext.fairseq_changes import patch_scope

    plugin.load()
    return patch_scope.serves()
