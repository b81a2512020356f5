#!/usr/bin/env python3
"""Writes testdata/tokenizer/corpus.jsonl: the tokenizer exactness corpus, one {"text": ...} a line.

Deterministic (fixed seed, no outside input): run from the repository root with
`python3 testdata/tokenizer/make_corpus.py`. The oracle (tools/oracle/text_reference.py) encodes
each line with Hugging Face tokenizers; the Go tests compare ids line by line.
"""
import json
import random
import unicodedata

rng = random.Random(20261202)

SPECIALS = [
    "<|endoftext|>", "<|im_start|>", "<|im_end|>", "<|object_ref_start|>", "<|object_ref_end|>",
    "<|box_start|>", "<|box_end|>", "<|quad_start|>", "<|quad_end|>", "<|vision_start|>",
    "<|vision_end|>", "<|vision_pad|>", "<|image_pad|>", "<|video_pad|>", "<tool_call>",
    "</tool_call>", "<|fim_prefix|>", "<|fim_middle|>", "<|fim_suffix|>", "<|fim_pad|>",
    "<|repo_name|>", "<|file_sep|>", "<tool_response>", "</tool_response>", "<think>", "</think>",
]

MULTILINGUAL = [
    "The quick brown fox jumps over the lazy dog.",
    "Zwölf Boxkämpfer jagen Viktor quer über den großen Sylter Deich.",
    "Le cœur déçu mais l'âme plutôt naïve, Louÿs rêva de crapaüter en canoë.",
    "El pingüino Wenceslao hizo kilómetros bajo exhaustiva lluvia y frío; añoraba a su querido cachorro.",
    "À noite, vovô Kowalsky vê o ímã cair no pé do pingüim queixoso e vovó põe açúcar no chá.",
    "Pchnąć w tę łódź jeża lub ośm skrzyń fig.",
    "Příliš žluťoučký kůň úpěl ďábelské ódy.",
    "Árvíztűrő tükörfúrógép.",
    "Şoföre çabucak güvenip yoğun hızla ışığa girdim.",
    "Съешь же ещё этих мягких французских булок, да выпей чаю.",
    "Чуєш їх, доцю, га? Кумедна ж ти, прощайся без ґольфів!",
    "Жълтата дюля беше щастлива, че пухът, който цъфна, замръзна като гьон.",
    "Ξεσκεπάζω την ψυχοφθόρα βδελυγμία.",
    "דג סקרן שט בים מאוכזב ולפתע מצא חברה.",
    "صِف خَلقَ خَودِ كَمِثلِ الشَمسِ إِذ بَزَغَت يَحظى الضَجيعُ بِها نَجلاءَ مِعطارِ",
    "نص حكيم له سر قاطع وذو شأن عظيم مكتوب على ثوب أخضر ومغلف بجلد أزرق.",
    "ای دریغا که برف‌ها آب شد و من هنوز اینجا هستم.",
    "ऋषियों को सताने वाले दुष्ट राक्षसों के राजा रावण का सर्वनाश करने वाले विष्णुवतार भगवान श्रीराम।",
    "আমি কাচ খেতে পারি, তাতে আমার কোনো ক্ষতি হয় না।",
    "நான் கண்ணாடி சாப்பிடுவேன், அதனால் எனக்கு ஒரு கேடும் வராது.",
    "నేను గాజు తినగలను మరియు అలా చేసినా నాకు ఏమి ఇబ్బంది లేదు",
    "ನಾನು ಗಾಜನ್ನು ತಿನ್ನಬಲ್ಲೆ ಮತ್ತು ಅದರಿಂದ ನನಗೆ ನೋವಾಗುವುದಿಲ್ಲ.",
    "എനിക്ക് ഗ്ലാസ് തിന്നാം. അതെന്നെ വേദനിപ്പിക്കില്ല.",
    "ਮੈਂ ਗਲਾਸ ਖਾ ਸਕਦਾ ਹਾਂ ਅਤੇ ਇਸ ਨਾਲ ਮੈਨੂੰ ਕੋਈ ਤਕਲੀਫ ਨਹੀਂ.",
    "ฉันกินกระจกได้ แต่มันไม่ทำให้ฉันเจ็บ",
    "ຂອ້ຍກິນແກ້ວໄດ້ໂດຍທີ່ມັນບໍ່ໄດ້ເຮັດໃຫ້ຂອ້ຍເຈັບ.",
    "ខ្ញុំអាចញុំកញ្ចក់បាន ដោយគ្មានបញ្ហារ",
    "ကျွန်တော် ကျွန်မ မှန်စားနိုင်တယ်။ ၎င်းကြောင့် ထိခိုက်မှုမရှိပါ။",
    "Tôi có thể ăn thủy tinh mà không hại gì.",
    "我能吞下玻璃而不伤身体。",
    "我能吞下玻璃而不傷身體。",
    "私はガラスを食べられます。それは私を傷つけません。",
    "いろはにほへと ちりぬるを わかよたれそ つねならむ",
    "ｱｲｳｴｵ ｶｷｸｹｺ 半角カナ",
    "나는 유리를 먹을 수 있어요. 그래도 아프지 않아요",
    "Мен шиша ейишим мумкин, аммо у менга зарар келтирмайди.",
    "ᐊᓕᒍᖅ ᓂᕆᔭᕌᖓᒃᑯ ᓱᕋᙱᑦᑐᓐᓇᖅᑐᖓ",
    "Ἰοὺ ἰού· τὰ πάντʼ ἂν ἐξήκοι σαφῆ.",
    "ሰማይ አይታረስ ንጉሥ አይከሰስ።",
    "Կրնամ ապակի ուտել և ինծի անհանգիստ չըներ։",
    "მინას ვჭამ და არა მტკივა.",
    "ཤེལ་སྒོ་ཟ་ནས་ང་ན་གི་མ་རེད།",
    "Mogę jeść szkło i mi nie szkodzi. Jeg kan spise glas, det gør ikke ondt på mig.",
    "ⓗⓔⓛⓛⓞ ⓦⓞⓡⓛⓓ 𝐇𝐞𝐥𝐥𝐨 𝕎𝕠𝕣𝕝𝕕 𝓗𝓮𝓵𝓵𝓸",
    "∀x∈ℝ: ⌈x⌉ = −⌊−x⌋, α ∧ ¬β ⇒ γ, ∑ᵢ₌₁ⁿ i² = n(n+1)(2n+1)/6",
    "𓀀𓀁𓀂 𐌰𐌱𐌲 𝄞𝄢 ꧁꧂",
]

