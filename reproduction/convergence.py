"""Training to convergence, as the reproduction's tables do it (docs/results/gigaword-10k.md,
docs/results/hi-cmlm.md): a run trains in chunks of updates (fairseq-train resumed from its
``checkpoint_last.pt``), is validated after each chunk, keeps its best checkpoint, stops when its
validation score has not improved for a patience fixed before the runs or at a cap (then it is
marked not converged), keeps its progress in a ``state.json`` from which a killed call resumes,
and ends as one committed JSON that a later call keeps rather than redoes, refusing one made
with other settings. The drivers of the tables (``reproduction/gigaword_10k/driver.py``,
``reproduction/hi_cmlm/converge.py``) share these rules."""

from __future__ import annotations

import gzip
import hashlib
import json
import shutil
import time
from collections.abc import Callable
from pathlib import Path

from reproduction.records import ROOT, write_json

EARLY_STOPPED, CAPPED = "patience", "max-updates (not converged)"  # a run record's "stopped"
SEEDS_FOR_A_VERDICT = 3  # a claim is decided only once each row it compares has this many seeds


# ---------------------------------------------------------------- the stop rule


def best_index(curve: list[dict], key: str) -> int | None:
    """Index of the best validation (highest ``key``; the earliest of equal ones)."""
    if not curve:
        return None
    return max(range(len(curve)), key=lambda i: (curve[i][key], -i))


def should_stop(curve: list[dict], patience: int, key: str) -> bool:
    """Early stopping: ``key`` has not improved for ``patience`` validations after the best."""
    if patience < 2:
        raise ValueError("--patience must be >= 2")
    best = best_index(curve, key)
    return best is not None and len(curve) - 1 - best >= patience


def next_chunk(
    curve: list[dict], chunk: int, max_updates: int, patience: int, key: str
) -> int | None:
    """The update count the next chunk trains to, or None when the run has stopped."""
    if should_stop(curve, patience, key):
        return None
    target = (curve[-1]["update"] if curve else 0) + chunk
    return target if target <= max_updates else None


def stopped(curve: list[dict], patience: int, key: str) -> str:
    """How a finished run stopped: by its patience, or at the cap (not converged)."""
    return EARLY_STOPPED if should_stop(curve, patience, key) else CAPPED


# ---------------------------------------------------------------- the run clock and state file


def seconds_after_state(state_file: Path, last: Path) -> float:
    """The training seconds of a call killed between two validations: from its last saved state
    to its last checkpoint, when that checkpoint is the newer file (0 otherwise)."""
    if not (state_file.is_file() and last.is_file()):
        return 0.0
    return round(max(0.0, last.stat().st_mtime - state_file.stat().st_mtime), 1)


class RunClock:
    """A run's wall seconds over all its calls, kept in its ``state.json`` (with ``sessions``, the
    number of calls, and ``machines``, the machines they ran on): the seconds saved by earlier
    calls, a killed call's training up to its last checkpoint (``seconds_after_state``), and this
    call's seconds at each ``save``."""

    def __init__(self, state_file: Path, last: Path, state: dict, machine: str):
        self.state_file, self.state = state_file, state
        state["sessions"] += 1
        machines = state.setdefault("machines", [])
        if machine not in machines:
            machines.append(machine)
        self.t0, self.spent = time.time(), state["seconds"] + seconds_after_state(state_file, last)

    def seconds(self) -> float:
        return round(self.spent + time.time() - self.t0, 1)

    def save(self) -> None:
        """Writes the state with the seconds so far; its time stamp is where unsaved training
        starts."""
        self.state["seconds"] = self.seconds()
        write_json(self.state_file, self.state)

    def machines(self) -> str:
        """The machine of every call, in order: a run resumed on another machine names both."""
        return " then ".join(self.state["machines"])


def load_state(state_file: Path, asked: dict, **fresh) -> dict:
    """A run's ``state.json``, or a new one for ``asked`` (its settings) with the fields
    ``fresh``."""
    if state_file.is_file():
        return json.loads(state_file.read_text(encoding="utf-8"))
    return {"settings": asked, "curve": [], "seconds": 0.0, "sessions": 0, **fresh}


def train_in_chunks(
    name: str,
    state: dict,
    clock: RunClock,
    save_dir: Path,
    best: Path,
    *,
    train: Callable[[int], None],
    validate: Callable[[Path], dict],
    key: str,
    label: str,
    chunk: int,
    max_updates: int,
    patience: int,
    first_start: Callable[[], None] | None = None,
) -> None:
    """Trains run ``name`` chunk by chunk until it stops (``next_chunk``): ``train(U)`` trains to
    update U (fairseq-train resumed from ``save_dir/checkpoint_last.pt``), ``validate(checkpoint)``
    gives the scores (``key`` the one the rule reads, ``label`` its name in the log); the best
    checkpoint is copied to ``best``, each validation appended to ``state["curve"]`` and saved.
    ``first_start`` runs once before a run's first update."""
    from fairseq_ext.checkpoints.saving import restore_last

    last = save_dir / "checkpoint_last.pt"
    while (target := next_chunk(state["curve"], chunk, max_updates, patience, key)) is not None:
        c0 = time.time()
        # fairseq-train restored at --max-update would take one more step: a chunk trained
        # before an interruption (its checkpoint saved, its decode not) is not trained again
        restore_last(str(save_dir))  # the plugin's rule, before fairseq-train reads where it stands
        if "batches_per_epoch_from" not in state:  # written at once: a kill in this chunk keeps it
            state["batches_per_epoch_from"] = checkpoint_updates(last) if last.is_file() else 0
            clock.save()
        if first_start is not None and not last.is_file():
            first_start()
            clock.save()
        if not (last.is_file() and checkpoint_updates(last) == target):
            train(target)
        reached = checkpoint_updates(last)
        if reached != target:
            raise RuntimeError(f"{name}: training stopped at update {reached}, not {target}")
        c1 = time.time()
        scores = validate(last)
        curve = state["curve"]
        if not curve or scores[key] > curve[best_index(curve, key)][key]:
            tmp = best.with_name(best.name + ".tmp")
            shutil.copyfile(last, tmp)
            tmp.replace(best)
        curve.append(
            {
                "update": target,
                **scores,
                "train_seconds": round(c1 - c0, 1),
                "decode_seconds": round(time.time() - c1, 1),
            }
        )
        clock.save()
        print(f"{name}: update {target}, valid {label} {scores[key]:.2f}", flush=True)


