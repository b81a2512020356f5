#!/usr/bin/env python3
"""Writes testdata/templates/conversations.jsonl: the chat-template exactness cases.

One case a line: {"name", "template" (a file stem in testdata/templates), "messages",
"add_generation_prompt", "kwargs"}. Deterministic; run from the repository root with
`python3 testdata/templates/make_conversations.py`. The oracle renders each case with
transformers' apply_chat_template into rendered.jsonl; the Go tests compare strings.
"""
import itertools
import json

TEXTS = [
    "Describe this image.",
    "What is written on the sign?",
    "Compare the two pictures, please.",
    "这张图片里有什么？",
    "Qu'est-ce que c'est ? Réponds en français.",
    "  leading and trailing spaces  ",
    "line one\nline two\n\nline four",
    "emoji 👨‍👩‍👧 and tabs\there",
    "<|im_start|>looks like a special token<|im_end|>",
    "",
]

ANSWERS = [
    "It shows a cat on a windowsill.",
    "The sign says \"STOP\".",
    "图片里有一只狗。",
    "Both pictures show the same bridge, at day and at night.",
    "multi\nline\nanswer",
]


def img(i):
    return [{"type": "image"}, {"type": "image", "image": f"file://img{i}.png"},
            {"type": "image_url", "image_url": {"url": f"https://example.com/{i}.jpg"}},
            {"image": f"img{i}.png"}][i % 4]


def txt(s, typed=True):
    return {"type": "text", "text": s} if typed else {"text": s}


def vid(i):
    return [{"type": "video"}, {"type": "video", "video": f"clip{i}.mp4"}, {"video": f"clip{i}.mp4"}][i % 3]


def qwen2_vl_cases():
    cases = []
    n = 0

    def add(messages, agp, kwargs=None):
        nonlocal n
        cases.append({"name": f"qwen2_vl_{n:02d}", "template": "qwen2_vl", "messages": messages,
                      "add_generation_prompt": agp, "kwargs": kwargs or {}})
        n += 1

    for i, agp in itertools.product(range(4), [True, False]):
        add([{"role": "user", "content": TEXTS[i]}], agp)
    add([{"role": "system", "content": "You are a careful OCR engine."},
         {"role": "user", "content": [img(0), txt("Read the text.")]}], True)
    add([{"role": "system", "content": [txt("List-form system prompt.")]},
         {"role": "user", "content": [txt("Before the image:"), img(1), txt("after it.")]}], True)
    add([{"role": "user", "content": [img(0), img(1), img(2), txt(TEXTS[2])]}], True)
    add([{"role": "user", "content": [img(0), img(1), img(2), txt(TEXTS[2])]}], True, {"add_vision_id": True})
    add([{"role": "user", "content": [txt(TEXTS[3]), img(3)]}], False, {"add_vision_id": True})
    add([{"role": "user", "content": [img(2)]}], True)
    add([{"role": "user", "content": [vid(0), txt("What happens in the clip?")]}], True)
    add([{"role": "user", "content": [img(0), vid(1), img(1), vid(2), txt("Count them.")]}], True,
        {"add_vision_id": True})
    add([{"role": "user", "content": [txt(TEXTS[4], typed=False), img(1)]}], True)
    add([{"role": "user", "content": [img(0), txt(TEXTS[0])]},
         {"role": "assistant", "content": ANSWERS[0]},
         {"role": "user", "content": [img(1), txt(TEXTS[2])]}], True, {"add_vision_id": True})
    add([{"role": "user", "content": [img(0), txt(TEXTS[0])]},
         {"role": "assistant", "content": [txt(ANSWERS[1])]},
         {"role": "user", "content": "And the colour?"},
         {"role": "assistant", "content": ANSWERS[4]}], False)
    add([{"role": "system", "content": "Be brief."},
         {"role": "user", "content": "hi"}, {"role": "assistant", "content": "hello"},
         {"role": "user", "content": "bye"}], True)
    add([{"role": "user", "content": []}], True)
    add([{"role": "user", "content": [txt(TEXTS[5]), txt(TEXTS[6]), txt(TEXTS[7])]}], True)
    add([{"role": "user", "content": [txt(TEXTS[8]), img(0)]}], True)
    add([{"role": "user", "content": TEXTS[9]}], True)
    add([{"role": "assistant", "content": "I speak first."}, {"role": "user", "content": "ok"}], True)
    add([{"role": "system", "content": "sys"}, {"role": "system", "content": "second system"},
         {"role": "user", "content": "x"}], True)
    for i in range(6):
        parts = [img(j) if (i >> (j % 3)) & 1 else txt(TEXTS[j]) for j in range(i + 2)]
        add([{"role": "user", "content": parts}], i % 2 == 0, {"add_vision_id": i % 3 == 0})
    add([{"role": "user", "content": [img(0), txt("first")]},
         {"role": "assistant", "content": ANSWERS[2]},
         {"role": "user", "content": [img(1), img(2), txt("second")]},
         {"role": "assistant", "content": ANSWERS[3]},
         {"role": "user", "content": [vid(0), img(3), txt("third")]}], True, {"add_vision_id": True})
    add([{"role": "user", "content": "tool-free question"}], True, {"enable_thinking": False})
    add([{"role": "user", "content": [{"type": "text", "text": "typed text with an extra key", "extra": 1}]}], True)
    return cases


