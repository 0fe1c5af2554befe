"""Analysis of fairseq-generate outputs (HI-CMLM's per-iteration views) and the generated
blocks of the results pages; the plugin does not import it."""
