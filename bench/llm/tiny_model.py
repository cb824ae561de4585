#!/usr/bin/env python3
"""Writes a tiny llama model with random weights as a GGUF file, for llama.cpp's server.

No weights can be downloaded where perfops is tested, and tokens need not make sense to be
timed: what the tests measure is when a server sends them. The model is a real llama
(embeddings, RMS norms, rotary attention, a SwiGLU feed-forward, an output head) that llama.cpp
loads and runs as any other; only its weights are noise, drawn from a fixed seed so every file
written with the same arguments is the same.

The tokenizer is llama.cpp's SentencePiece kind ("llama"): the three control tokens, the 256
byte tokens its byte fallback needs, every printable ASCII character (so any prompt of plain
text is tokenized without the fallback) and a few hundred short words after a space ("\u2581").
The rows of the output head for the control and byte tokens are zero: their logit is 0 while
the words' are spread around it, so a greedy request (temperature 0) never picks the end of
sequence nor a lone byte (text that is not UTF-8), and every answer is `max_tokens` long.

    tiny_model.py OUT.gguf [--layers 2] [--embd 64] [--ff 128] [--heads 4] [--words 400]

Needs the `gguf` package (llama.cpp's own writer) and numpy.
"""

import argparse
import sys

import numpy as np

try:
    import gguf
except ImportError:  # pragma: no cover - said to whoever runs it without the venv
    sys.exit("tiny_model.py: the gguf package is missing (bench/llm/install.sh puts it in its venv)")


def vocabulary(words):
    """(tokens, scores, types): controls, bytes, printable characters, then `words` words."""
    tokens, scores, types = [], [], []

    def add(text, score, kind):
        tokens.append(text)
        scores.append(score)
        types.append(kind)

    T = gguf.TokenType
    add("<unk>", 0.0, T.UNKNOWN)
    add("<s>", 0.0, T.CONTROL)
    add("</s>", 0.0, T.CONTROL)
    for b in range(256):
        add("<0x%02X>" % b, 0.0, T.BYTE)
    add("\u2581", -1.0, T.NORMAL)
    for c in range(0x21, 0x7F):
        add(chr(c), -2.0, T.NORMAL)
    # Words of two or three letters after a space: enough variety for the head to choose among.
    letters = "etaoinshrdlucmfwypvbgk"
    made = 0
    for a in letters:
        for b in letters:
            if made >= words:
                break
            add("\u2581" + a + b, -3.0, T.NORMAL)
            made += 1
    return tokens, scores, types


def write(path, layers, embd, ff, heads, words, ctx, seed):
    rng = np.random.default_rng(seed)
    tokens, scores, types = vocabulary(words)
    n_vocab = len(tokens)
    head_dim = embd // heads

    w = gguf.GGUFWriter(path, "llama")
    w.add_name("perfops-tiny-random")
    w.add_context_length(ctx)
    w.add_embedding_length(embd)
    w.add_block_count(layers)
    w.add_feed_forward_length(ff)
    w.add_head_count(heads)
    w.add_head_count_kv(heads)
    w.add_rope_dimension_count(head_dim)
    w.add_layer_norm_rms_eps(1e-5)
    w.add_vocab_size(n_vocab)
    w.add_file_type(gguf.LlamaFileType.ALL_F32)

    w.add_tokenizer_model("llama")
    w.add_token_list(tokens)
    w.add_token_scores(scores)
    w.add_token_types(types)
    w.add_bos_token_id(1)
    w.add_eos_token_id(2)
    w.add_unk_token_id(0)
    w.add_add_bos_token(True)
    w.add_add_eos_token(False)

    def mat(rows, cols, scale):
        return (rng.standard_normal((rows, cols)) * scale).astype(np.float32)

    def ones(n):
        return np.ones((n,), dtype=np.float32)

    # numpy shapes are (rows, cols) = llama.cpp's {ne1, ne0} reversed: {in, out} as it expects.
    w.add_tensor("token_embd.weight", mat(n_vocab, embd, 1.0))
    for i in range(layers):
        p = "blk.%d." % i
        s = 1.0 / np.sqrt(embd)
        w.add_tensor(p + "attn_norm.weight", ones(embd))
        w.add_tensor(p + "attn_q.weight", mat(embd, embd, s))
        w.add_tensor(p + "attn_k.weight", mat(embd, embd, s))
        w.add_tensor(p + "attn_v.weight", mat(embd, embd, s))
        w.add_tensor(p + "attn_output.weight", mat(embd, embd, s))
        w.add_tensor(p + "ffn_norm.weight", ones(embd))
        w.add_tensor(p + "ffn_gate.weight", mat(ff, embd, s))
        w.add_tensor(p + "ffn_up.weight", mat(ff, embd, s))
        w.add_tensor(p + "ffn_down.weight", mat(embd, ff, 1.0 / np.sqrt(ff)))
    w.add_tensor("output_norm.weight", ones(embd))
    head = mat(n_vocab, embd, 1.0)
    # Control and byte tokens never win a greedy choice (see the module's doc).
    for t, kind in enumerate(types):
        if kind != gguf.TokenType.NORMAL:
            head[t, :] = 0.0
    w.add_tensor("output.weight", head)

    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()
    return n_vocab


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("out")
    ap.add_argument("--layers", type=int, default=2)
    ap.add_argument("--embd", type=int, default=64)
    ap.add_argument("--ff", type=int, default=128)
    ap.add_argument("--heads", type=int, default=4)
    ap.add_argument("--words", type=int, default=400)
    ap.add_argument("--ctx", type=int, default=1024)
    ap.add_argument("--seed", type=int, default=38)
    a = ap.parse_args()
    if a.embd % a.heads:
        sys.exit("tiny_model.py: --embd must be a multiple of --heads")
    n_vocab = write(a.out, a.layers, a.embd, a.ff, a.heads, a.words, a.ctx, a.seed)
    print("%s: llama, %d layers, embd %d, vocab %d" % (a.out, a.layers, a.embd, n_vocab))


if __name__ == "__main__":
    main()
