"""The table of bad input and faults in ``docs/reliability.md`` is generated from ``CASES``: each
row names the input or fault, what the user sees, and the tests that check it. The tests
check that every named test exists, that every test of the reliability test files is named
in a row, and that the committed block equals the rendered one
(``python -m tests.test_reliability_table`` rewrites it)."""

from __future__ import annotations

import ast

from tests.conftest import ROOT

PAGE = ROOT / "docs" / "reliability.md"
START, END = "<!-- reliability-cases:start -->", "<!-- reliability-cases:end -->"
# every test function of these files must be a row's evidence (or in NOT_CASES)
RELIABILITY_FILES = (
    "test_bad_input.py",
    "test_bad_input_cli.py",
    "test_checkpoints.py",
    "test_checkpoint_contents.py",
    "test_checkpoint_saving.py",
    "test_output_files.py",
    "test_traces.py",
    "test_reliability.py",
    "test_training_start.py",
    "test_interrupted_commands.py",
    "test_tokenizer_check.py",
    "test_bad_input_data.py",
    "test_hub_checks.py",
)
NOT_CASES = {  # tests of those files that check a guarantee, not an answer to bad input or a fault
    "test_checkpoints.py::test_allow_list_is_exactly_what_plugin_checkpoints_need",
    "test_checkpoints.py::test_safe_load_keeps_weights_only_on",
    "test_checkpoints.py::test_safe_load_leaves_the_installed_allow_list_in_place",
    "test_checkpoints.py::test_export_writes_small_loadable_checkpoint",
    "test_checkpoint_contents.py::test_checkpoint_records_the_dictionaries_in_order",
    "test_checkpoint_contents.py::test_valid_model_override_is_applied",
    "test_reliability.py::test_two_gloo_ranks_match_one_process",
}

