"""``python -m fairseq_ext.fairseq_changes``: the table of changes, as ``docs/fairseq-patches.md``
shows it."""

import sys

from fairseq_ext.fairseq_changes import table

sys.stdout.write(table())