WORDS = [
    "hello", "world", "tokenizer", "Qwen", "vision", "language", "model", "GPU", "kernel",
    "naïve", "café", "résumé", "über", "straße", "東京", "北京", "서울", "Москва", "القاهرة",
    "मुंबई", "กรุงเทพ", "Ελλάδα", "ירושלים", "🙂", "🚀", "x", "I", "a", "HTTP", "JSON",
    "don't", "it's", "we're", "they've", "I'm", "you'll", "he'd", "O'Neil", "rock'n'roll",
]

CODE = [
    "def fib(n):\n    if n < 2:\n        return n\n    return fib(n - 1) + fib(n - 2)\n",
    "package main\n\nimport \"fmt\"\n\nfunc main() {\n\tfmt.Println(\"hello, 世界\")\n}\n",
    "for (let i = 0; i < arr.length; i++) {\n  console.log(`item ${i}: ${arr[i]}`);\n}",
    "#include <stdio.h>\nint main(void) {\n\tprintf(\"%d\\n\", 42);\n\treturn 0;\n}\n",
    "SELECT u.id, COUNT(*) AS n FROM users u JOIN orders o ON o.user_id = u.id WHERE o.total > 100.50 GROUP BY u.id;",
    "{\"name\": \"tfc\", \"version\": [1, 2, 3], \"nested\": {\"ok\": true, \"none\": null}}",
    "<html>\n  <body>\n    <div class=\"a b\">Hi &amp; bye</div>\n  </body>\n</html>",
    "#!/bin/bash\nset -euo pipefail\nfor f in *.txt; do\n  wc -l \"$f\" | awk '{print $1}'\ndone\n",
    "fn main() -> Result<(), Box<dyn std::error::Error>> {\n    let v: Vec<u8> = vec![0xff; 16];\n    Ok(())\n}",
    "x = [i**2 for i in range(10) if i % 3 == 0]  # squares\nprint(f\"{x!r:>20}\")",
    "    \t  mixed_indent = True\n\t    return None\n",
    "a+=1;b-=2;c*=3;d/=4;e%=5;f<<=6;g>>=7;h&=8;i|=9;j^=10;k&&=l||m",
    "// TODO(someone): fix\n/* block\n * comment */\nconst re = /^[a-z]+\\d{2,3}$/gi;",
    "diff --git a/x.go b/x.go\n@@ -1,3 +1,4 @@\n-old line\n+new line\n context\n",
    "\\begin{equation}\n  E = mc^2 \\quad \\forall x \\in \\mathbb{R}\n\\end{equation}",
    "  File \"main.py\", line 12, in <module>\n    raise ValueError('bad')\nValueError: bad",
    "```python\nimport numpy as np\nnp.zeros((3, 4), dtype=np.float32)\n```",
    "key: value\nlist:\n  - one\n  - two\n# comment\nempty:\n",
    "$ ls -la /tmp && echo $?\ntotal 0\ndrwxrwxrwt  2 root root  40 Dec  2 11:42 .",
    "https://example.com/path/to/page?query=1&lang=en#section-2 mailto:someone@example.org",
]

