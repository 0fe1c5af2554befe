"""What the plugin's parts share and that changes nothing of fairseq: its error type, the interfaces
between tasks and models, the family registry, dataclass options as argparse, path and
tokenizer checks, the options table."""