def qwen3_cases():
    cases = []
    n = 0

    def add(messages, agp, kwargs=None):
        nonlocal n
        cases.append({"name": f"qwen3_{n:02d}", "template": "qwen3", "messages": messages,
                      "add_generation_prompt": agp, "kwargs": kwargs or {}})
        n += 1

    think = [{}, {"enable_thinking": True}, {"enable_thinking": False}]
    for i, agp, kw in itertools.product(range(2), [True, False], think):
        add([{"role": "user", "content": TEXTS[i + 3]}], agp, kw)
    for kw in think:
        add([{"role": "system", "content": "You are Qwen."}, {"role": "user", "content": "2+2?"}], True, kw)
    add([{"role": "user", "content": "2+2?"},
         {"role": "assistant", "content": "<think>\nsimple sum\n</think>\n\n4"},
         {"role": "user", "content": "and 3+3?"}], True)
    add([{"role": "user", "content": "2+2?"},
         {"role": "assistant", "content": "<think>\nsimple sum\n</think>\n\n4"}], False)
    add([{"role": "user", "content": "2+2?"},
         {"role": "assistant", "content": "<think>\n\nsimple sum\n\n</think>\n\n\n4"}], False, {"enable_thinking": False})
    add([{"role": "user", "content": "2+2?"},
         {"role": "assistant", "content": "4"}], False)
    add([{"role": "user", "content": "2+2?"},
         {"role": "assistant", "content": "4", "reasoning_content": "adding two and two"}], False)
    add([{"role": "user", "content": "2+2?"},
         {"role": "assistant", "content": "4", "reasoning_content": "adding"},
         {"role": "user", "content": "thanks"}], True, {"enable_thinking": True})
    add([{"role": "system", "content": "sys"},
         {"role": "user", "content": "q1"},
         {"role": "assistant", "content": "<think>r1</think>a1"},
         {"role": "user", "content": "q2"},
         {"role": "assistant", "content": "<think>r2</think>a2"},
         {"role": "user", "content": "q3"}], True, {"enable_thinking": False})
    add([{"role": "user", "content": "q1"},
         {"role": "assistant", "content": "no think here"},
         {"role": "assistant", "content": "<think>\nsecond turn reasoning\n</think>\nsecond answer"}], False)
    add([{"role": "user", "content": "q1"},
         {"role": "assistant", "content": "plain"},
         {"role": "assistant", "content": "also plain"}], True)
    add([{"role": "user", "content": "<tool_response>\nnot really a tool\n</tool_response>"},
         {"role": "assistant", "content": "<think>x</think>y"}], False)
    add([{"role": "user", "content": "first"},
         {"role": "user", "content": "<tool_response>42</tool_response>"},
         {"role": "assistant", "content": "<think>\nsaw 42\n</think>\n\nforty-two"}], False)
    add([{"role": "system", "content": "a"}, {"role": "user", "content": "b"},
         {"role": "system", "content": "late system"}, {"role": "user", "content": "c"}], True)
    add([{"role": "user", "content": TEXTS[6]}, {"role": "assistant", "content": ANSWERS[4]},
         {"role": "user", "content": TEXTS[7]}], True, {"enable_thinking": False})
    add([{"role": "user", "content": TEXTS[8]}], True)
    add([{"role": "user", "content": TEXTS[9]}], True)
    add([{"role": "user", "content": "q"},
         {"role": "assistant", "content": "<think>only reasoning</think>"}], False)
    add([{"role": "user", "content": "q"},
         {"role": "assistant", "content": "prefix <think>mid</think> suffix</think> tail"}], False)
    add([{"role": "user", "content": "q"},
         {"role": "assistant", "content": "", "reasoning_content": None}], True)
    add([{"role": "user", "content": "中文问题"},
         {"role": "assistant", "content": "<think>\n用户问了一个问题\n</think>\n\n答案"},
         {"role": "user", "content": "再来一个"}], True, {"enable_thinking": True})
    add([{"role": "user", "content": [{"type": "text", "text": "Qwen3's template takes string content only"}]}],
        True)
    return cases


def main():
    cases = qwen2_vl_cases() + qwen3_cases()
    with open("testdata/templates/conversations.jsonl", "w", encoding="utf-8") as f:
        for c in cases:
            f.write(json.dumps(c, ensure_ascii=False) + "\n")
    counts = {}
    for c in cases:
        counts[c["template"]] = counts.get(c["template"], 0) + 1
    print(f"wrote {len(cases)} cases to testdata/templates/conversations.jsonl: {counts}")


if __name__ == "__main__":
    main()
