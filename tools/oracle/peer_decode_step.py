# Strongest PyTorch decode peer on the GPU machine: one compiled decode step (static KV cache, CUDA graphs), gpt-fast style.
# usage: python3 tools/oracle/peer_decode_step.py 1 8 32   (batch sizes); prints ms a round and tok/s total
import sys, time, torch
from transformers import Qwen2Config, Qwen2ForCausalLM, StaticCache
torch.backends.cuda.matmul.allow_tf32 = True
c = Qwen2Config(vocab_size=151936, hidden_size=1536, intermediate_size=8960, num_hidden_layers=28, num_attention_heads=12,
                num_key_value_heads=2, max_position_embeddings=32768, tie_word_embeddings=True)
with torch.device("cuda"):
    m = Qwen2ForCausalLM(c).to(torch.bfloat16).eval()
for bs in [int(b) for b in sys.argv[1:]] or [1, 8]:
    try:
        cache = StaticCache(config=c, max_cache_len=1024)
    except TypeError:
        cache = StaticCache(config=c, max_batch_size=bs, max_cache_len=1024, device="cuda", dtype=torch.bfloat16)
    x = torch.randint(0, 150000, (bs, 512), device="cuda")
    with torch.no_grad():
        out = m(input_ids=x, past_key_values=cache, cache_position=torch.arange(512, device="cuda"), use_cache=True)
        tok = out.logits[:, -1:].argmax(-1)
        def step(t, p):
            return m(input_ids=t, past_key_values=cache, cache_position=p, use_cache=True).logits[:, -1:].argmax(-1)
        cstep = torch.compile(step, mode="reduce-overhead", fullgraph=True)
        pos = torch.tensor([512], device="cuda")
        for i in range(20):  # warm-up and capture
            torch.compiler.cudagraph_mark_step_begin(); tok = cstep(tok, pos + i).clone()
        torch.cuda.synchronize(); t0 = time.time(); n = 256
        for i in range(n):
            torch.compiler.cudagraph_mark_step_begin(); tok = cstep(tok, pos + 20 + i).clone()
        torch.cuda.synchronize(); dt = (time.time() - t0) / n
    print(f"PEER compiled-step bs={bs}: {dt*1e3:.3f} ms/round, {bs/dt:.1f} tok/s total", flush=True)
