#!/usr/bin/env bash
# Rebuilds the working corpora fuzz/corpus/TARGET/ (git-ignored) from the committed seeds
# (fuzz/seeds/TARGET/), the saved crash regressions (fuzz/regressions/TARGET/), and the
# repository's real recordings and fixtures:
#   sse_decode, provider_stream  every recorded SSE body (testdata/fixtures/weft/*.sse, the
#                                streamed bodies of the pydantic-ai cassettes)
#   provider_body                every recorded JSON response body (testdata/fixtures/weft/*.json,
#                                the cassettes' parsed bodies)
#   thread_parse                 crates/weft-thread/tests/corpus/{valid,invalid}/*.json
#   standard_project             each project under crates/weft-standard/tests/projects and
#                                examples/, packed as `=== PATH` sections (see weft_fuzz)
#   scripted_script              examples/scripts/*.json and the tests' script files
#   hook_payload                 crates/weft-cli/tests/fixtures/hooks/*/*.json
# Usage: fuzz/seed.sh [TARGET...]   (default: every target). Needs python3 with PyYAML.
set -euo pipefail
cd "$(dirname "$0")/.."
python3 - "$@" <<'PY'
import glob, hashlib, json, os, shutil, sys
import yaml

root = os.getcwd()
targets = sys.argv[1:] or sorted(os.listdir("fuzz/seeds"))
corpus = {t: [] for t in targets}

def add(target, data):
    if target in corpus:
        corpus[target].append(data if isinstance(data, bytes) else data.encode())

fixtures = "testdata/fixtures"
for path in sorted(glob.glob(f"{fixtures}/weft/*.sse")):
    body = open(path, "rb").read()
    add("sse_decode", body); add("provider_stream", body)
for path in sorted(glob.glob(f"{fixtures}/weft/*.json")):
    add("provider_body", open(path, "rb").read())
for path in sorted(glob.glob(f"{fixtures}/pydantic-ai/**/*.yaml", recursive=True)):
    for interaction in (yaml.safe_load(open(path)) or {}).get("interactions", []):
        response = interaction.get("response", {})
        body = response.get("body", {})
        if isinstance(body, dict) and isinstance(body.get("string"), str) and "data:" in body["string"]:
            add("sse_decode", body["string"]); add("provider_stream", body["string"])
        if "parsed_body" in response:
            add("provider_body", json.dumps(response["parsed_body"]))
for path in sorted(glob.glob("crates/weft-thread/tests/corpus/*/*.json")):
    add("thread_parse", open(path, "rb").read())
projects = [p for p in glob.glob("crates/weft-standard/tests/projects/*/*") + glob.glob("examples/*")
            if os.path.isdir(p) and (os.path.exists(f"{p}/weft.toml") or os.path.exists(f"{p}/weft.json"))]
for project in sorted(projects):
    packed = ""
    for name in ["weft.toml", "weft.json"] + sorted(
            os.path.relpath(f, project) for d in ("agents", "prompts", "tools")
            for f in glob.glob(f"{project}/{d}/*") if f.endswith((".toml", ".json"))):
        if os.path.isfile(f"{project}/{name}"):
            packed += f"=== {name}\n" + open(f"{project}/{name}").read()
    add("standard_project", packed)
for path in sorted(glob.glob("examples/scripts/*.json") + glob.glob("crates/*/tests/**/script*.json", recursive=True)):
    add("scripted_script", open(path, "rb").read())
for path in sorted(glob.glob("crates/weft-cli/tests/fixtures/hooks/*/*.json")):
    add("hook_payload", open(path, "rb").read())

for target in targets:
    for folder in (f"fuzz/seeds/{target}", f"fuzz/regressions/{target}"):
        for path in sorted(glob.glob(f"{folder}/*")):
            add(target, open(path, "rb").read())
    out = f"fuzz/corpus/{target}"
    os.makedirs(out, exist_ok=True)
    for data in corpus[target]:
        with open(f"{out}/{hashlib.sha1(data).hexdigest()}", "wb") as f:
            f.write(data)
    print(f"{target}: {len(corpus[target])} seeds in {out}")
PY