# (input or fault, what the user sees, the tests that check it)
CASES: list[tuple[str, str, tuple[str, ...]]] = [
    # options
    (
        "unknown option, unknown `--hybrid-strategy`",
        "argparse error naming the option, exit 2",
        ("test_cli_hi_cmlm.py::test_bad_options_give_one_clear_error",),
    ),
    (
        "every numeric option of the plugin out of range (enumerated from the configs, so a new "
        "option without a "
        "check fails the suite)",
        "`fairseq_ext: error: ...` naming the option and its range, exit 1",
        (
            "test_options.py::test_every_numeric_option_has_an_out_of_range_case",
            "test_options.py::test_out_of_range_value_is_refused_at_build_time",
        ),
    ),
    (
        "a decoding option out of range (`--iter-decode-with-beam -2`, `--beam` above the "
        "vocabulary, ...)",
        "error naming the option and its range; nothing is decoded (fairseq would clamp it)",
        (
            "test_bad_input_cli.py::test_out_of_range_decoding_option_is_refused_not_clamped",
            "test_options.py::test_out_of_range_decoding_option_is_refused_when_the_generator_is_built",
        ),
    ),
    (
        "`--model-overrides` with an unknown key (a typo), a value outside the option's choices "
        "or of another type",
        "`--model-overrides: 'hybrid_stratgy' is not an option of CKPT (did you mean "
        "'hybrid_strategy'?)`, or the "
        "choices / the type; before any decoding (fairseq ignored the key, or failed mid-decoding)",
        ("test_checkpoint_contents.py::test_model_overrides_are_checked_before_decoding",),
    ),
    (
        "`--model-overrides` that is no Python literal dict (`{'copy_temperature': "
        "float('nan')}`, a list), a "
        "non-finite number (`1e999`), a key with no close option (`ngram`)",
        '`--model-overrides "..." is not a Python literal (ValueError); give a dict of plain '
        "values ...`, `... must "
        "be a finite number, got inf`, no far-off guess (before: a traceback from "
        "`ast.literal_eval`, infinity "
        "accepted, `did you mean '_name'`)",
        ("test_checkpoint_contents.py::test_model_overrides_are_checked_before_decoding",),
    ),
    (
        "a mistyped `--task`, `--arch` or `--criterion` (`cmlm_hybird`, `hi_cmlm_tiny`), the "
        "plugin loaded",
        "one line, exit 2: `argument --task: invalid choice: 'cmlm_hybird'; did you mean "
        "'cmlm_hybrid'? (--help lists "
        "the choices)`; argparse's choices where no name is close (before: the whole usage, 115 "
        "lines for "
        "`fairseq-train`, then every choice)",
        (
            "test_cli_help.py::test_a_mistyped_registry_name_is_one_line_with_the_closest_name",
            "test_cli_help.py::test_a_name_close_to_nothing_is_one_line_with_the_choices",
            "test_cli_help.py::test_fairseq_train_mistyped_task_with_and_without_the_plugin",
        ),
    ),
    (
        "`--user-dir` naming a missing folder",
        "fairseq's own `FileNotFoundError` naming the folder (before the "
        "plugin is loaded); nothing written",
        ("test_bad_input_cli.py::test_missing_user_dir_is_fairseqs_own_error",),
    ),
    (
        "`--user-dir` naming `examples/` (a folder of the repository that holds no plugin)",
        "`--user-dir ROOT/examples holds no fairseq plugin: it registers no task, model or "
        "criterion (so --task would be "
        "refused as an invalid choice); the plugin is ROOT/fairseq_ext: give --user-dir "
        "ROOT/fairseq_ext`, nothing "
        "written (before: argparse's `invalid choice: 'cmlm_hybrid'`, blaming `--task`)",
        ("test_bad_input_cli.py::test_user_dir_naming_the_examples_folder_names_the_plugin",),
    ),
    (
        "`--user-dir` naming another folder that is not the plugin: the repository root, a folder "
        "elsewhere",
        "argparse: `invalid choice: 'cmlm_hybrid'`, exit 2, nothing written: fairseq imports a "
        "folder without "
        "`__init__.py` as an empty namespace package before any code of the plugin runs, so the "
        "plugin cannot answer",
        ("test_bad_input_cli.py::test_user_dir_that_is_not_the_plugin_leaves_the_task_unknown",),
    ),
    # tokenizers
    (
        "a sentencepiece model that is not the dictionary's (a 300-piece model of the same text "
        "beside the shipped "
        "6000-piece model): `fairseq-interactive`/`fairseq-generate --bpe sentencepiece "
        "--sentencepiece-model`, "
        "`hub.from_pretrained(..., sentencepiece_model=)`, `data_prep/word_order.py` and "
        "`headline_match.py` "
        "(`--spm` with `--dict`), the shell data scripts with `SPM_MODEL` and `SRCDICT` "
        "(`multi30k.sh`, ...)",
        "`the sentencepiece model M (300 pieces) has only 280 of the 5997 symbols of the source "
        "dictionary in DATA "
        "(5%): it is not the model whose pieces the dictionary holds, so text encoded with it "
        "reaches the model as pieces "
        "it was not trained on (and <unk>); give the sentencepiece model that encoded the "
        "training data ...`; the data "
        "scripts write nothing; a model covering 50-90% (a dictionary joined from one model per "
        "language) is a warning "
        "(before: exit 0, garbage translations, 6 `<unk>`, no word)",
        (
            "test_tokenizer_check.py::test_interactive_refuses_a_sentencepiece_model_that_is_not_the_dictionarys",
            "test_tokenizer_check.py::test_hub_refuses_another_tokenizer_and_raw_text_without_one",
            "test_tokenizer_check.py::test_data_scripts_refuse_another_sentencepiece_model_before_writing",
            "test_tokenizer_check.py::test_dictionary_joined_from_two_models_is_warned_about_not_refused",
        ),
    ),
    (
        "a validation or test split encoded with another sentencepiece model and binarized with "
        "the checkpoint's "
        "dictionary (`data_prep/spm.py encode`, then `fairseq-preprocess --srcdict`), at "
        "`fairseq-generate` or "
        "validation, every sequence-to-sequence task",
        "`fairseq_ext: 3.2% of the source tokens of the test split in DATA are <unk> (97 of 3029, "
        "in 65 of its 100 "
        "lines): it was probably encoded with another sentencepiece model than the one the "
        "dictionary was built from (or "
        "holds characters the vocabulary lacks); encode the text with the checkpoint's own model "
        "... and binarize it "
        "again` (and the same for the target side), a note above 1% `<unk>`: the decoding goes on "
        "(before: BLEU 0.00 "
        "without a word)",
        ("test_tokenizer_check.py::test_generate_names_a_split_encoded_with_another_model",),
    ),
    (
        "a `--sentencepiece-model` (or hub `sentencepiece_model=`, script `--spm`) file that is "
        "no sentencepiece model",
        "`--sentencepiece-model F is not a sentencepiece model (sentencepiece cannot read it: "
        "INTERNAL: could not parse "
        "ModelProto from F); give the .model file that spm_train (data_prep/spm.py train) wrote "
        "...` (before: "
        "sentencepiece's `RuntimeError` traceback)",
        (
            "test_tokenizer_check.py::test_interactive_refuses_a_sentencepiece_model_that_is_not_the_dictionarys",
            "test_tokenizer_check.py::test_hub_refuses_another_tokenizer_and_raw_text_without_one",
        ),
    ),
    (
        "raw text given to the hub of a folder without a tokenizer (no `spm.model`): "
        '`translate(["A man ..."])`',
        "`translate: sentences[0] is raw text ('A man ...'), but this model was loaded without a "
        "tokenizer (no "
        "spm.model in its folder), so it takes sentencepiece pieces (e.g. '▁A ▁man ...'): put the "
        "sentencepiece model "
        "that encoded its training data in the folder as spm.model, or give from_pretrained(..., "
        "bpe='sentencepiece', "
        "sentencepiece_model=PATH), or pass the input as pieces` (before: `'▁Ein T - T - T ...'`, "
        "no word)",
        ("test_tokenizer_check.py::test_hub_refuses_another_tokenizer_and_raw_text_without_one",),
    ),
    # paths, checked before any work (fairseq_ext.fairseq_changes.preflight)
    (
        "`--path` naming a checkpoint that does not exist (alone or a `:`-separated part of an "
        "ensemble), with the "
        "shipped quickstart model",
        "`checkpoint model/checkpoint_best.pt does not exist; model holds checkpoint.pt, "
        "teacher.pt: give --path one of them, or a checkpoint file fairseq-train wrote`; "
        "`--results-path` not made "
        "(before: a traceback ending `OSError: Model file not found`, after `--results-path` was "
        "made)",
        ("test_bad_input_cli.py::test_missing_checkpoint_is_named_with_the_checkpoints_beside_it",),
    ),
    (
        "`fairseq-interactive --input` naming a file that does not exist",
        "`--input inter/nonexistent.txt does not exist (nor does its folder inter); give the text "
        "file to translate, "
        "or - for standard input`, before the model loads (before: a `FileNotFoundError` "
        "traceback after it loaded)",
        (
            "test_bad_input_cli.py::test_missing_interactive_input_is_one_line_before_the_model_loads",
        ),
    ),
    (
        "`fairseq-generate --results-path DIR` on a read-only mount (the mount itself or a folder "
        "to make on it; the "
        "test mounts one, skipped where it cannot, i.e. not root)",
        "`cannot write results to --results-path DIR: Read-only file system. Give a "
        "--results-path on a writable "
        "filesystem ...`; nothing written (before: a traceback ending `OSError: [Errno 30] "
        "Read-only file system` from "
        "`os.makedirs`, or from the lock of the results file)",
        ("test_bad_input_cli.py::test_results_path_on_a_read_only_mount_is_one_line",),
    ),
    (
        "`fairseq-generate --results-path x/afile` where `x/afile` is a file (or `x/afile/sub`)",
        "`--results-path x/afile is a file, not a folder; give --results-path a folder (new or "
        "existing) for the "
        "results` (`... cannot be made: x/afile is a file, not a folder`); the file is left as it "
        "was (before: a "
        "`FileExistsError` traceback)",
        ("test_bad_input_cli.py::test_results_path_that_is_a_file_is_one_line",),
    ),
    (
        "`--sentencepiece-model PATH` (`--bpe sentencepiece`) that does not exist, is a folder, "
        "or cannot be read (as "
        "root: run without root's override); `--bpe sentencepiece` without one",
        "`--sentencepiece-model PATH does not exist; give the spm.model the data was encoded with "
        "...` (`is a folder, "
        "not a file`, `cannot be read: Permission denied; make it readable (chmod a+r), or ...`), "
        "before the model "
        "loads (before: sentencepiece's `OSError: file ... not found` traceback after it loaded)",
        ("test_bad_input_cli.py::test_missing_or_unreadable_sentencepiece_model_is_one_line",),
    ),
    (
        "data binarized by a `fairseq-preprocess` that ran out of disk space (a 48 KiB tmpfs the "
        "test mounts; skipped "
        "where it cannot, i.e. not root): its `dict.en.txt` cut mid-line, then `fairseq-generate` "
        "on it",
        "`dictionary DATA/dict.en.txt is cut short: its last line, line 3655 '▁schwarzhaarige ' "
        "(no count), ends "
        "without a newline, as when fairseq-preprocess runs out of disk space while writing it. "
        "Check the free disk "
        "space (df -h), then run fairseq-preprocess again into an empty --destdir` (before: a "
        "traceback ending "
        "`ValueError: Incorrect dictionary format, expected '<token> <cnt> [flags]'`)",
        ("test_bad_input_cli.py::test_dictionary_cut_by_a_full_disk_is_named",),
    ),
    (
        "`fairseq_ext.hub.from_pretrained` of a folder that does not exist, is a file, or holds a "
        "cut `dict.*.txt`",
        "`model folder DIR does not exist; give the folder that holds the checkpoint` (`is a "
        "file, not a folder`), "
        "`dictionary DIR/dict.en.txt is cut short: ...`, before fairseq reads it",
        ("test_hub.py::test_folder_that_is_missing_a_file_or_holds_a_cut_dictionary_is_one_error",),
    ),
    # data
    (
        "a data folder that does not exist or is a file, or (translation-style tasks, no "
        "`-s`/`-t`) one with no "
        "binarized pair to infer the languages from",
        "`data folder DATA does not exist; give the folder "
        "fairseq-preprocess wrote ...` (`is a file, not a folder`) / `DATA holds no binarized pair "
        "(train.SRC-TGT.SRC.idx) to infer the languages from: give -s and -t ...`",
        ("test_bad_input_cli.py::test_missing_or_unnamed_data_folder_is_one_line",),
    ),
    (
        "missing split (`--gen-subset valid2`, no `valid` for training), every task",
        "`Dataset not found: SPLIT (no SPLIT*.idx in DATA); binarize it with fairseq-preprocess "
        "--validpref ...`, "
        "with the splits the folder has",
        (
            "test_traces.py::test_missing_split_is_named_with_the_fix",
            "test_traces.py::test_generate_with_a_missing_gen_subset_is_one_line",
        ),
    ),
    (
        "missing `dict.*.txt` (a data folder that fairseq-preprocess did not write), every task",
        "`DATA/dict.en.txt does not exist: give the data directory fairseq-preprocess wrote ...`",
        (
            "test_traces.py::test_missing_dictionary_is_named",
            "test_traces.py::test_generate_without_a_dictionary_is_one_line",
        ),
    ),
    (
        "`prophetnet_denoising` on data binarized for a language model (`dict.txt`, no `-s`), "
        "with or without "
        "`--source-lang`",
        "`DATA was binarized for a language model (dict.txt, no language); ... binarize it again "
        "with "
        "fairseq-preprocess --only-source -s LANG (e.g. -s en) and give the same --source-lang` "
        '(before: "has 0 '
        'dict.*.txt files; name the side with --source-lang", then "dict.en.txt does not exist")',
        ("test_traces.py::test_language_model_data_for_prophetnet_denoising_names_the_fix",),
    ),
    (
        "empty split (0 lines), every task",
        "`the SPLIT split ... is empty (0 lines)` and the fix",
        ("test_traces.py::test_empty_split_is_named",),
    ),
    (
        "empty or whitespace-only line in a binarized split, every task",
        "error naming the split, side and line",
        (
            "test_bad_input.py::test_empty_and_whitespace_only_lines_are_named",
            "test_cli_hi_cmlm.py::test_empty_source_line_is_refused",
        ),
    ),
    (
        "a line longer than the model takes (CMLM's 255-token length predictor, "
        "`--max-source-positions`, "
        "`--tokens-per-sample`, UniLM's positions table), every task",
        "error naming the line and the limit; nothing truncated or skipped; the fix is to split "
        "the line (a trained "
        "model keeps its positions)",
        (
            "test_bad_input.py::test_lines_longer_than_the_model_are_named_not_cut",
            "test_cli_hi_cmlm.py::test_too_long_target_is_refused",
        ),
    ),
    (
        "an example beyond a checkpoint's positions at `fairseq-generate`",
        "error naming the example and the limit, "
        "and `--skip-invalid-size-inputs-valid-test` for those who want it skipped",
        (
            "test_bad_input.py::test_generation_beyond_the_model_positions_is_one_error_or_a_chosen_skip",
        ),
    ),
    (
        "a `.bin` shorter than its `.idx` (interrupted preprocess or copy), either format, shards "
        "too",
        "`X.bin has N bytes but X.idx indexes M: the binarized SPLIT split is incomplete ...`",
        (
            "test_bad_input.py::test_incomplete_bin_is_named_when_the_split_is_loaded",
            "test_bad_input.py::test_incomplete_bin_of_a_shard_in_either_format_is_named",
            "test_bad_input_cli.py::test_incomplete_bin_is_named_at_generation",
        ),
    ),
    (
        "empty line of `fairseq-interactive` input",
        "named on stderr and skipped; the other lines keep their ids",
        ("test_bad_input.py::test_empty_interactive_line_is_named_and_skipped",),
    ),
    (
        "over-long line of `fairseq-interactive` input",
        "error naming the input line and the model's positions",
        ("test_bad_input.py::test_over_long_interactive_line_still_ends_the_session",),
    ),
    (
        "text that is not UTF-8: `fairseq-interactive` input; `data_prep/spm.py encode`, "
        "`decode`, `clean-pair`",
        "`FILE line N is not valid UTF-8 (byte 0xe9 at column C)` and the fix; spm.py writes "
        "nothing",
        (
            "test_traces.py::test_interactive_input_that_is_not_utf8_names_file_and_line",
            "test_traces.py::test_spm_py_refuses_text_that_is_not_utf8_before_writing",
            "test_traces.py::test_spm_py_clean_pair_refuses_before_writing",
        ),
    ),
    (
        "a training text that is not UTF-8 (Latin-1): `data_prep/spm.py train`; the data scripts "
        "(`multi30k.sh`, "
        "`gigaword.sh`, `wikitext2.sh`, and `wmt14_en_de.sh`, `wmt16_en_ro.sh` the same way), "
        "before "
        "`fairseq-preprocess`",
        "`spm.py: error: FILE line 3 is not valid UTF-8 (byte 0xe9 at column 4); convert the "
        "text to UTF-8 first, e.g. iconv -f latin1 -t utf-8. Nothing was written`, naming the "
        "user's file, before "
        "anything is made from it (before: `spm.py train` exited 0 with a U+FFFD piece in the "
        "vocabulary; the scripts "
        'named a copy they had made, or "standard input"; `fairseq-preprocess` on such text ends '
        "in `ValueError: "
        "negative seek position -1`)",
        (
            "test_traces.py::test_spm_py_train_refuses_text_that_is_not_utf8_before_writing",
            "test_traces.py::test_data_script_checks_the_encoding_before_fairseq_preprocess",
        ),
    ),
    (
        "no space left on the device while a data script's `fairseq-preprocess` writes "
        "(`multi30k.sh` on a 128 KiB "
        "tmpfs, and on one filled after a complete run; skipped where it cannot mount one, i.e. "
        "not root)",
        "`error: no space left on the device while fairseq-preprocess wrote OUT/bin.partial "
        "(removed; no OUT/bin was "
        "made)` (or `the earlier OUT/bin is kept`) `; free space there (df -h) and run the same "
        "command again`: every "
        "script binarizes into `DEST.partial` and moves it to `DEST` when complete, and `spm.py "
        "train` / "
        "`clean-pair` write `NAME.partial-PID.EXT` and rename it, so no cut dictionary is left "
        "(before: "
        "`OSError: [Errno 28]` and a cut `OUT/bin/dict.en.txt` that the next command misread)",
        ("test_traces.py::test_full_disk_during_fairseq_preprocess_leaves_no_cut_dictionary",),
    ),
    (
        "data or options a task cannot use: `unilm_seq2seq` without `--joined-dictionary` or with "
        "`--attention-mask "
        "permutation`; ProphetNet with separate dictionaries or `--left-pad-target`; a masked_lm "
        "option position "
        "masking does not support (`--mask-whole-words`, ...); `--tokens-per-sample` above "
        "`--max-positions`",
        "error naming the option or the data and the fix",
        (
            "test_cli_unilm.py::test_empty_target_and_bad_options_are_refused",
            "test_prophetnet_model.py::test_separate_dictionaries_are_refused",
            "test_cli_prophetnet.py::test_empty_article_is_refused_and_empty_input_line_skipped",
            "test_posmask_model.py::test_bad_options_are_refused",
            "test_posmask_model.py::test_bad_data_and_inputs_are_refused",
        ),
    ),
    (
        "ProphetNet: a target of length 1 (an empty title), an empty article, an article beyond "
        "`--max-source-positions`",
        "error naming the split, side and line; nothing truncated",
        (
            "test_cli_prophetnet.py::test_target_of_length_one_is_refused",
            "test_cli_prophetnet.py::test_long_article_is_refused_not_truncated",
        ),
    ),
    (
        "UniLM: a source that fills the positions table; `permutation_lm`: a line longer than "
        "`--tokens-per-sample`",
        "error naming the line, the sizes and the fix; never truncated or skipped",
        (
            "test_cli_unilm.py::test_source_that_fills_the_positions_table_is_refused",
            "test_cli_unilm.py::test_permutation_lm_refuses_too_long_lines",
        ),
    ),
    (
        "`--keep-tokens` listing a token outside the dictionary; a pruned checkpoint decoded "
        "without `--keep-tokens`",
        "error naming the token / the dictionary mismatch and `--keep-tokens`",
        (
            "test_unilm_model.py::test_keep_tokens_refuses_unknown_tokens",
            "test_cli_unilm.py::test_generate_decodes_every_sentence_with_the_pruned_dictionary",
        ),
    ),
    (
        "`--init-from` a checkpoint with other sizes, another dictionary, a pre-norm or untied "
        "RoBERTa",
        "error naming the parameter, the shapes or the option to change",
        ("test_unilm_model.py::test_init_refuses_mismatches",),
    ),
    (
        "a factorisation order that is not a permutation (model input, `draw_mask permutation "
        "--order`)",
        "error naming the row and the repeated or missing position",
        (
            "test_unilm_model.py::test_order_that_is_not_a_permutation_is_refused_by_the_model",
            "test_draw_mask.py::test_cli_writes_every_picture_and_refuses_bad_orders",
        ),
    ),
    # half-made data, hand-edited dictionaries, --max-tokens, Ctrl-C with workers (issue 83)
    (
        "a `fairseq-preprocess` killed (SIGKILL) while it wrote the target side: the train split "
        "without `train.en-de.de.idx`, then `fairseq-train` or `fairseq-generate` of "
        "`cmlm_hybrid`, `translation_prophetnet` or `unilm_seq2seq` on the folder",
        "`DATA holds half of the train split: train.en-de.en.bin, train.en-de.en.idx, "
        "train.en-de.de.bin, but not train.en-de.de.idx, as when fairseq-preprocess is stopped "
        "before it ends (killed?); binarize the data again into an empty --destdir ...`, before a "
        "model is built or `--save-dir` made; the folder untouched (before: `AttributeError: "
        "'NoneType' object has no attribute 'ne'` mid-training, `TypeError: ... missing "
        "'prev_output_tokens'`)",
        (
            "test_bad_input_data.py::test_a_killed_fairseq_preprocess_is_named_before_any_task_starts",
        ),
    ),
    (
        "a data script (`data_prep/*.sh`, `sentence_prediction_data.py`) killed during "
        "`fairseq-preprocess`, an earlier binarization in place, then the same command again",
        "the earlier folder is kept byte for byte through the kill (the script binarizes into "
        "`DEST.partial`); the command run again completes, equal to one `fairseq-preprocess` run "
        "(a bare `fairseq-preprocess` run again into its half-made `--destdir` is still fairseq's "
        "`FileExistsError`: the plugin is not loaded there)",
        ("test_bad_input_data.py::test_the_data_scripts_binarize_again_after_a_kill",),
    ),
    (
        "a dictionary that repeats a token (line 30 again as line 60), or a line in its middle "
        "without its count, at `fairseq-generate`, `fairseq_ext.hub.from_pretrained` and a data "
        "script's `fairseq-preprocess --srcdict`",
        "`dictionary DATA/dict.en.txt line 60 repeats the token 'X' of line 30: a dictionary "
        "lists each token once ...; remove the repeated line, mark it #fairseq:overwrite ...` / "
        "`... line 30 'X' has no count: fairseq reads every line as '<token> <count>' ...`, a "
        "`FairseqExtError` from the API, `error: ...` and exit 1 from the script before "
        "`fairseq-preprocess` runs (before: `RuntimeError: Duplicate word found ...`, "
        "`ValueError: Incorrect dictionary format ...` tracebacks)",
        ("test_bad_input_data.py::test_a_malformed_dictionary_is_one_line_for_every_reader",),
    ),
    (
        "`--max-tokens` below the longest example, at `fairseq-generate` and `fairseq-train` "
        "(every task of the plugin: the check is in the batching each task hands fairseq)",
        "`test line N of DATA has L tokens, more than --max-tokens M (K of the 21 are; the "
        "longest has X): give a --max-tokens (for validation: --max-tokens-valid) of X or more "
        "...`, before any batch; nothing trained or written (before: `AssertionError: Sentences "
        "lengths should not exceed max_tokens` at generate, a warning and 191 training pairs "
        "skipped at train)",
        (
            "test_bad_input_data.py::test_max_tokens_below_an_example_names_the_split_line_and_length",
        ),
    ),
    (
        "Ctrl-C during `fairseq-generate --num-workers 2` (four times) and `fairseq-train "
        "--num-workers 2` (after its first checkpoint), and an exception raised while a Ctrl-C "
        "unwinds (as a DataLoader raises for a worker that Ctrl-C ended)",
        "nothing, status 130 (SIGINT), the data untouched, `checkpoint_last.pt` loads: DataLoader "
        "workers ignore SIGINT and "
        "are stopped by the main process; an exception with a `KeyboardInterrupt` behind it ends "
        "by SIGINT too (before: about 1 in 5 a `RuntimeError: DataLoader worker ... exited "
        "unexpectedly` traceback); the same exception without a Ctrl-C keeps its traceback",
        (
            "test_interrupted_commands.py::test_ctrl_c_with_dataloader_workers_ends_quietly_every_time",
            "test_interrupted_commands.py::test_an_error_raised_while_ctrl_c_unwinds_ends_quietly_by_sigint",
            "test_interrupted_commands.py::test_ctrl_c_during_training_with_dataloader_workers_keeps_the_checkpoints",
        ),
    ),
    # checkpoints
    (
        "data binarized with another dictionary of the same size in another order "
        "(`fairseq-preprocess` without "
        "`--srcdict`), at generate, fine-tune and resume",
        "`dictionary mismatch: the source dictionary of the data is not the one CKPT was trained "
        "with (the same 400 "
        "entries in another order: entry 7 is ... in the checkpoint's, ... in the data's; ...)` "
        "and the fix "
        "(fairseq decoded it at BLEU 0, exit 0)",
        (
            "test_checkpoint_contents.py::test_reordered_dictionary_is_refused_at_generate_finetune_and_resume",
            "test_checkpoint_contents.py::test_dictionary_mismatch_names_the_side_and_the_first_differences",
            "test_checkpoint_contents.py::test_keep_tokens_and_other_tasks_targets",
        ),
    ),
    (
        "a checkpoint saved before dictionaries were recorded, with data of another dictionary "
        "size (any family)",
        "the same `dictionary mismatch` line, from the rows of the embedding; with matching data "
        "it loads and "
        "decodes as before, without a note",
        (
            "test_bad_input.py::test_checkpoint_from_another_dictionary_is_named",
            "test_checkpoint_contents.py::test_checkpoint_without_the_record_still_loads_and_decodes_the_same",
            "test_cli_hi_cmlm.py::test_dictionary_mismatch_is_named",
        ),
    ),
    (
        "a checkpoint trained with another embedding or FFN dimension, other sizes (`--ngram`, "
        "`--num-buckets`, "
        "positions) or more layers",
        "error naming the option that differs (`--encoder-embed-dim differs from the checkpoint's "
        "...`) and both "
        "shapes, never a dictionary",
        (
            "test_bad_input.py::test_checkpoint_with_another_embedding_dimension_names_it_not_the_dictionary",
            "test_bad_input.py::test_checkpoint_with_another_ffn_dimension_names_it",
            "test_bad_input.py::test_checkpoint_with_other_sizes_names_the_option",
            "test_bad_input.py::test_checkpoint_with_more_layers_is_named",
        ),
    ),
    (
        "a checkpoint of another family (a ProphetNet checkpoint for `cmlm_hybrid`, an "
        "autoregressive `transformer` "
        "for mask-predict, RoBERTa for UniLM)",
        "`CKPT was trained with --task translation_prophetnet (--arch ...); --task cmlm_hybrid "
        "cannot use it`, or the "
        "model the task needs; without `--task`, `--task translation (fairseq's default when no "
        "--task is given) ...` "
        "(before: a `TypeError` traceback)",
        (
            "test_checkpoint_contents.py::test_task_family",
            "test_checkpoint_contents.py::test_mask_predict_checkpoint_without_task_names_fairseqs_default",
            "test_checkpoint_contents.py::test_prophetnet_checkpoint_for_cmlm_hybrid_names_the_task",
            "test_bad_input.py::test_model_of_another_family_is_named",
            "test_bad_input_cli.py::test_autoregressive_checkpoint_for_mask_predict_is_named",
        ),
    ),
    (
        "a checkpoint with a foreign pickled global (e.g. `os.system`), also in torch's legacy "
        "format",
        "`refusing to load CKPT: it pickles posix.system ...`; nothing is executed; never torch's "
        "advice to load "
        "with `weights_only=False`",
        (
            "test_checkpoints.py::test_foreign_global_is_refused_not_executed",
            "test_checkpoints.py::test_generate_refuses_foreign_checkpoint_with_one_line",
            "test_traces.py::test_legacy_format_checkpoint_with_a_foreign_global_is_named_without_torchs_advice",
        ),
    ),
    (
        "a truncated or corrupt checkpoint",
        "`cannot read checkpoint CKPT ... truncated or corrupt` and which "
        "checkpoint to use instead",
        ("test_checkpoints.py::test_truncated_checkpoint_gets_clear_error",),
    ),
    (
        "a file of random bytes as a checkpoint, through every loader (`safe_load`, fairseq's "
        "loader, `inspect`, "
        "`export`, `fairseq-generate --path`); `--path` naming a folder",
        "`cannot read checkpoint CKPT: it is neither a torch checkpoint (a zip archive) nor a "
        "pickle: corrupt, or not "
        "a checkpoint (...). Not malicious: it pickles no foreign global, and nothing in it was "
        "run ...`; `checkpoint "
        "DIR is a folder, not a file; give a checkpoint file in it, e.g. DIR/checkpoint_best.pt` "
        "(before: random "
        'bytes were called a foreign global, or a traceback; a folder "truncated or corrupt")',
        (
            "test_checkpoints.py::test_random_bytes_are_corrupt_not_malicious_in_every_loader",
            "test_checkpoints.py::test_random_bytes_or_a_folder_as_path_is_one_line_on_the_command_line",
        ),
    ),
    (
        "random bytes that start with a few valid pickle opcodes (pickle's STOP alone, one file "
        "in 256; a tiny pickle "
        "followed by more random bytes) as a checkpoint, through `safe_load`, fairseq's loader, "
        "`inspect` and "
        "`fairseq-generate --path` with the shipped quickstart model",
        "the same `cannot read checkpoint CKPT: it is neither a torch checkpoint (a zip archive) "
        "nor a pickle: corrupt, "
        "or not a checkpoint (...)` line: a pickle fills the file, torch's legacy format starts "
        "with five (before: "
        "`it is a pickle that the weights-only loader cannot read`)",
        (
            "test_checkpoints.py::test_random_bytes_that_start_with_a_few_pickle_opcodes_are_not_a_pickle",
        ),
    ),
    (
        "a raw pickle (protocols 0, 2, 5) or a torch file in the legacy format, through `python -m "
        "fairseq_ext.checkpoints inspect` and `export`",
        "`inspect` lists the globals its pickles name (read without running them, with a note "
        "that the file is no "
        "zip archive); `export` refuses a foreign global (`refusing to load CKPT: it pickles "
        "posix.system ...`) or "
        "a pickle the weights-only loader cannot read, in one line (before: a `ValueError: "
        "Expected input to be a "
        "checkpoint returned by torch.save` traceback)",
        (
            "test_checkpoints.py::test_raw_pickles_are_inspected_without_running_them",
            "test_checkpoints.py::test_inspect_of_a_raw_or_legacy_pickle_is_no_traceback",
        ),
    ),
    (
        "a truncated or foreign `checkpoint_last.pt` in `--save-dir` when resuming",
        "one line naming the file; the save dir is left exactly as it was",
        ("test_bad_input_cli.py::test_bad_checkpoint_last_in_save_dir_is_refused_and_left_alone",),
    ),
    (
        "a file that is no fairseq checkpoint: `{}`, a bare state dict, another dict",
        "`CKPT is not a fairseq checkpoint: it holds an empty dict, not 'model' with 'cfg'` and "
        "what to give",
        ("test_checkpoint_contents.py::test_file_that_is_not_a_fairseq_checkpoint_is_named",),
    ),
    (
        "a checkpoint with a NaN or Inf weight",
        "`refusing to load CKPT: NAME holds 1 non-finite value(s) ...` "
        "(fairseq decoded empty hypotheses scored nan, BLEU 0, exit 0)",
        ("test_checkpoint_contents.py::test_non_finite_weight_is_refused_naming_the_tensor",),
    ),
    (
        "non-finite model outputs while decoding (mask-predict, UniLM beam search)",
        "`decoding the batch of sentence ids ... gave non-finite ...`; nothing more is decoded "
        "(mask-predict printed "
        "empty hypotheses scored 0.0, beam search stopped on an assert)",
        ("test_checkpoint_contents.py::test_non_finite_scores_stop_decoding",),
    ),
    (
        "a user script run again in the same `--work` with other training settings (the HI-CMLM, "
        "ProphetNet, MiniLM "
        "and GLUE scripts of `examples/`), or ProphetNet's `--prep` folder with another `--vocab`",
        "`DIR holds a training with other settings (...); give another --work or remove DIR` (a "
        "fine-tuning, a run; "
        "`--prep` for the data folder), before anything runs "
        "(before: the earlier checkpoint was resumed, or reported as 'already trained' and "
        "scored, under the new "
        "settings); a decoding with other settings (HI-CMLM's `--iter`, ...) is redone, not "
        "reported as this one",
        (
            "test_user_scripts.py::test_hi_cmlm_paper_recipe",
            "test_user_scripts.py::test_prophetnet_gigaword",
            "test_user_scripts.py::test_pretrained_minilm_gigaword_with_a_tiny_bert",
            "test_user_scripts.py::test_pretrained_minilm_position_masking_with_a_tiny_bert",
            "test_user_scripts.py::test_position_masking_glue_recipe_with_a_tiny_bert",
        ),
    ),
    # faults
    (
        "two `fairseq-generate` runs given the same `--results-path` at the same time",
        "the second stops with `PATH is being written by process PID (COMMAND) on HOST, started "
        "TIME` (`by another "
        "process` in the instant before the first has written its pid); the first run's file is "
        "complete (fairseq let "
        "both write it, one line a splice of both)",
        (
            "test_output_files.py::test_second_run_on_the_same_results_path_refuses_and_names_the_first",
            "test_output_files.py::test_exclusive_output_in_process",
            "test_output_files.py::test_a_lock_without_a_pid_yet_names_another_process",
        ),
    ),
    (
        "`fairseq-generate` killed while writing its results",
        "no half file under the final name (an earlier "
        "complete one stays); the next run removes the leftover and says it replaced the earlier "
        "file",
        ("test_output_files.py::test_killed_run_leaves_no_half_file_and_the_next_run_cleans_up",),
    ),
    (
        "a full disk while `fairseq-generate` writes `--results-path` (a small tmpfs the test "
        "mounts and fills: "
        "midway through the text, and before the lock is written; skipped where it cannot mount "
        "one, i.e. not root)",
        "`no space left on the device while writing PATH; the earlier complete PATH is kept. Free "
        "space there (or "
        "give another --results-path) ...`; no `.partial-PID` or lock left (before: three chained "
        "`OSError: [Errno "
        "28]` and the partial file left)",
        ("test_output_files.py::test_full_disk_while_writing_results_keeps_the_earlier_file",),
    ),
    (
        "a `--save-dir` that cannot be written: a read-only mount (the test mounts one; skipped "
        "where it cannot, "
        "i.e. not root), a folder without write permission (as root: run without root's override)",
        "`cannot write checkpoints to --save-dir DIR: Read-only file system` (or `Permission "
        "denied`) and the fix, "
        "before the first update (before: fairseq's warning and a traceback)",
        (
            "test_checkpoint_saving.py::test_read_only_save_dir_is_one_line_before_training",
            "test_checkpoint_saving.py::test_save_dir_the_user_cannot_write_is_one_line",
        ),
    ),
    (
        "two `fairseq-train` runs given the same `--save-dir` (seeds 1 and 2, the second started "
        "while the first "
        "trains)",
        "the second stops before it trains: `--save-dir DIR is in use by another training: "
        "process PID "
        "(COMMAND) on HOST, started TIME holds DIR/train.lock; wait for it to end (or stop it), "
        "or give this run another "
        "--save-dir`; the folder is byte for byte as the first run left it, and ends with the "
        "first run's checkpoints "
        "(fairseq let both write it: both exited 0 and the first run's checkpoints were gone)",
        (
            "test_training_start.py::test_second_training_on_a_save_dir_in_use_refuses_and_names_the_first",
        ),
    ),
    (
        "the `--save-dir` lock of a training killed with SIGKILL (`DIR/train.lock` left, naming a "
        "process that is gone)",
        "the next training takes it over and says so, exit 0: `fairseq_ext: took over "
        "DIR/train.lock from process PID on "
        "HOST, started TIME, which is no longer running (killed?)`",
        ("test_training_start.py::test_lock_left_by_a_killed_training_is_taken_over_and_named",),
    ),
    (
        "resuming a checkpoint that has spent its budget: at update 2 with `--max-update 1`, at "
        "the end of epoch 1 "
        "with `--max-epoch 1` (a finished training's command run again)",
        "`fairseq_ext: DIR/checkpoint_last.pt is at update 2, and --max-update is 1: nothing to "
        "train; the checkpoints "
        "in DIR are left as they are (give a larger --max-update or --max-epoch to train on)` (or "
        "`has finished epoch 1, "
        "and --max-epoch is 1`), exit 0, every file byte for byte as it was (fairseq trained to "
        "update 3 and overwrote "
        "`checkpoint_last.pt`; past `--max-epoch` it trained nothing without a word)",
        ("test_training_start.py::test_resume_past_the_budget_trains_nothing_and_says_so",),
    ),
    # the Python API: one model, many callers; conversion (issue 83)
    (
        "one `hub.from_pretrained` model called from several threads at once (barrier-started, "
        "3 rounds): `translate` with different sentences, strategies, passes, length beams and "
        "offsets, two threads on the same sentences; `summarize` (ProphetNet, UniLM), `fill_mask`, "
        "`classify`",
        "every output equals the one the same call gives alone (before: 24 and 16 of 40 outputs "
        "held the other thread's content, a `RuntimeError: shape '[16, -1, 4, 26, 48]' is "
        "invalid`, and one thread's `strategy=` changed the other's outputs: the lean loop set its "
        "cross-attention cache on the shared layers, `strategy=` set the shared decoder's)",
        (
            "test_hub_threads.py::test_threads_translating_on_one_model_get_their_own_outputs",
            "test_hub_threads.py::test_threads_summarizing_on_one_model_get_their_own_outputs",
            "test_hub_threads.py::test_threads_filling_masks_and_classifying_get_their_own_outputs",
            "test_hub_threads.py::test_per_call_options_reach_the_route_the_lean_loop_leaves",
            "test_hub_threads.py::test_int8_weights_are_made_at_load_and_threads_share_them",
        ),
    ),
    (
        "`fill_mask` or `classify` on a model a caller left in training mode (`model.train()`)",
        "one line asking for `.eval()` (before: the call switched the shared model to eval and "
        "back, under the other threads' calls)",
        ("test_hub_threads.py::test_a_call_refuses_a_model_left_in_training_mode",),
    ),
    (
        "`hub.from_pretrained` of a folder whose `dict.*.txt` has the checkpoint's size in another "
        "order",
        "the `dictionary mismatch: ... the same 6008 entries in another order ...` line "
        "fairseq-interactive gives for the same folder (before: garbage translations, no word)",
        (
            "test_hub_checks.py::"
            "test_a_reordered_dictionary_is_refused_as_fairseq_interactive_refuses_it",
        ),
    ),
    (
        "`translate(..., passes=10**6)`; `--iter-decode-max-iter` above 252",
        "`translate: passes must be at most 253 ...` at once (before: the call never returned)",
        ("test_hub_checks.py::test_passes_beyond_the_maximum_are_refused_at_once",),
    ),
    (
        "a length offset that empties outputs (`length_offset=-16` on short sentences), from the "
        "API and from `fairseq-generate --length-offset`",
        "a warning with the share of empty outputs (`15 of 17 outputs are empty ...`), a note on "
        "stderr per batch at fairseq-generate (before: BLEU 0, no word); `translate(..., "
        "length_offset=N)` per call (before: an unknown keyword)",
        (
            "test_length_offset.py::"
            "test_a_per_call_offset_that_empties_outputs_is_warned_with_their_share",
            "test_length_offset.py::test_fairseq_generate_notes_the_translations_an_offset_empties",
            "test_hub_threads.py::test_a_per_call_length_offset_equals_the_load_time_one",
        ),
    ),
    (
        "the hub's default length offset (+3 tokens) on a sentence of a few words (`translate(\"A "
        'dog runs.")`)',
        "`Ein Hund rennt.`: the offset shrinks to 0 for predictions below `--length-offset-ramp` "
        "(hub default 9, chosen on val with no short sentence of 20 lengthened); "
        "`length_offset_ramp` per call and at load, out of range one line (before: `Ein Hund "
        "rennt mit einer Min Hund rennt.`)",
        (
            "test_length_offset.py::"
            "test_the_default_length_rule_leaves_short_inputs_as_long_and_lengthens_long_ones",
            "test_length_offset.py::test_length_offset_ramp_out_of_range_is_one_line",
            "test_length_offset.py::"
            "test_the_api_takes_the_ramp_per_call_as_at_load_and_refuses_bad_values",
        ),
    ),
    (
        "`python -m fairseq_ext.convert from-transformers` on a `config.json` that is random "
        "bytes, a JSON list, lacks `hidden_size`, has zero heads, text sizes, heads that do not "
        "divide `hidden_size`, more layers than the weights; a ProphetNet config without `ngram`",
        "one line naming the key or the reason (`FOLDER/config.json has no hidden_size; give the "
        "config.json saved with this model`), exit 1, OUT left empty (before: "
        "`UnicodeDecodeError`, `KeyError`, `AttributeError`, `ZeroDivisionError` tracebacks)",
        (
            "test_convert.py::test_bad_folders_get_one_clear_line",
            "test_convert.py::test_bad_prophetnet_config_gets_one_clear_line",
        ),
    ),
    (
        "conversion with OUT equal to or inside the folder it reads; OUT a folder that already "
        "holds a model (`from-transformers`, `to-transformers`)",
        "`OUT X is inside the folder read (F); give another folder`; `X already holds a model "
        "(files ...); give a new or empty folder, or add --force to overwrite it`; nothing "
        "overwritten without `--force` (before: `shutil.SameFileError`; `to-transformers` "
        "overwrote `config.json`, `model.safetensors` and `vocab.txt`, exit 0)",
        (
            "test_convert.py::test_out_is_never_the_folder_read_nor_inside_it",
            "test_convert.py::test_out_holding_a_model_needs_force",
            "test_convert.py::test_export_into_a_model_folder_needs_force",
        ),
    ),
    # what a training starts from (issue 83)
    (
        "a start the user names that is no checkpoint file: `--restore-file` missing, a folder or "
        "a dangling link, `--finetune-from-model` a folder or missing, `--continue-once` a "
        "dangling link, `--init-encoder-from` missing, `--init-decoder-from` a folder; "
        "`--restore-file checkpoint_1_2.pt` meaning the file of `--save-dir` (fairseq reads it "
        "from the current folder)",
        "`--restore-file DIR/checkpoint_best.pt does not exist; DIR holds checkpoint_1_2.pt: give "
        "the checkpoint file to resume from (one fairseq-train wrote), or leave --restore-file "
        "out to resume --save-dir's checkpoint_last.pt; nothing was trained (fairseq-train would "
        "have started from update 0)` (`is a folder, not a checkpoint file`, `is a link to T, "
        "which does not exist`), each naming its own option, before any work; `--save-dir` is not "
        "made; the name of a file of `--save-dir`: `... --restore-file is read from the current "
        "folder, not from --save-dir: give save/checkpoint_1_2.pt; ...` (before: a training from "
        "update 0, exit 0, for a missing or folder `--restore-file`, a folder "
        "`--finetune-from-model` and a dangling link; a `ValueError` traceback for a missing "
        "`--finetune-from-model`; `--init-encoder-from` named as a `--path` problem)",
        (
            "test_training_start.py::"
            "test_a_named_start_that_is_no_checkpoint_file_is_one_line_and_nothing_is_trained",
            "test_training_start.py::"
            "test_a_restore_file_named_as_in_the_save_dir_is_given_its_path",
        ),
    ),
    (
        "a `checkpoint_last.pt` in `--save-dir` that is a dangling link (its target on a disk "
        "that is gone) or a folder",
        "`--save-dir DIR: checkpoint_last.pt is a link to T, which does not exist, so the "
        "training would start again from update 0; make T available again (or link "
        "checkpoint_last.pt to an existing checkpoint), or remove the link to start a new "
        "training` (`is a folder, not a checkpoint file`); the folder is left as it was (before: "
        "a training from update 0, exit 0)",
        (
            "test_training_start.py::"
            "test_a_checkpoint_last_that_is_a_dangling_link_or_a_folder_is_one_line",
        ),
    ),
    (
        "resuming a `--save-dir` with another `--arch`, `--hybrid-strategy` or `--dropout` (any "
        "model option that changes the model or what it learns) than its `checkpoint_last.pt` was "
        "trained with",
        "`--save-dir DIR holds a training with other model options: DIR/checkpoint_last.pt was "
        "trained with --hybrid-strategy fence_replace, this run gives --hybrid-strategy all_mask "
        "(...). Give a new --save-dir to train with these options (add --finetune-from-model "
        "DIR/checkpoint_last.pt to start from its weights), or the checkpoint's options to resume "
        "it`, before any update, the folder left as it was; the checkpoint's options resume "
        "(before: the weights trained on under the new options, which the checkpoint then "
        "recorded as its own, exit 0). The example scripts refuse the same case (`DIR holds a "
        "training with other settings`)",
        ("test_training_start.py::test_resuming_with_other_model_options_is_refused_naming_both",),
    ),
    (
        "`--seed` out of range (-1, 2**32 - 1, 2**32), `fairseq-train` and `fairseq-generate`",
        "`--seed -1 is out of range: give a whole number from 0 to 2147483647 (fairseq seeds "
        "numpy with it plus the epoch number, and numpy takes 0 to 2**32 - 1)`, nothing written; "
        "2147483647 trains (before: `ValueError: Seed must be between 0 and 2**32 - 1` tracebacks)",
        ("test_training_start.py::test_a_seed_out_of_range_is_one_line",),
    ),
    (
        "Ctrl-C (SIGINT to the process group) during `fairseq-generate`, or while "
        "`fairseq-interactive` waits for "
        "input (every command of the plugin's tasks, and the plugin's own commands)",
        "nothing: the command ends by SIGINT, which the shell shows as status 130 (a script "
        "running it stops too), the "
        "data untouched (before: a `KeyboardInterrupt` traceback); a Ctrl-C before `--user-dir` "
        "is loaded (while "
        "Python imports torch and fairseq) is still Python's traceback",
        ("test_interrupted_commands.py::test_ctrl_c_ends_the_command_quietly_with_status_130",),
    ),
    (
        "Ctrl-C during `fairseq-train` of a plugin task (one process)",
        "the update under way ends, `checkpoint_last.pt` is saved at it, one line says "
        "`interrupted by Ctrl-C after update N: saved DIR/checkpoint_last.pt; the same command "
        "resumes from it`, status 130 without a traceback; a second Ctrl-C stops at once, saving "
        "nothing (before: it ended at once and silently, every update since the last save lost)",
        (
            "test_ctrl_c_training.py::"
            "test_ctrl_c_saves_the_last_update_and_the_same_command_resumes",
        ),
    ),
    (
        "`fairseq-train --task cmlm_hybrid` (any plugin task) without `--arch`",
        "one line, exit 2: `--arch is missing; the architectures of --task cmlm_hybrid: "
        "hi_cmlm_transformer, ...` (before: a 20-line traceback ending in a bare `RuntimeError`)",
        (
            "test_cli_help.py::test_a_missing_arch_is_one_line_naming_the_tasks_architectures",
            "test_cli_help.py::test_fairseq_train_without_arch_is_one_line",
        ),
    ),
    (
        "a data script's `--vocab` larger than its training text holds (`--vocab 32000` on "
        "3,000 pairs)",
        "one line: `spm.py: error: --vocab 32000 is more pieces than this training text holds; "
        "give --vocab 6154 or less ...`, nothing binarized (before: sentencepiece's traceback, "
        "`Vocabulary size too high`)",
        ("test_own_corpus.py::test_parallel_refuses_bad_input_in_one_line",),
    ),
    (
        "SIGKILL during training, then the same command again",
        "resumes from `checkpoint_last.pt`: parameters, Adam "
        "moments, learning rate and scheduler equal an uninterrupted run",
        ("test_reliability.py::test_sigkill_and_resume_loses_nothing_beyond_the_checkpoint",),
    ),
    (
        "a run with `--unsorted-batches` stopped and resumed in a later epoch than it started (in "
        "another process)",
        "trains on the batches an uninterrupted run does: each epoch's are cut from `--seed` and "
        "the epoch number "
        "(before: fairseq's iterator cache kept the batches of the epoch the process started in, "
        "so the resumed run "
        "cut other batches and met some pairs of that epoch twice, others never)",
        (
            "test_reliability.py::test_unsorted_batches_continued_in_a_later_epoch_end_where_one_run_ends",
            "test_unsorted_batches.py::test_an_epochs_batches_are_the_same_in_one_process_and_in_a_process_resumed_at_that_epoch",
        ),
    ),
    (
        "a kill during the copy to `checkpoint_last.pt`",
        "`checkpoint_last.pt` is still the previous, readable checkpoint (the copy is atomic)",
        ("test_reliability.py::test_interrupted_checkpoint_copy_keeps_the_old_file",),
    ),
    (
        "a kill during the very first copy: `checkpoint_last.pt` missing, "
        "`checkpoint_last.pt.partial-PID` and "
        "`*.pt.tmp` left",
        "`CKPT is missing ...: resuming from checkpoint_1_2.pt, the newest complete checkpoint`; "
        "the leftovers are removed and named (fairseq started again from update 0)",
        (
            "test_checkpoint_saving.py::test_lost_checkpoint_last_resumes_from_the_newest_complete_one",
            "test_checkpoint_saving.py::test_next_copy_removes_partials_of_ended_processes_only",
        ),
    ),
    (
        "a kill between writing `checkpoint_N_M.pt` and copying it: `checkpoint_last.pt` complete "
        "but older than "
        "it",
        "`CKPT is older than checkpoint_1_4.pt (a run killed before copying it?): resuming from "
        "checkpoint_1_4.pt, the newest complete checkpoint` (fairseq resumed from the older one, "
        "redoing updates)",
        (
            "test_checkpoint_saving.py::test_older_checkpoint_last_gives_way_to_the_newest_complete_one",
        ),
    ),
    (
        "no space left on the device while saving a checkpoint or copying it: a filesystem that "
        "fills up midway "
        "through torch's zip writer (a small tmpfs the test mounts; skipped where it cannot mount "
        "one, i.e. not "
        "root), and writes to `/dev/full`",
        "`no space left on the device while saving CKPT; the last good checkpoint is "
        ".../checkpoint_last.pt` and the "
        "fix; the partial file is removed (before: torch's `[enforce fail at "
        "inline_container.cc:672] . "
        "unexpected pos ...`, the `.pt.tmp` left)",
        (
            "test_checkpoint_saving.py::test_filesystem_that_fills_up_during_a_save_names_the_last_good_checkpoint",
            "test_checkpoint_saving.py::test_full_disk_while_saving_names_the_last_good_checkpoint",
            "test_checkpoint_saving.py::test_full_disk_in_process_for_the_save_and_the_copy",
        ),
    ),
]


