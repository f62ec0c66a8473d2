"""Shapes of the memory-bound kernels taken from public model configurations, each with its source, split
into a half the kernels may be tuned on and a held-out half they are only reported on.

The split is not chosen by hand: within each kernel the shapes are ordered by the CRC-32 of their label and
dealt alternately, first to "tune", then to "held-out". A shape added later lands where its label sends it;
nothing here may be edited to move a shape between halves after its figures are seen.

Rows are tokens (prefill: a batch of sequences; decode: one token a sequence) or, for softmax, attention
rows (batch x heads x queries) over a key length, or a sampler's rows over the vocabulary. Sizes keep each
timed launch between about 0.2 and 600 MB so that one device run of all four kernels takes minutes.
"""

import zlib
from typing import NamedTuple


class Shape(NamedTuple):
    kernel: str  # softmax | layernorm | cross-entropy | rotary-embedding
    dims: tuple  # softmax, layernorm: (rows, width); cross-entropy: (tokens, vocab); rotary: (tokens, heads, head_dim)
    dtype: str  # bf16 | fp16 | fp32
    source: str  # the model configuration and field the numbers come from

    @property
    def label(self) -> str:
        return f"{self.kernel} {'x'.join(map(str, self.dims))} {self.dtype}"


SHAPES = [
    # softmax: attention probabilities (prefill and decode) and samplers over vocabularies
    Shape("softmax", (12288, 1024), "bf16", "GPT-2: n_head 12 x n_ctx 1024 queries over 1024 keys"),
    Shape("softmax", (16384, 4096), "fp16", "Llama-2-7B: 32 heads x 512 queries over a 4096-token context"),
    Shape("softmax", (8192, 3000), "bf16", "Mistral-7B: 32 heads x 256 queries over 3000 keys (window 4096)"),
    Shape("softmax", (2048, 4097), "bf16", "Llama-3-8B decode: batch 64 x 32 heads over 4097 keys"),
    Shape("softmax", (896, 8193), "fp16", "Qwen2-7B decode: batch 32 x 28 heads over 8193 keys"),
    Shape("softmax", (768, 1025), "fp32", "GPT-2 decode: batch 64 x 12 heads over 1025 keys"),
    Shape("softmax", (4096, 1000), "bf16", "ViT-B/16 (ImageNet-1k head): batch 4096 over 1000 classes"),
    Shape("softmax", (512, 50257), "bf16", "GPT-2 sampler: batch 512 over vocab_size 50257"),
    Shape("softmax", (1024, 32000), "fp16", "Llama-2 sampler: batch 1024 over vocab_size 32000"),
    Shape("softmax", (256, 128256), "bf16", "Llama-3 sampler: batch 256 over vocab_size 128256"),
    Shape("softmax", (256, 151936), "fp16", "Qwen2 sampler: batch 256 over vocab_size 151936"),
    Shape("softmax", (256, 102400), "fp32", "DeepSeek-V2 sampler: batch 256 over vocab_size 102400"),
    Shape("softmax", (2048, 30522), "bf16", "BERT-base masked LM: 2048 tokens over vocab_size 30522"),
    Shape("softmax", (1024, 32768), "fp32", "Mistral-7B v0.3 sampler: batch 1024 over vocab_size 32768"),
    # layernorm: hidden sizes of models that normalize with LayerNorm (Llama, Mistral, Qwen use RMSNorm)
    Shape("layernorm", (8192, 768), "bf16", "GPT-2 small: n_embd 768, 8 x 1024 tokens"),
    Shape("layernorm", (8192, 1024), "fp16", "GPT-2 medium: n_embd 1024, 8 x 1024 tokens"),
    Shape("layernorm", (8192, 1280), "bf16", "GPT-2 large: n_embd 1280, 8 x 1024 tokens"),
    Shape("layernorm", (8192, 1600), "fp16", "GPT-2 XL: n_embd 1600, 8 x 1024 tokens"),
    Shape("layernorm", (8192, 2560), "bf16", "Phi-2: hidden_size 2560, 4 x 2048 tokens"),
    Shape("layernorm", (8192, 4544), "bf16", "Falcon-7B: hidden_size 4544, 4 x 2048 tokens"),
    Shape("layernorm", (8192, 5120), "fp16", "OPT-13B: hidden_size 5120, 4 x 2048 tokens"),
    Shape("layernorm", (4096, 7168), "bf16", "OPT-30B: hidden_size 7168, 2 x 2048 tokens"),
    Shape("layernorm", (4096, 8192), "fp32", "Falcon-40B: hidden_size 8192, 2 x 2048 tokens"),
    Shape("layernorm", (2048, 14336), "bf16", "BLOOM-176B: hidden_size 14336, 2048 tokens"),
    Shape("layernorm", (64, 1600), "bf16", "GPT-2 XL decode: n_embd 1600, batch 64"),
    Shape("layernorm", (32, 4544), "fp16", "Falcon-7B decode: hidden_size 4544, batch 32"),
    Shape("layernorm", (12608, 1024), "fp32", "ViT-L/16: hidden_size 1024, 64 images x 197 tokens"),
    Shape("layernorm", (12000, 1280), "fp16", "Whisper large-v3 encoder: d_model 1280, 8 x 1500 frames"),
    # cross-entropy: language-model heads (prefill, training) and decode-sized batches
    Shape("cross-entropy", (4096, 50257), "bf16", "GPT-2: vocab_size 50257, 4 x 1024 tokens"),
    Shape("cross-entropy", (4096, 32000), "fp16", "Llama-2: vocab_size 32000, 4096 tokens"),
    Shape("cross-entropy", (2048, 128256), "bf16", "Llama-3: vocab_size 128256, 2048 tokens"),
    Shape("cross-entropy", (1024, 151936), "bf16", "Qwen2: vocab_size 151936, 1024 tokens"),
    Shape("cross-entropy", (4096, 32768), "fp32", "Mistral-7B v0.3: vocab_size 32768, 4096 tokens"),
    Shape("cross-entropy", (2048, 102400), "bf16", "DeepSeek-V2: vocab_size 102400, 2048 tokens"),
    Shape("cross-entropy", (4096, 30522), "fp16", "BERT-base: vocab_size 30522, 4096 tokens"),
    Shape("cross-entropy", (1024, 256000), "bf16", "Gemma-7B: vocab_size 256000, 1024 tokens"),
    Shape("cross-entropy", (64, 50257), "fp32", "GPT-2 decode: vocab_size 50257, batch 64"),
    Shape("cross-entropy", (64, 128256), "bf16", "Llama-3 decode: vocab_size 128256, batch 64"),
    Shape("cross-entropy", (4096, 32064), "bf16", "Phi-3-mini: vocab_size 32064, 4096 tokens"),
    Shape("cross-entropy", (4096, 50272), "fp16", "OPT: vocab_size 50272, 4096 tokens"),
    # rotary: (tokens, heads, head_dim) of the query or key projection
    Shape("rotary-embedding", (4096, 32, 128), "bf16", "Llama-2-7B q: 32 heads x head_dim 128, 4096 tokens"),
    Shape("rotary-embedding", (4096, 8, 128), "bf16", "Llama-3-8B k: num_key_value_heads 8 x 128, 4096 tokens"),
    Shape("rotary-embedding", (4096, 28, 128), "fp16", "Qwen2-7B q: 28 heads x 128, 4096 tokens"),
    Shape("rotary-embedding", (8192, 14, 64), "bf16", "Qwen2-0.5B q: 14 heads x 64, 8192 tokens"),
    Shape("rotary-embedding", (8192, 32, 64), "fp16", "Llama-3.2-1B q: 32 heads x 64, 8192 tokens"),
    Shape("rotary-embedding", (8192, 32, 128), "bf16", "Mistral-7B q: 32 heads x 128, 8192 tokens"),
    Shape("rotary-embedding", (2048, 64, 128), "bf16", "Llama-2-70B q: 64 heads x 128, 2048 tokens"),
    Shape("rotary-embedding", (4096, 32, 96), "bf16", "Phi-3-mini q: 32 heads x head_dim 96, 4096 tokens"),
    Shape("rotary-embedding", (4096, 128, 64), "bf16", "DeepSeek-V2 q: 128 heads x qk_rope_head_dim 64"),
    Shape("rotary-embedding", (64, 32, 128), "bf16", "Llama-3-8B decode q: batch 64 x 32 heads x 128"),
    Shape("rotary-embedding", (4096, 12, 128), "fp32", "Qwen2-1.5B q: 12 heads x 128, 4096 tokens"),
    Shape("rotary-embedding", (4096, 16, 256), "bf16", "Gemma-7B q: 16 heads x head_dim 256, 4096 tokens"),
]


def split(kernel: str) -> tuple[list[Shape], list[Shape]]:
    """(tune, held_out) shapes of one kernel: ordered by the CRC-32 of their labels, dealt alternately."""
    mine = sorted((s for s in SHAPES if s.kernel == kernel), key=lambda s: zlib.crc32(s.label.encode()))
    return mine[0::2], mine[1::2]


if __name__ == "__main__":
    for name in sorted({s.kernel for s in SHAPES}):
        for half, shapes in zip(("tune", "held-out"), split(name)):
            for s in shapes:
                print(f"{half:9s} {s.label:34s} {s.source}")