WHITESPACE = [" ", "  ", "   ", "    ", "\t", "\t\t", "\n", "\n\n", "\r\n", "\r", " \n", "\n ",
              "\u00a0", "\u3000", "\u2003", "\u2028", "\u2029", "\u000b", "\u000c", "\u0085",
              "\u200b", "\ufeff", " \t \n", "\n\n\n\n", "        "]

EMOJI = [
    "👍", "👍🏻", "👍🏽", "👍🏿", "👨‍👩‍👧‍👦", "👩🏽‍💻", "🏳️‍🌈", "🏴‍☠️", "❤️", "❤", "☺️", "🇯🇵", "🇺🇸🇬🇧",
    "🏴󠁧󠁢󠁳󠁣󠁴󠁿", "1️⃣", "#️⃣", "🧑🏾‍🤝‍🧑🏼", "👁️‍🗨️", "🤷‍♀️", "🙋🏻‍♂️", "😀😃😄😁", "🫠", "🦀", "🐍", "✨", "©️", "™", "🔥🔥🔥",
]

COMBINING = [
    "e\u0301", "a\u0300", "o\u0308", "u\u0308\u0301", "n\u0303", "c\u0327", "A\u030a", "i\u0302",
    "\u1100\u1161\u11a8", "\u1112\u1161\u11ab\u1100\u1173\u11af", "e\u0301\u0302\u0323",
    "Z\u0351\u036b\u0343\u036a\u0302\u036b\u033d\u034f\u0334\u0319\u0324\u031e\u0349\u035a\u032f\u031e\u0320\u034d",
    "\u0915\u094d\u0937", "\u0928\u093f", "\u0e01\u0e34\u0e48", "\u0627\u064e\u0644\u0652",
    "\u05e9\u05c1\u05b8", "\u212b", "\u2126", "\ufb01", "\u1e9b\u0323", "\u00c5", "\u0041\u030a",
    "\u03d3", "\u03d2\u0301", "\u0344", "\u0f73", "\u30ac", "\u30ab\u3099", "\uff76\uff9e",
]

CONTRACTIONS = ["'s", "'t", "'re", "'ve", "'m", "'ll", "'d", "'S", "'T", "'RE", "'VE", "'M", "'LL", "'D",
                "'Re", "'rE", "'Ll", "’s", "’t", "'x", "''", "'", "n't", "N'T"]


def nfd(s):
    return unicodedata.normalize("NFD", s)


