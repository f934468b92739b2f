"""Seq2Seq NMT: LSTM encoder-decoder with attention, as in Sockeye 1.5 / tensorflow-nmt.

Architecture: source embedding -> bidirectional LSTM encoder layer followed by
unidirectional layers (Sockeye's/GNMT's encoder) -> LSTM decoder initialised from the
encoder's final state -> Luong "general" attention over the encoder states (source padding
masked) -> tanh(W [h; context]) -> vocabulary projection. Teacher forcing, cross-entropy
over target tokens (padding ignored), Adam, gradient norm clipped at 1.0 (Sockeye).

Sizes: tiny = vocab 32, hidden 32, 2 layers, sentences of 4-8 tokens, batch 4; small =
vocab 1000, hidden 256, length 10-30, batch 32; paper = IWSLT15 En-Vi scale: vocab 17191
(source) / 7709 (target), 2 layers of 512, length up to 50, batch 128 (tensorflow-nmt's
iwslt15 settings). Data: a reversal task (:func:`_common.translation_batch`).
"""

from __future__ import annotations

import torch
from torch import nn

from workloads import harness, quality, specs
from workloads.pytorch import _common

MODEL = "seq2seq"


Config = specs.Seq2Seq
CONFIGS = specs.SEQ2SEQ.configs
BATCH = specs.SEQ2SEQ.batch


class Seq2Seq(nn.Module):
    def __init__(self, cfg: Config) -> None:
        super().__init__()
        h = cfg.hidden
        self.src_emb = nn.Embedding(cfg.src_vocab, h, padding_idx=0)
        self.tgt_emb = nn.Embedding(cfg.tgt_vocab, h, padding_idx=0)
        self.enc_bi = nn.LSTM(h, h // 2, batch_first=True, bidirectional=True)
        self.enc_rest = nn.LSTM(h, h, num_layers=cfg.layers - 1, batch_first=True)
        self.dec = nn.LSTM(h, h, num_layers=cfg.layers, batch_first=True)
        self.attn = nn.Linear(h, h, bias=False)
        self.combine = nn.Linear(2 * h, h)
        self.out = nn.Linear(h, cfg.tgt_vocab)

    def forward(
        self, src: torch.Tensor, src_len: torch.Tensor, tgt_in: torch.Tensor
    ) -> torch.Tensor:
        """Logits ``[B, T, tgt_vocab]`` for the teacher-forced target input."""
        packed = nn.utils.rnn.pack_padded_sequence(
            self.src_emb(src), src_len.cpu(), batch_first=True, enforce_sorted=False
        )
        bi, _ = self.enc_bi(packed)
        enc, (h, c) = self.enc_rest(bi)
        enc, _ = nn.utils.rnn.pad_packed_sequence(enc, batch_first=True, total_length=src.shape[1])
        layers = self.dec.num_layers
        h0 = h[-1:].expand(layers, -1, -1).contiguous()
        c0 = c[-1:].expand(layers, -1, -1).contiguous()
        dec, _ = self.dec(self.tgt_emb(tgt_in), (h0, c0))
        scores = torch.bmm(self.attn(dec), enc.transpose(1, 2))  # [B, T, S]
        pad = torch.arange(src.shape[1], device=src.device)[None, :] >= src_len[:, None]
        scores = scores.masked_fill(pad[:, None, :], float("-inf"))
        context = torch.bmm(torch.softmax(scores, dim=-1), enc)
        return self.out(torch.tanh(self.combine(torch.cat([dec, context], dim=-1))))


def main(argv: list[str] | None = None) -> None:
    args = harness.parse_args(MODEL, _common.FRAMEWORK, BATCH, argv)
    cfg = CONFIGS[args.size]
    device, gen = _common.setup(args)
    net = _common.distribute(Seq2Seq(cfg).to(device), device, args)
    opt = torch.optim.Adam(net.parameters(), lr=cfg.lr)
    loss_fn = nn.CrossEntropyLoss(ignore_index=0)
    vocab = min(cfg.src_vocab, cfg.tgt_vocab)
    data = _common.batches(
        lambda g: _common.translation_batch(args.batch_size, cfg.min_len, cfg.max_len, vocab, g),
        args,
        device,
        gen,
    )
    net.train()

    def step(_: int) -> float:
        src, src_len, tgt, _tlen = next(data)
        opt.zero_grad(set_to_none=True)
        logits = net(src, src_len, tgt[:, :-1])
        loss = loss_fn(logits.reshape(-1, logits.shape[-1]), tgt[:, 1:].reshape(-1))
        loss.backward()
        nn.utils.clip_grad_norm_(net.parameters(), 1.0)
        opt.step()
        return loss.item()

    evaluate = _common.translation_eval(net, net, cfg.min_len, cfg.max_len, vocab, device, args)
    _common.run(
        MODEL, args, device, step, evaluate=evaluate, target=quality.target(MODEL, args.size)
    )


if __name__ == "__main__":
    main()
