# transformers' prompt fill on the GPU machine: one forward of a random Qwen2 decoder of dots.ocr's shape
# (Qwen2-VL-2B's), BF16, at 1 x 2,048, 8 x 512 and 1 x 5,000 tokens; prints ms, tok/s and TFLOP/s.
import time, torch
from transformers import Qwen2Config, Qwen2ForCausalLM
torch.backends.cuda.matmul.allow_tf32 = True
c = Qwen2Config(vocab_size=151936, hidden_size=1536, intermediate_size=8960, num_hidden_layers=28, num_attention_heads=12,
                num_key_value_heads=2, max_position_embeddings=32768, tie_word_embeddings=True)
with torch.device("cuda"):
    m = Qwen2ForCausalLM(c).to(torch.bfloat16).eval()
n = sum(p.numel() for p in m.parameters())
for bs, L in ((1, 2048), (8, 512), (1, 5000)):
    xb = torch.randint(0, 150000, (bs, L), device="cuda")
    with torch.no_grad():
        m(xb); torch.cuda.synchronize(); t = time.time()
        for _ in range(5): m(xb)
        torch.cuda.synchronize(); dt = (time.time() - t) / 5
    print(f"PEER prefill {bs}x{L} tokens: {dt*1e3:.1f} ms, {bs*L/dt:.0f} tok/s, {2*n*bs*L/dt/1e12:.0f} TFLOP/s", flush=True)
print(f"params {n/1e9:.3f}B", flush=True)
