"""GLUE dev predictions of a checkpoint fine-tuned with fairseq's ``sentence_prediction`` (data
from ``data_prep/glue.py``), and their score with scikit-learn: Matthews correlation for CoLA,
accuracy for SST-2 (GLUE's metrics, Wang et al. 2019, section 3; Wagner et al. 2020, section 5
judge position masking by such fine-tuning scores).

    python -m fairseq_ext.analysis.glue predict --checkpoint CKPT --data OUT/bin --output PRED
    python -m fairseq_ext.analysis.glue score --task CoLA --gold OUT/raw/valid.label \\
        --predictions PRED

``predict`` writes one label a line, in the order of the dev file, mapping the predicted class
c to the label dictionary's c-th symbol (fairseq orders ``OUT/bin/label/dict.txt`` by
frequency). ``score`` prints the metric in percent (MCC x 100, as GLUE reports it). GLUE's test
labels are not public: test predictions are scored by GLUE's server, not here.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from sklearn.metrics import accuracy_score, matthews_corrcoef

from fairseq_ext.common.cli import command_parser

METRICS = {"CoLA": "mcc", "SST-2": "accuracy"}


def score(task: str, gold: list[str], predictions: list[str]) -> float:
    """The task's GLUE metric (percent) of ``predictions`` against ``gold`` (label strings)."""
    if len(gold) != len(predictions):
        raise ValueError(
            f"{len(predictions)} predictions for {len(gold)} dev examples; predict the whole dev "
            "split"
        )
    if METRICS[task] == "mcc":
        return 100.0 * float(matthews_corrcoef(gold, predictions))
    return 100.0 * float(accuracy_score(gold, predictions))


def read_labels(path: str | Path) -> list[str]:
    """One label a line (the gold ``valid.label`` or a predictions file)."""
    return Path(path).read_text(encoding="utf-8").split()


def predict(checkpoint: str, data: str, batch_size: int = 64) -> list[str]:
    """The label the fine-tuned model predicts for every dev example, in file order."""
    import torch
    from fairseq import checkpoint_utils, utils

    # the plugin loaded as fairseq's --user-dir loads it (its models and the changes of fairseq)
    utils.import_user_module(argparse.Namespace(user_dir=str(Path(__file__).parents[1])))
    (model,), _, task = checkpoint_utils.load_model_ensemble_and_task(
        [checkpoint], arg_overrides={"data": data}
    )
    model.eval()
    task.load_dataset("valid")
    dataset = task.dataset("valid")
    labels = task.label_dictionary
    head = getattr(task.cfg, "classification_head_name", "sentence_classification_head")
    out: dict[int, str] = {}
    with torch.no_grad():
        for start in range(0, len(dataset), batch_size):
            batch = dataset.collater(
                [dataset[i] for i in range(start, min(start + batch_size, len(dataset)))]
            )
            inputs = batch["net_input"]
            logits, _ = model(**inputs, features_only=True, classification_head_name=head)
            for example, cls in zip(batch["id"].tolist(), logits.argmax(-1).tolist()):
                out[example] = labels[cls + labels.nspecial]
    return [out[i] for i in range(len(dataset))]


def _problem(args: argparse.Namespace) -> str | None:
    """What stops the command before it starts (a missing file or folder), as one line."""
    if args.cmd == "predict":
        if not Path(args.checkpoint).is_file():
            return (
                f"--checkpoint {args.checkpoint}: no such file "
                "(fairseq-train writes SAVE_DIR/checkpoint_last.pt)"
            )
        if not (Path(args.data) / "label" / "dict.txt").is_file():
            return (
                f"--data {args.data}: no label/dict.txt there; give the bin folder of "
                "data_prep/glue.py (it holds input0/ and label/)"
            )
        return None
    for flag in ("gold", "predictions"):
        if not Path(getattr(args, flag)).is_file():
            return f"--{flag} {getattr(args, flag)}: no such file"
    return None


def main(argv: list[str] | None = None) -> None:
    p = command_parser("python -m fairseq_ext.analysis.glue", __doc__)
    sub = p.add_subparsers(dest="cmd", required=True)
    pr = sub.add_parser("predict", help="one predicted label a line for the dev split")
    pr.add_argument("--checkpoint", required=True, help="a sentence_prediction checkpoint")
    pr.add_argument(
        "--data", required=True, help="the bin folder of data_prep/glue.py (input0/, label/)"
    )
    pr.add_argument("--output", required=True, help="the predictions file to write")
    sc = sub.add_parser(
        "score", help="the GLUE metric of a predictions file against the gold labels"
    )
    sc.add_argument("--task", required=True, choices=sorted(METRICS))
    sc.add_argument("--gold", required=True, help="OUT/raw/valid.label of data_prep/glue.py")
    sc.add_argument("--predictions", required=True, help="the file predict wrote")
    args = p.parse_args(argv)
    problem = _problem(args)
    if problem:
        p.exit(2, f"error: {problem}\n")
    if args.cmd == "predict":
        labels = predict(args.checkpoint, args.data)
        Path(args.output).write_text("".join(x + "\n" for x in labels), encoding="utf-8")
        print(f"{len(labels)} predictions in {args.output}", file=sys.stderr)
        return
    try:
        value = score(args.task, read_labels(args.gold), read_labels(args.predictions))
    except ValueError as e:
        p.exit(1, f"error: {e}\n")
    print(f"{METRICS[args.task]} {value:.2f}")


if __name__ == "__main__":
    main()
