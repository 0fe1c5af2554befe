"""Analysis of fairseq-generate outputs (HI-CMLM's per-iteration views); nothing imports it."""