# ---------------------------------------------------------------- kept runs


def same_run(done: dict, asked: dict) -> bool:
    """Whether the kept run ``done`` is the run the settings ``asked`` describe: the same settings,
    or, for a run that early stopping ended at update U, the same settings with any cap >= U
    (a higher cap would have changed nothing)."""
    if done["settings"] == asked:
        return True
    return (
        done["stopped"] == EARLY_STOPPED
        and asked["max_updates"] >= done["curve"][-1]["update"]
        and {**done["settings"], "max_updates": asked["max_updates"]} == asked
    )


def extends(done: dict, asked: dict) -> bool:
    """Whether the settings ``asked`` train the kept run ``done`` further: it stopped at a lower
    cap and every other setting is the same."""
    return (
        done["stopped"] != EARLY_STOPPED
        and asked["max_updates"] > done["settings"]["max_updates"]
        and {**done["settings"], "max_updates": asked["max_updates"]} == asked
    )


def settings_changed(made: dict, asked: dict) -> str:
    """The settings in which two runs differ: ``key A (asked now B)``, comma-separated."""
    keys = [k for k in dict.fromkeys([*made, *asked]) if made.get(k) != asked.get(k)]
    return ", ".join(f"{k} {made.get(k)!r} (asked now {asked.get(k)!r})" for k in keys)


def made_otherwise(record: Path, made: dict, asked: dict) -> str:
    """The one line that refuses a kept run made with other settings than asked now."""
    return (
        f"{rel(record)} was made with other settings than asked now: "
        f"{settings_changed(made, asked)}; remove it, give another --kept folder or ask for its "
        "settings"
    )


def started_otherwise(folder: Path, started: dict, asked: dict) -> str:
    """The one line that refuses a work folder started with other settings than asked now."""
    return (
        f"{rel(folder)} was started with other settings than asked now: "
        f"{settings_changed(started, asked)}; remove it or ask for its settings"
    )


def refusal(kept: Path, state_file: Path, asked: dict) -> str | None:
    """Why a run cannot be kept or run as ``asked`` (its record ``kept`` or its started
    ``state_file`` made with other settings), or None; a driver checks every run before any
    starts."""
    if kept.is_file():
        done = json.loads(kept.read_text(encoding="utf-8"))
        if same_run(done, asked) or extends(done, asked):
            return None
        return made_otherwise(kept, done["settings"], asked)
    if state_file.is_file():
        started = json.loads(state_file.read_text(encoding="utf-8"))["settings"]
        if started != asked:
            return started_otherwise(state_file.parent, started, asked)
    return None


# ---------------------------------------------------------------- files and in-process fairseq


def rel(path) -> str:
    path = Path(path)
    try:
        return str(path.resolve().relative_to(ROOT))
    except ValueError:
        return str(path)


def read_lines(path: Path) -> list[str]:
    opener = gzip.open if str(path).endswith(".gz") else open
    with opener(path, "rt", encoding="utf-8") as f:
        return [line.rstrip("\n") for line in f]


def sha256(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def load_plugin(argv: list) -> None:
    """fairseq's parsers read --user-dir from sys.argv; in this process the plugin is imported
    first."""
    from fairseq_ext import plugin

    if (
        Path(str(argv[argv.index("--user-dir") + 1])).resolve()
        != Path(plugin.__file__).resolve().parent
    ):
        raise SystemExit(f"--user-dir must be the imported plugin {Path(plugin.__file__).parent}")
    plugin.load()


def fairseq_train(argv: list) -> None:
    """fairseq-train ARGV in this process."""
    load_plugin(argv)
    from fairseq import options
    from fairseq.dataclass.utils import convert_namespace_to_omegaconf
    from fairseq.distributed import utils as distributed_utils
    from fairseq_cli import train

    args = options.parse_args_and_arch(options.get_training_parser(), [str(a) for a in argv])
    distributed_utils.call_main(convert_namespace_to_omegaconf(args), train.main)


def fairseq_generate(argv: list, out: Path) -> list[str]:
    """fairseq-generate ARGV --results-path OUT in this process; the D- lines in sentence order
    (the whole output stays in OUT/generate-SUBSET.txt)."""
    load_plugin(argv)
    from fairseq import options
    from fairseq_cli import generate

    shutil.rmtree(out, ignore_errors=True)
    args = options.parse_args_and_arch(
        options.get_generation_parser(), [str(a) for a in argv] + ["--results-path", str(out)]
    )
    generate.main(args)
    lines = {}
    for line in read_lines(next(out.glob("generate-*.txt"))):
        if line.startswith("D-"):
            idx, _, text = (line[2:].split("\t", 2) + ["", ""])[:3]
            lines[int(idx)] = text
    return [lines[i] for i in sorted(lines)]


def checkpoint_updates(path: Path) -> int:
    from fairseq_ext.checkpoints.loading import safe_load

    state = safe_load(str(path))
    return int(state["optimizer_history"][-1]["num_updates"])
