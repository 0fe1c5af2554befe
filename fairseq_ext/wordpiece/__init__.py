"""BERT's WordPiece tokenizer (Devlin et al. 2019, section 3), offline: ``tokenizer`` splits and
joins text with a transformers checkpoint's own vocabulary (the ``tokenizers`` library only),
and ``bpe`` registers it with fairseq as ``--bpe wordpiece``. Importing this package imports
neither."""
