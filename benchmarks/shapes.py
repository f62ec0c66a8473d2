"""Shapes of the bundled kernels taken from public model configurations, each with its source, split into a
half the kernels may be tuned on and a held-out half they are only reported on.

The split is not chosen by hand: within each kernel the shapes are ordered by the CRC-32 of their label and
dealt alternately, first to "tune", then to "held-out". A shape added later lands where its label sends it;
nothing here may be edited to move a shape between halves after its figures are seen.

Rows are tokens (prefill: a batch of sequences; decode: one token a sequence) or, for softmax, attention
rows (batch x heads x queries) over a key length, or a sampler's rows over the vocabulary. Sizes keep each
timed launch of a memory-bound kernel between about 0.2 and 600 MB, and of a compute-bound one (GEMM,
attention, MoE) under about 10 ms on an H100, so that one device run of a kernel takes a minute or two. No
shape is one its kernel's test times (its headline or sweep: what the kernels were tuned on), but
cross-entropy 4096x32768 fp32, found after its figures were seen (tests/benchmarks/test_shapes.py).
"""

import zlib
from typing import NamedTuple


class Shape(NamedTuple):
    kernel: str  # softmax | layernorm | cross-entropy | rotary-embedding | gemm | flash-attention | fused-moe
    # softmax, layernorm: (rows, width); cross-entropy: (tokens, vocab); rotary: (tokens, heads, head_dim);
    # the compute-bound kernels as their tests' shapes: gemm (M, N, K); flash-attention (batch, heads,
    # sequence, head_dim, causal); fused-moe (tokens, experts, top_k, hidden, intermediate)
    dims: tuple
    dtype: str  # bf16 | fp16 | fp32
    source: str  # the model configuration and field the numbers come from

    @property
    def size(self) -> str:
        """dims as a table shows them: 2048x4097, 1x32x8192x128 causal"""
        sizes = "x".join(str(d) for d in self.dims if not isinstance(d, bool))
        flags = [("causal" if d else "full") for d in self.dims if isinstance(d, bool)]
        return " ".join([sizes, *flags])

    @property
    def label(self) -> str:
        return f"{self.kernel} {self.size} {self.dtype}"


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
    # gemm: a layer's projections, x (tokens, in) @ W (in, out); prefill, and decode batches of 64-128 rows
    Shape("gemm", (4096, 6144, 4096), "bf16", "Llama-3-8B qkv: hidden 4096 -> 32 + 2 x 8 heads of 128, 4096 tokens"),
    Shape("gemm", (4096, 28672, 4096), "bf16", "Llama-3-8B gate_up: hidden 4096 -> 2 x intermediate 14336"),
    Shape("gemm", (4096, 4096, 14336), "fp16", "Mistral-7B down: intermediate 14336 -> hidden 4096, 4096 tokens"),
    Shape("gemm", (64, 6144, 4096), "bf16", "Llama-3-8B qkv decode: batch 64"),
    Shape("gemm", (128, 4096, 14336), "fp16", "Mistral-7B down decode: batch 128"),
    Shape("gemm", (2048, 4608, 3584), "bf16", "Qwen2-7B qkv: hidden 3584 -> 28 + 2 x 4 heads of 128, 2048 tokens"),
    Shape("gemm", (2048, 3584, 18944), "bf16", "Qwen2-7B down: intermediate 18944 -> hidden 3584"),
    Shape("gemm", (128, 37888, 3584), "fp16", "Qwen2-7B gate_up decode: 2 x intermediate 18944, batch 128"),
    Shape("gemm", (8192, 4800, 1600), "fp16", "GPT-2 XL c_attn: n_embd 1600 -> 3 x 1600, 8 x 1024 tokens"),
    Shape("gemm", (8192, 1600, 6400), "bf16", "GPT-2 XL mlp c_proj: 6400 -> 1600, 8 x 1024 tokens"),
    Shape("gemm", (4096, 50257, 768), "fp16", "GPT-2 LM head: n_embd 768 -> vocab_size 50257, 4096 tokens"),
    Shape("gemm", (2048, 10240, 8192), "bf16", "Llama-2-70B qkv: hidden 8192 -> 64 + 2 x 8 heads of 128"),
    Shape("gemm", (64, 8192, 28672), "bf16", "Llama-2-70B down decode: intermediate 28672 -> 8192, batch 64"),
    Shape("gemm", (3072, 9216, 3072), "fp16", "Phi-3-mini qkv: hidden 3072 -> 3 x 3072, 3072 tokens"),
    # flash-attention: prefill (causal) of decoders, encoders (not causal); head_dim 64 and 128
    Shape("flash-attention", (2, 32, 4096, 128, True), "bf16", "Llama-3-8B: 32 heads of 128, 2 x 4096 tokens"),
    Shape("flash-attention", (1, 32, 8192, 128, True), "fp16", "Mistral-7B: 32 heads of 128, 8192 tokens"),
    Shape("flash-attention", (4, 32, 3000, 128, True), "bf16", "Llama-2-7B: 32 heads of 128, 4 x 3000 tokens"),
    Shape("flash-attention", (1, 32, 16384, 128, True), "bf16", "Llama-3.1-8B long context: 16384 tokens"),
    Shape("flash-attention", (1, 64, 8192, 128, True), "bf16", "Llama-2-70B: 64 heads of 128, 8192 tokens"),
    Shape("flash-attention", (16, 12, 1024, 64, True), "fp16", "GPT-2: 12 heads of 64, 16 x 1024 tokens"),
    Shape("flash-attention", (8, 14, 2048, 64, True), "bf16", "Qwen2-0.5B: 14 heads of 64, 8 x 2048 tokens"),
    Shape("flash-attention", (4, 32, 2000, 64, True), "fp16", "Llama-3.2-1B: 32 heads of 64, 4 x 2000 tokens"),
    Shape("flash-attention", (64, 12, 512, 64, False), "bf16", "BERT-base: 12 heads of 64, 64 x 512 tokens"),
    Shape("flash-attention", (256, 16, 197, 64, False), "bf16", "ViT-L/16: 16 heads of 64, 256 images x 197"),
    Shape("flash-attention", (8, 20, 1500, 64, False), "fp16", "Whisper large-v3 encoder: 20 heads of 64, 1500"),
    Shape("flash-attention", (1, 24, 4608, 128, False), "bf16", "FLUX.1-dev: 24 heads of 128, 4096 image + 512 "
                                                                "text tokens"),
    # fused-moe: (tokens, experts, top_k, hidden, intermediate): prefill, and small token counts where the
    # weights' read bounds it
    Shape("fused-moe", (2048, 8, 2, 4096, 14336), "bf16", "Mixtral-8x7B: 8 experts, top-2, 2048 tokens"),
    Shape("fused-moe", (512, 8, 2, 4096, 14336), "fp16", "Mixtral-8x7B: 512 tokens"),
    Shape("fused-moe", (64, 8, 2, 4096, 14336), "bf16", "Mixtral-8x7B decode: batch 64"),
    Shape("fused-moe", (2048, 8, 2, 6144, 16384), "bf16", "Mixtral-8x22B: 8 experts, top-2, 2048 tokens"),
    Shape("fused-moe", (4096, 64, 6, 2048, 1408), "bf16", "DeepSeek-V2-Lite: 64 experts, top-6, 4096 tokens"),
    Shape("fused-moe", (512, 64, 6, 2048, 1408), "fp16", "DeepSeek-V2-Lite: 512 tokens"),
    Shape("fused-moe", (64, 64, 6, 2048, 1408), "bf16", "DeepSeek-V2-Lite decode: batch 64"),
    Shape("fused-moe", (4096, 60, 4, 2048, 1408), "bf16", "Qwen1.5-MoE-A2.7B: 60 experts, top-4, 4096 tokens"),
    Shape("fused-moe", (8192, 64, 8, 2048, 1024), "fp16", "OLMoE-1B-7B: 64 experts, top-8, 8192 tokens"),
    Shape("fused-moe", (2048, 64, 8, 3584, 2560), "bf16", "Qwen2-57B-A14B: 64 experts, top-8, 2048 tokens"),
    Shape("fused-moe", (2048, 16, 4, 6144, 10752), "bf16", "DBRX: 16 experts, top-4, 2048 tokens"),
    Shape("fused-moe", (1024, 8, 2, 6144, 32768), "bf16", "Grok-1: 8 experts, top-2, 1024 tokens"),
]


def split(kernel: str) -> tuple[list[Shape], list[Shape]]:
    """(tune, held_out) shapes of one kernel: ordered by the CRC-32 of their labels, dealt alternately."""
    mine = sorted((s for s in SHAPES if s.kernel == kernel), key=lambda s: zlib.crc32(s.label.encode()))
    return mine[0::2], mine[1::2]


if __name__ == "__main__":
    for name in sorted({s.kernel for s in SHAPES}):
        for half, shapes in zip(("tune", "held-out"), split(name)):
            for s in shapes:
                print(f"{half:9s} {s.label:44s} {s.source}")
