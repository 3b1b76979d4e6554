#!/usr/bin/env python3
"""Trains rml's bundled default model: a tiny Llama-architecture decoder.

Run on demand (it needs torch, transformers, tokenizers and gguf; it takes minutes):

    train_default_model.py [--out DIR] [--steps N] [--max-minutes M]   train, write the model
    train_default_model.py --verify-only [--out DIR]    check the written files against each other
    train_default_model.py --print-dest              print the committed folder and exit

What it does, all with fixed seeds:

1. Text: CPython's own documentation topics (``pydoc_data.topics.topics``, shipped with
   every Python, so nothing is downloaded), the entries sorted by name and separated by
   ``<|endoftext|>``.
2. Tokenizer: a byte-level BPE (GPT-2 pre-tokenizer regex and byte alphabet) with
   ``VOCAB_SIZE`` entries trained locally with the ``tokenizers`` package. Special tokens
   ``<|endoftext|>`` (BOS and EOS), ``<|im_start|>`` and ``<|im_end|>`` (ChatML).
3. Model: ``transformers.LlamaForCausalLM`` (RMSNorm, rotate-half RoPE, SwiGLU, grouped
   query attention with 4 query heads sharing 2 key/value heads), trained with AdamW and a
   cosine learning-rate schedule on random windows of the token stream for a fixed number
   of steps; the loss curve is printed.
4. Output, in ``DIR`` (default ``models/default``):
   - ``rml-tiny-llama.gguf``: GGUF v3 with the ``llama`` architecture keys, llama.cpp's
     tensor names, 2-D weights in F16 and norms in F32, the Q/K rows permuted for
     adjacent-pair ("NORM") RoPE as llama.cpp's converter does, the tokenizer as
     ``tokenizer.ggml.model = "gpt2"`` (tokens, token types, merges, ``pre = "gpt-2"``,
     BOS/EOS ids) and a ChatML ``tokenizer.chat_template``;
   - ``hf/``: the same weights as Hugging Face ``config.json`` + ``model.safetensors``
     (F16, un-permuted) + ``generation_config.json``, and ``tokenizer.json`` with a
     ``tokenizer_config.json`` holding the chat template, for cross-checks.
5. Samples: two or three continuations drawn with torch from the trained model.
"""

# ci-fixture-check: on-demand

import argparse
import json
import math
import pathlib
import random
import sys
import time

DEST = pathlib.Path(__file__).resolve().parents[1] / "models" / "default"

SEED = 20261130
VOCAB_SIZE = 1024
HIDDEN = 128
LAYERS = 4
HEADS = 4
KV_HEADS = 2
FFN = 384
CONTEXT = 256
SEQ_LEN = 128
BATCH = 16
STEPS = 1200
LR = 3e-3
WARMUP = 20
ROPE_THETA = 10000.0
RMS_EPS = 1e-5

BOS = "<|endoftext|>"
SPECIAL = ["<|endoftext|>", "<|im_start|>", "<|im_end|>"]
CHAT_TEMPLATE = (
    "{% for message in messages %}"
    "{{ '<|im_start|>' + message['role'] + '\\n' + message['content'] + '<|im_end|>' + '\\n' }}"
    "{% endfor %}"
    "{% if add_generation_prompt %}{{ '<|im_start|>assistant\\n' }}{% endif %}"
)
PROMPTS = ["The \"for\" statement", "Boolean operations\n", "A class definition"]


def corpus():
    import pydoc_data.topics

    topics = pydoc_data.topics.topics
    return [topics[name].strip() for name in sorted(topics)]


def train_tokenizer(docs):
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, processors, trainers

    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=True)
    tok.decoder = decoders.ByteLevel()
    tok.post_processor = processors.ByteLevel(trim_offsets=False)
    trainer = trainers.BpeTrainer(
        vocab_size=VOCAB_SIZE,
        min_frequency=2,
        special_tokens=SPECIAL,
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
        show_progress=False,
    )
    tok.train_from_iterator(docs, trainer=trainer)
    return tok