def edge_cases():
    out = ["", " ", "  ", "\n", "\t", "\r\n", "a", "A", "0", "'", "''", "'s", "s'", "!", "?!", "...",
           "\u0000", "\u0000\u0001\u0002\u001f\u007f", "\ufffd", "\ufffd\ufffd", "\uffff", "\ufffe",
           "\U0010ffff", "\ue000\uf8ff", "\U000f0000", "\u200d", "\u200c\u200d", "\u2060", "\ufeffBOM",
           "\u202eRTL override\u202c", "\u061c\u200e\u200f", "a\u0300", "\u0301", "\u0301\u0301abc",
           "<|im_start", "<|im_start|", "|im_start|>", "<|im_start |>", "<|IM_START|>", "<<|im_end|>>",
           "<|im_start|><|im_end|>", "<|im_start|>\n", "\n<|im_end|>", " <|im_end|> ", "<think></think>",
           "<think>\n\n</think>\n\n", "</think>x<think>", "<|endoftext|><|endoftext|><|endoftext|>",
           "<|image_pad|>" * 8, "<|vision_start|>" + "<|image_pad|>" * 3 + "<|vision_end|>",
           "<tool_call>\n{\"name\": \"f\", \"arguments\": {}}\n</tool_call>", "<|im_end|x", "<|<|im_end|>|>",
           "<tool_call", "tool_call>", "< think>", "<think >", "<Think>", "<|fim_prefix|>def<|fim_suffix|>\n<|fim_middle|>",
           "a" * 200, "ab" * 150, " " * 100, "\t" * 50, "\n" * 60, " \n" * 40, "😀" * 30, "中" * 100,
           "1" * 100, "0.0", "-0", "1e-10", "3.14159265358979323846", "1,000,000", "10.000,5",
           "٠١٢٣٤٥٦٧٨٩", "۰۱۲۳", "०१२३४५६७८९", "１２３４５", "¹²³", "½ ¾ ⅓", "Ⅻ ⅻ", "①②③", "𝟘𝟙𝟚",
           "I'm", "I'M", "i'M", "DON'T", "don't", "Don't", "we're", "WE'RE", "it's'", "'s's's", "''s",
           "rock'n'roll", "y'all'd've", "'twas", "o'clock", "'hello'", "\"quoted\"", "‘curly’ “double”",
           "hello world", " hello world", "hello world ", "hello  world", "hello\tworld", "hello\nworld",
           "hello \nworld", "hello\n world", "hello \n world", "hello\n\n\nworld", "hello\r\nworld",
           "x  ", "x   \n", "   x", "\n\n x", " \t\n\r\u000b\u000c", "a\u3000b", "a\u00a0b", "a\u2028b",
           "end with newline\n", "end with spaces   ", "end with tab\t", "\u00a0\u00a0lead nbsp",
           "ﬁﬂ ligatures", "Å Å Å", "Ω Ω", "㎒ ㎓", "ｆｕｌｌ　ｗｉｄｔｈ", "ǅ ǈ ǋ", "ẞ ß", "İ ı i I",
           "it'\u017f", "'\u017f", "'\u017ft", "\u017f", "I'\u212a", "'\u0130", "'\u0131", "'\ufb06",
           "\u0130stanbul", "\u03a3\u03c3\u03c2", "Ⅰ", "Ⓐ", "\u1e9e", "\U0001d400", "\u2160\u2161",
           ]
    for c in COMBINING:
        out.append(c)
        out.append("x" + c + "y")
        out.append(c + " " + c)
    for w in MULTILINGUAL:
        out.append(nfd(w))
    return out


def rand_ws():
    return rng.choice(WHITESPACE)


def sentence():
    k = rng.randint(1, 12)
    parts = []
    for _ in range(k):
        parts.append(rng.choice(WORDS))
        parts.append(rng.choice([" ", " ", " ", ", ", ". ", "  ", "\n", "\t", "-", "/", "", "! "]))
    return "".join(parts)


