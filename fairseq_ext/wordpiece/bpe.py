"""``--bpe wordpiece``: a transformers checkpoint's own WordPiece tokenizer as a fairseq BPE,
needing only the ``tokenizers`` library (fairseq's ``bert`` BPE needs transformers)."""

# No "from __future__ import annotations" here: fairseq reads the dataclass field types at run time.
from dataclasses import dataclass

from fairseq.data.encoders import register_bpe
from fairseq.dataclass import FairseqDataclass

from fairseq_ext.common.config_fields import option
from fairseq_ext.common.errors import FairseqExtError


@dataclass
class WordpieceBPEConfig(FairseqDataclass):
    wordpiece_tokenizer: str = option(
        "???", "folder with the checkpoint's tokenizer.json, vocab.txt or prophetnet.tokenizer"
    )


@register_bpe("wordpiece", dataclass=WordpieceBPEConfig)
class WordpieceBPE:
    """Text <-> space-separated WordPiece tokens (``##`` marks a continuation)."""

    def __init__(self, cfg: WordpieceBPEConfig):
        try:
            from fairseq_ext.wordpiece import tokenizer as wordpiece
        except ImportError as exc:
            raise FairseqExtError(
                f"--bpe wordpiece needs the tokenizers library ({exc}); "
                "pip install 'fairseq_ext[convert]'"
            ) from None
        self.wordpiece = wordpiece
        self.tokenizer = wordpiece.load_tokenizer(cfg.wordpiece_tokenizer)

    def encode(self, x: str) -> str:
        return self.wordpiece.encode_lines(self.tokenizer, [x])[0][0]

    def decode(self, x: str) -> str:
        return self.wordpiece.decode_lines(self.tokenizer, [x])[0]

    def is_beginning_of_word(self, x: str) -> bool:
        return not x.startswith("##")