def build_model():
    import torch
    from transformers import LlamaConfig, LlamaForCausalLM

    config = LlamaConfig(
        vocab_size=VOCAB_SIZE,
        hidden_size=HIDDEN,
        intermediate_size=FFN,
        num_hidden_layers=LAYERS,
        num_attention_heads=HEADS,
        num_key_value_heads=KV_HEADS,
        max_position_embeddings=CONTEXT,
        rms_norm_eps=RMS_EPS,
        rope_theta=ROPE_THETA,
        hidden_act="silu",
        tie_word_embeddings=False,
        attention_bias=False,
        mlp_bias=False,
        bos_token_id=0,
        eos_token_id=0,
    )
    torch.manual_seed(SEED)
    return LlamaForCausalLM(config)


def train(model, ids, steps, max_minutes):
    import torch

    gen = torch.Generator().manual_seed(SEED)
    opt = torch.optim.AdamW(model.parameters(), lr=LR, betas=(0.9, 0.95), weight_decay=0.1)

    def lr_at(step):
        if step < WARMUP:
            return LR * (step + 1) / WARMUP
        t = (step - WARMUP) / max(1, steps - WARMUP)
        return LR * (0.1 + 0.9 * 0.5 * (1 + math.cos(math.pi * t)))

    model.train()
    t0 = time.time()
    running = None
    for step in range(steps):
        starts = torch.randint(0, len(ids) - SEQ_LEN - 1, (BATCH,), generator=gen)
        batch = torch.stack([ids[s : s + SEQ_LEN + 1] for s in starts.tolist()])
        for group in opt.param_groups:
            group["lr"] = lr_at(step)
        # the model shifts the labels itself: position t predicts token t + 1
        loss = model(input_ids=batch, labels=batch).loss
        opt.zero_grad(set_to_none=True)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        running = loss.item() if running is None else 0.95 * running + 0.05 * loss.item()
        out_of_time = time.time() - t0 > 60 * max_minutes
        if step % 25 == 0 or step == steps - 1 or out_of_time:
            print(
                f"step {step:5d}  loss {loss.item():.4f}  smoothed {running:.4f}  "
                f"lr {lr_at(step):.2e}  {time.time() - t0:6.0f}s",
                flush=True,
            )
        if out_of_time:
            print(f"stopping after {step + 1} steps: the {max_minutes}-minute budget is spent")
            break
    model.eval()
    return running