def number():
    kind = rng.randrange(8)
    n = rng.randint(1, 40)
    digits = "".join(rng.choice("0123456789") for _ in range(n))
    if kind == 0:
        return digits
    if kind == 1:
        return digits[: max(1, n // 2)] + "." + digits[n // 2:]
    if kind == 2:
        return "-" + digits
    if kind == 3:
        return f"{int(digits):,}"
    if kind == 4:
        return digits + "e" + rng.choice(["+", "-", ""]) + str(rng.randint(0, 300))
    if kind == 5:
        return "0x" + "".join(rng.choice("0123456789abcdefABCDEF") for _ in range(n))
    if kind == 6:
        return rng.choice(["$", "€", "¥", "£", "₹"]) + digits[:8] + rng.choice(["", ".99", "k", "M"])
    return "".join(rng.choice(["٣", "७", "５", "3", "²", "๓", "৩", "߃"]) for _ in range(n))


def code():
    snippet = rng.choice(CODE)
    if rng.random() < 0.3:
        snippet = snippet.replace("    ", "\t")
    if rng.random() < 0.3:
        snippet = snippet.replace("\n", "\r\n")
    if rng.random() < 0.3:
        lines = snippet.split("\n")
        lo = rng.randrange(len(lines))
        snippet = "\n".join(lines[lo:lo + rng.randint(1, 4)])
    return snippet


def whitespace_run():
    parts = []
    for _ in range(rng.randint(1, 6)):
        if rng.random() < 0.6:
            parts.append("".join(rand_ws() for _ in range(rng.randint(1, 4))))
        if rng.random() < 0.7:
            parts.append(rng.choice(WORDS + ["x", "1", "!", "'s", "中", "😀", "<|im_end|>"]))
    return "".join(parts)


def emoji_text():
    parts = []
    for _ in range(rng.randint(1, 6)):
        parts.append(rng.choice(EMOJI))
        parts.append(rng.choice(["", " ", "  ", "\n", "a", "中", ",", "!!"]))
    return "".join(parts)


def combining_text():
    parts = []
    for _ in range(rng.randint(1, 5)):
        parts.append(rng.choice(COMBINING))
        parts.append(rng.choice(["", " ", "x", "é", "\n", "1"]))
    s = "".join(parts)
    return nfd(s) if rng.random() < 0.5 else s


def contraction_text():
    parts = []
    for _ in range(rng.randint(1, 6)):
        parts.append(rng.choice(["I", "you", "WE", "They", "it", "x", "1", " ", "", "中", "é", "'"]))
        parts.append(rng.choice(CONTRACTIONS))
        parts.append(rng.choice([" ", "", "\n", "s", "'", "re", "!"]))
    return "".join(parts)


def special_text():
    parts = []
    for _ in range(rng.randint(1, 6)):
        r = rng.random()
        if r < 0.45:
            parts.append(rng.choice(SPECIALS))
        elif r < 0.55:
            t = rng.choice(SPECIALS)
            cut = rng.randint(1, len(t) - 1)
            parts.append(t[:cut] if rng.random() < 0.5 else t[cut:])
        else:
            parts.append(rng.choice(["", " ", "\n", "  ", "\t", "user", "assistant", "hi", "中文", "'s", "😀"]))
    return "".join(parts)


def multilingual_text():
    a = rng.choice(MULTILINGUAL)
    if rng.random() < 0.4:
        a += rand_ws() + rng.choice(MULTILINGUAL)
    if rng.random() < 0.3:
        i = rng.randrange(len(a) + 1)
        a = a[:i] + rng.choice(WORDS) + a[i:]
    return a


POOL = ("abcXYZ019 '\t\n\r\u00a0\u3000.,;:!?-_()[]{}<>|/\\\"@#$%^&*+=~`é中日한ñßøΩЖعहไ😀👍🏽\u200d\u0301\ufe0f"
        "٣５²\u0000\u007f\ufffd")


def random_mix():
    n = rng.randint(1, 60)
    s = "".join(rng.choice(POOL) for _ in range(n))
    if rng.random() < 0.2:
        i = rng.randrange(len(s) + 1)
        s = s[:i] + rng.choice(SPECIALS) + s[i:]
    return s


def main():
    texts = list(MULTILINGUAL) + list(CODE) + edge_cases()
    texts += [w for w in WORDS] + [" " + w for w in WORDS]
    makers = [
        (multilingual_text, 300), (sentence, 200), (code, 200), (whitespace_run, 250),
        (emoji_text, 180), (combining_text, 180), (number, 250), (contraction_text, 150),
        (special_text, 250), (random_mix, 300),
    ]
    for make, count in makers:
        for _ in range(count):
            texts.append(make())
    with open("testdata/tokenizer/corpus.jsonl", "w", encoding="utf-8") as f:
        for t in texts:
            f.write(json.dumps({"text": t}, ensure_ascii=False) + "\n")
    print(f"wrote {len(texts)} strings to testdata/tokenizer/corpus.jsonl")


if __name__ == "__main__":
    main()