def render() -> str:
    rows = ["| input or fault | what the user sees | tested by |", "|---|---|---|"]
    for what, answer, tests in CASES:
        refs = ", ".join(f"`{t.split('::')[1]}` ({t.split('::')[0]})" for t in tests)
        rows.append(f"| {what} | {answer} | {refs} |")
    return "\n".join(rows)


def _test_functions(filename: str) -> set[str]:
    tree = ast.parse((ROOT / "tests" / filename).read_text(encoding="utf-8"))
    return {
        node.name
        for node in tree.body
        if isinstance(node, ast.FunctionDef) and node.name.startswith("test_")
    }


def test_every_named_test_exists():
    missing = [
        t
        for _, _, tests in CASES
        for t in tests
        if t.split("::")[1] not in _test_functions(t.split("::")[0])
    ]
    assert not missing, f"rows name tests that do not exist: {missing}"


def test_every_reliability_test_is_a_row():
    named = {t for _, _, tests in CASES for t in tests}
    unnamed = [
        f"{f}::{name}"
        for f in RELIABILITY_FILES
        for name in sorted(_test_functions(f))
        if f"{f}::{name}" not in named | NOT_CASES
    ]
    assert not unnamed, f"add a row of CASES for: {unnamed}"


def test_committed_table_equals_the_rendered_one():
    text = PAGE.read_text(encoding="utf-8")
    assert text.count(START) == 1 and text.count(END) == 1
    block = text[text.index(START) + len(START) : text.index(END)].strip("\n")
    assert block == render(), (
        "docs/reliability.md is stale: run python -m tests.test_reliability_table"
    )


def write() -> None:
    text = PAGE.read_text(encoding="utf-8")
    head, tail = text[: text.index(START) + len(START)], text[text.index(END) :]
    PAGE.write_text(f"{head}\n{render()}\n{tail}", encoding="utf-8")


if __name__ == "__main__":
    write()