def permute(w, n_head):
    """llama.cpp's LlamaModel.permute: rotate-half row order -> adjacent-pair row order."""
    rows = w.shape[0]
    return (
        w.reshape(n_head, 2, rows // n_head // 2, *w.shape[1:])
        .swapaxes(1, 2)
        .reshape(w.shape)
    )


def write_gguf(path, model, tok):
    import gguf
    import numpy as np

    vocab = tok.get_vocab()
    tokens = [None] * len(vocab)
    for text, i in vocab.items():
        tokens[i] = text
    special_ids = {tok.token_to_id(s) for s in SPECIAL}
    token_types = [
        gguf.TokenType.CONTROL if i in special_ids else gguf.TokenType.NORMAL for i in range(len(tokens))
    ]
    merges = json.loads(tok.to_str())["model"]["merges"]
    merges = [m if isinstance(m, str) else f"{m[0]} {m[1]}" for m in merges]

    w = gguf.GGUFWriter(str(path), "llama")
    w.add_name("rml-tiny-llama")
    w.add_file_type(gguf.LlamaFileType.MOSTLY_F16)
    w.add_context_length(CONTEXT)
    w.add_embedding_length(HIDDEN)
    w.add_block_count(LAYERS)
    w.add_feed_forward_length(FFN)
    w.add_head_count(HEADS)
    w.add_head_count_kv(KV_HEADS)
    w.add_rope_dimension_count(HIDDEN // HEADS)
    w.add_rope_freq_base(ROPE_THETA)
    w.add_layer_norm_rms_eps(RMS_EPS)
    w.add_vocab_size(VOCAB_SIZE)
    w.add_tokenizer_model("gpt2")
    w.add_tokenizer_pre("gpt-2")
    w.add_token_list(tokens)
    w.add_token_types(token_types)
    w.add_token_merges(merges)
    w.add_bos_token_id(tok.token_to_id(BOS))
    w.add_eos_token_id(tok.token_to_id(BOS))
    w.add_add_bos_token(False)
    w.add_chat_template(CHAT_TEMPLATE)

    sd = {k: v.detach().float().numpy() for k, v in model.state_dict().items()}
    names = {
        "model.embed_tokens.weight": "token_embd.weight",
        "model.norm.weight": "output_norm.weight",
        "lm_head.weight": "output.weight",
    }
    per_layer = {
        "input_layernorm": "attn_norm",
        "self_attn.q_proj": "attn_q",
        "self_attn.k_proj": "attn_k",
        "self_attn.v_proj": "attn_v",
        "self_attn.o_proj": "attn_output",
        "post_attention_layernorm": "ffn_norm",
        "mlp.gate_proj": "ffn_gate",
        "mlp.up_proj": "ffn_up",
        "mlp.down_proj": "ffn_down",
    }
    for i in range(LAYERS):
        for hf, gg in per_layer.items():
            names[f"model.layers.{i}.{hf}.weight"] = f"blk.{i}.{gg}.weight"
    for hf_name, gg_name in names.items():
        data = sd[hf_name]
        if gg_name.endswith("attn_q.weight"):
            data = permute(data, HEADS)
        elif gg_name.endswith("attn_k.weight"):
            data = permute(data, KV_HEADS)
        data = np.ascontiguousarray(data, dtype=np.float16 if data.ndim == 2 else np.float32)
        w.add_tensor(gg_name, data)
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()


def write_hf(folder, model, tok):
    import torch

    folder.mkdir(parents=True, exist_ok=True)
    model.to(torch.float16).save_pretrained(folder, safe_serialization=True)
    model.to(torch.float32)
    tok.save(str(folder / "tokenizer.json"))
    add_legacy_rope_theta(folder)
    config = {
        "bos_token": BOS,
        "eos_token": BOS,
        "add_bos_token": False,
        "chat_template": CHAT_TEMPLATE,
        "model_max_length": CONTEXT,
        "tokenizer_class": "PreTrainedTokenizerFast",
    }
    (folder / "tokenizer_config.json").write_text(json.dumps(config, indent=2) + "\n")


def rope(x, pos, pairs):
    """Rotates each head's vector ``x`` (``[n_head, head_dim]``) to position ``pos``,
    pairing elements ``(i, i + d/2)`` (``"half"``, HF) or ``(2i, 2i + 1)`` (``"adjacent"``,
    llama.cpp's NORM)."""
    import numpy as np

    d = x.shape[-1]
    theta = pos * ROPE_THETA ** (-np.arange(0, d, 2) / d)
    cos, sin = np.cos(theta), np.sin(theta)
    if pairs == "half":
        a, b = x[:, : d // 2], x[:, d // 2 :]
        return np.concatenate([a * cos - b * sin, a * sin + b * cos], axis=-1)
    a, b = x[:, 0::2], x[:, 1::2]
    out = np.empty_like(x)
    out[:, 0::2], out[:, 1::2] = a * cos - b * sin, a * sin + b * cos
    return out


def verify(folder):
    """Checks the written files against each other: every GGUF tensor equals the HF
    safetensors one (Q/K after the permutation), and adjacent-pair RoPE on the GGUF Q/K
    rows equals rotate-half RoPE on the HF rows, permuted."""
    import gguf
    import numpy as np
    from safetensors.numpy import load_file

    hf = load_file(str(folder / "hf" / "model.safetensors"))
    reader = gguf.GGUFReader(str(folder / "rml-tiny-llama.gguf"))
    g = {t.name: np.asarray(t.data) for t in reader.tensors}
    x = np.random.default_rng(0).normal(size=HIDDEN).astype(np.float64)
    for i in range(LAYERS):
        for proj, n_head in (("q", HEADS), ("k", KV_HEADS)):
            w_hf = hf[f"model.layers.{i}.self_attn.{proj}_proj.weight"].astype(np.float64)
            w_gg = g[f"blk.{i}.attn_{proj}.weight"].astype(np.float64)
            assert np.array_equal(permute(w_hf, n_head), w_gg), (i, proj)
            head_dim = HIDDEN // HEADS
            for pos in (0, 1, 7, 100):
                ref = rope((w_hf @ x).reshape(n_head, head_dim), pos, "half").reshape(-1)
                got = rope((w_gg @ x).reshape(n_head, head_dim), pos, "adjacent").reshape(-1)
                assert np.allclose(permute(ref[:, None], n_head)[:, 0], got, atol=1e-9), (i, proj, pos)
    assert np.array_equal(g["token_embd.weight"], hf["model.embed_tokens.weight"])
    assert np.array_equal(g["output.weight"], hf["lm_head.weight"])
    print(f"verified: {len(g)} GGUF tensors match the safetensors; NORM RoPE on permuted Q/K = rotate-half RoPE")


def add_legacy_rope_theta(folder):
    """transformers 5 writes ``rope_parameters``; readers written for transformers 4
    configs look for a top-level ``rope_theta``, so both are kept."""
    path = folder / "config.json"
    config = json.loads(path.read_text())
    config["rope_theta"] = config.get("rope_parameters", {}).get("rope_theta", ROPE_THETA)
    path.write_text(json.dumps(config, indent=2, sort_keys=True) + "\n")


def samples(model, tok):
    import torch

    out = []
    for k, prompt in enumerate(PROMPTS):
        torch.manual_seed(SEED + k)
        ids = torch.tensor([tok.encode(prompt).ids])
        gen = model.generate(
            ids, max_new_tokens=80, do_sample=True, temperature=0.8, top_k=40, pad_token_id=0
        )
        out.append(tok.decode(gen[0].tolist()))
    return out


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", type=pathlib.Path, default=DEST)
    ap.add_argument("--steps", type=int, default=STEPS)
    ap.add_argument("--max-minutes", type=float, default=30.0, help="stop training early after this")
    ap.add_argument("--print-dest", action="store_true")
    ap.add_argument("--verify-only", action="store_true", help="only check the files in --out")
    args = ap.parse_args()
    if args.print_dest:
        print(DEST)
        return
    if args.verify_only:
        verify(args.out)
        return

    import numpy as np
    import torch

    random.seed(SEED)
    np.random.seed(SEED)
    torch.manual_seed(SEED)
    # one thread: on a shared, loaded machine OpenMP threads spin-waiting on each other
    # make every tiny op many times slower
    torch.set_num_threads(1)

    docs = corpus()
    tok = train_tokenizer(docs)
    eot = tok.token_to_id(BOS)
    stream = []
    for doc in docs:
        stream.extend(tok.encode(doc).ids)
        stream.append(eot)
    ids = torch.tensor(stream, dtype=torch.long)
    print(f"corpus: {len(docs)} topics, {sum(map(len, docs))} chars, {len(stream)} tokens")

    model = build_model()
    n_params = sum(p.numel() for p in model.parameters())
    print(f"model: {n_params} parameters")
    final = train(model, ids, args.steps, args.max_minutes)
    print(f"final smoothed training loss {final:.4f}")

    args.out.mkdir(parents=True, exist_ok=True)
    write_gguf(args.out / "rml-tiny-llama.gguf", model, tok)
    write_hf(args.out / "hf", model, tok)
    verify(args.out)
    for text in samples(model, tok):
        print("---- sample ----")
        print(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
