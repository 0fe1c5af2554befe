"""BERT's WordPiece tokenizer (Devlin et al. 2019, section 3), offline: ``tokenizer`` splits and
joins text, ``bpe`` registers it as ``--bpe wordpiece``."""
