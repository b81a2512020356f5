#!/usr/bin/env python3
"""Text front-end oracle: what Hugging Face computes for the tokenizer corpus and the chat templates.

Run from the repository root after tools/testdata.sh, on a machine with tokenizers and transformers:

    python3 tools/oracle/text_reference.py --out OUTDIR

Writes into OUTDIR (copy them to the paths in brackets):
  corpus_ids.jsonl   one {"ids": [...], "decoded": "..."} per line of corpus.jsonl   [testdata/tokenizer/]
  corpus_ids.json    versions, input sha256s, HF encode speed                        [testdata/tokenizer/]
  rendered.jsonl     one {"name", "template", "rendered"} (or "error") per case      [testdata/templates/]
  rendered.json      versions, input sha256s, how the strings were rendered          [testdata/templates/]
"""
import argparse
import hashlib
import json
import os
import time
from datetime import datetime, timezone

CORPUS = "testdata/tokenizer/corpus.jsonl"
TOKENIZER_DIR = "testdata/tokenizer/qwen"
CONVERSATIONS = "testdata/templates/conversations.jsonl"
TEMPLATE_DIR = "testdata/templates"


def sha256(path):
    with open(path, "rb") as f:
        return hashlib.sha256(f.read()).hexdigest()


def read_jsonl(path):
    with open(path, encoding="utf-8") as f:
        return [json.loads(line) for line in f if line.strip()]


def versions():
    out = {}
    for name in ("tokenizers", "transformers", "jinja2"):
        try:
            out[name] = __import__(name).__version__
        except Exception as e:  # recorded, not fatal: each part needs only some of them
            out[name] = f"unavailable: {e}"
    return out


def encode_corpus(out):
    from tokenizers import Tokenizer
    tok = Tokenizer.from_file(os.path.join(TOKENIZER_DIR, "tokenizer.json"))
    texts = [r["text"] for r in read_jsonl(CORPUS)]
    rows = []
    for t in texts:
        ids = tok.encode(t, add_special_tokens=False).ids
        rows.append({"ids": ids, "decoded": tok.decode(ids, skip_special_tokens=False)})
    with open(os.path.join(out, "corpus_ids.jsonl"), "w", encoding="utf-8") as f:
        for r in rows:
            f.write(json.dumps(r, ensure_ascii=False) + "\n")

    n_tokens = sum(len(r["ids"]) for r in rows)
    best_single = None
    for _ in range(3):
        t0 = time.perf_counter()
        for t in texts:
            tok.encode(t, add_special_tokens=False)
        dt = time.perf_counter() - t0
        best_single = dt if best_single is None else min(best_single, dt)
    best_batch = None
    for _ in range(3):
        t0 = time.perf_counter()
        tok.encode_batch(texts, add_special_tokens=False)
        dt = time.perf_counter() - t0
        best_batch = dt if best_batch is None else min(best_batch, dt)

    meta = {
        "generated": datetime.now(timezone.utc).isoformat(timespec="seconds"),
        "versions": versions(),
        "inputs": {CORPUS: sha256(CORPUS),
                   TOKENIZER_DIR + "/tokenizer.json": sha256(os.path.join(TOKENIZER_DIR, "tokenizer.json"))},
        "strings": len(texts),
        "tokens": n_tokens,
        "hf_encode_tokens_per_s_one_thread_loop": round(n_tokens / best_single),
        "hf_encode_batch_tokens_per_s_all_cores": round(n_tokens / best_batch),
        "cpu_count": os.cpu_count(),
    }
    with open(os.path.join(out, "corpus_ids.json"), "w") as f:
        json.dump(meta, f, indent=1)
    print(f"corpus: {len(texts)} strings, {n_tokens} tokens, "
          f"{meta['hf_encode_tokens_per_s_one_thread_loop']} tok/s one thread, "
          f"{meta['hf_encode_batch_tokens_per_s_all_cores']} tok/s batch")


def load_tokenizer():
    """The transformers tokenizer whose apply_chat_template renders; how it was loaded."""
    from transformers import AutoTokenizer, PreTrainedTokenizerFast
    try:
        return AutoTokenizer.from_pretrained(TOKENIZER_DIR), "AutoTokenizer.from_pretrained"
    except Exception as e:
        print("AutoTokenizer failed:", repr(e))
    cfg = json.load(open(os.path.join(TOKENIZER_DIR, "tokenizer_config.json")))
    tok = PreTrainedTokenizerFast(tokenizer_file=os.path.join(TOKENIZER_DIR, "tokenizer.json"),
                                  eos_token=cfg.get("eos_token"), pad_token=cfg.get("pad_token"))
    return tok, "PreTrainedTokenizerFast(tokenizer_file=...)"


