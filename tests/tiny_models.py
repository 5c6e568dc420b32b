"""A random-weights GPT-2 saved locally: a real lm-eval ``hf`` model without any download.

Tests run lm-eval end to end with it (multiple-choice and generative tasks, adaptive runs,
ranking), and ``tools/bench_personfit.py``, ``bench_random_weights.py`` and ``bench_inloop.py``
use it as a model that answers at random (they put ``tests/`` on ``sys.path``). It lives here,
not in the package: no package code runs it. Byte-level tokens need no vocabulary file, so
nothing is fetched; torch, tokenizers and transformers come with lm-eval's ``hf`` backend.
"""

from __future__ import annotations

from pathlib import Path


def build_random_gpt2(folder: Path, seed: int = 0, n_positions: int = 1024) -> Path:
    """Save a 2-layer, 32-wide GPT-2 with random weights (``seed``) and tokenizer in ``folder``.

    ``n_positions`` is its context length (IFEval generates up to 1,280 tokens: 2048 there).
    """
    import tokenizers
    import torch
    import transformers

    alphabet = sorted(tokenizers.pre_tokenizers.ByteLevel.alphabet())
    vocab = {char: k for k, char in enumerate(alphabet)}
    vocab["<|endoftext|>"] = len(vocab)
    tokenizer = tokenizers.Tokenizer(tokenizers.models.BPE(vocab=vocab, merges=[]))
    tokenizer.pre_tokenizer = tokenizers.pre_tokenizers.ByteLevel(add_prefix_space=False)
    tokenizer.decoder = tokenizers.decoders.ByteLevel()
    transformers.PreTrainedTokenizerFast(
        tokenizer_object=tokenizer, eos_token="<|endoftext|>", bos_token="<|endoftext|>"
    ).save_pretrained(folder)
    torch.manual_seed(seed)
    config = transformers.GPT2Config(
        vocab_size=len(vocab),
        n_positions=n_positions,
        n_embd=32,
        n_layer=2,
        n_head=2,
        bos_token_id=len(vocab) - 1,
        eos_token_id=len(vocab) - 1,
    )
    transformers.GPT2LMHeadModel(config).save_pretrained(folder)
    return Path(folder)