def jinja_render(template, messages, add_generation_prompt, kwargs, special):
    """Renders as transformers' render_jinja_template does (used only when transformers is absent)."""
    import jinja2
    from jinja2.ext import loopcontrols
    from jinja2.sandbox import ImmutableSandboxedEnvironment

    def raise_exception(message):
        raise jinja2.exceptions.TemplateError(message)

    def tojson(x, ensure_ascii=False, indent=None, separators=None, sort_keys=False):
        return json.dumps(x, ensure_ascii=ensure_ascii, indent=indent, separators=separators, sort_keys=sort_keys)

    env = ImmutableSandboxedEnvironment(trim_blocks=True, lstrip_blocks=True, extensions=[loopcontrols])
    env.filters["tojson"] = tojson
    env.globals["raise_exception"] = raise_exception
    env.globals["strftime_now"] = lambda fmt: datetime.now().strftime(fmt)
    return env.from_string(template).render(messages=messages, add_generation_prompt=add_generation_prompt,
                                            **special, **kwargs)


def render_templates(out):
    cases = read_jsonl(CONVERSATIONS)
    names = sorted({c["template"] for c in cases})
    templates = {n: open(os.path.join(TEMPLATE_DIR, n + ".jinja"), encoding="utf-8").read() for n in names}
    try:
        tok, how = load_tokenizer()
        special = dict(tok.special_tokens_map)
    except Exception as e:
        print("transformers unavailable, rendering with jinja2 as transformers does:", repr(e))
        tok, how, special = None, "jinja2 replica of transformers' render_jinja_template", {}
    rows, disagreements = [], 0
    for c in cases:
        row = {"name": c["name"], "template": c["template"]}
        try:
            if tok is not None:
                s = tok.apply_chat_template(c["messages"], chat_template=templates[c["template"]], tokenize=False,
                                            add_generation_prompt=c["add_generation_prompt"], **c["kwargs"])
            else:
                s = jinja_render(templates[c["template"]], c["messages"], c["add_generation_prompt"], c["kwargs"],
                                 special)
            row["rendered"] = s
        except Exception as e:
            row["error"] = f"{type(e).__name__}: {e}"
        if tok is not None:
            try:
                replica = jinja_render(templates[c["template"]], c["messages"], c["add_generation_prompt"],
                                       c["kwargs"], special)
            except Exception as e:
                replica = f"error {e}"
            if replica != row.get("rendered"):
                disagreements += 1
                print("jinja2 replica differs on", c["name"])
        rows.append(row)
    with open(os.path.join(out, "rendered.jsonl"), "w", encoding="utf-8") as f:
        for r in rows:
            f.write(json.dumps(r, ensure_ascii=False) + "\n")
    meta = {
        "generated": datetime.now(timezone.utc).isoformat(timespec="seconds"),
        "versions": versions(),
        "renderer": how,
        "special_tokens_map": special,
        "jinja2_replica_disagreements": disagreements,
        "inputs": {CONVERSATIONS: sha256(CONVERSATIONS),
                   **{f"{TEMPLATE_DIR}/{n}.jinja": sha256(os.path.join(TEMPLATE_DIR, n + ".jinja")) for n in names}},
        "cases": len(rows),
        "errors": sum("error" in r for r in rows),
    }
    with open(os.path.join(out, "rendered.json"), "w") as f:
        json.dump(meta, f, indent=1, ensure_ascii=False)
    print(f"templates: {len(rows)} cases, {meta['errors']} errors, renderer {how}, "
          f"{disagreements} jinja2-replica disagreements")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", required=True)
    ap.add_argument("--only", choices=["tokenizer", "templates"])
    a = ap.parse_args()
    os.makedirs(a.out, exist_ok=True)
    if not os.path.exists(os.path.join(TOKENIZER_DIR, "tokenizer.json")):
        raise SystemExit(f"{TOKENIZER_DIR}/tokenizer.json is missing: run tools/testdata.sh first")
    if a.only != "templates":
        encode_corpus(a.out)
    if a.only != "tokenizer":
        render_templates(a.out)


if __name__ == "__main__":
    main()
