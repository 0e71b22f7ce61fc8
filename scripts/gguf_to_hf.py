"""Dequantise a GGUF model to a float32 Hugging Face directory with transformers' GGUF reader, and record
its provenance (used by provision-vllm.sh: vLLM on CPU cannot run GGUF).

Usage: python gguf_to_hf.py GGUF OUT_DIR SOURCE_SHA256
Writes OUT_DIR (config, tokenizer, safetensors) and OUT_DIR/servegate-provenance.json:
  {"source": file name, "source_sha256", "transformers", "gguf", "torch", "dtype": "float32",
   "derived_digest": sha256 over "<name>\\0<sha256 of file>\\n" of every other file, sorted by name}
The conversion is deterministic: the same GGUF gives the same derived_digest on every run.
"""
import hashlib
import importlib.metadata
import json
import os
import sys


def digest_dir(d):
    lines = []
    for root, _, files in os.walk(d):
        for f in files:
            p = os.path.join(root, f)
            rel = os.path.relpath(p, d)
            if rel == "servegate-provenance.json":
                continue
            h = hashlib.sha256()
            with open(p, "rb") as fh:
                for block in iter(lambda: fh.read(1 << 20), b""):
                    h.update(block)
            lines.append(f"{rel}\0{h.hexdigest()}\n")
    return hashlib.sha256("".join(sorted(lines)).encode()).hexdigest()


def main():
    gguf_path, out, source_sha = sys.argv[1:4]
    import gguf  # noqa: F401  (transformers' GGUF reader needs it)
    import torch
    import transformers
    from transformers import AutoModelForCausalLM, AutoTokenizer

    folder, name = os.path.split(os.path.abspath(gguf_path))
    tok = AutoTokenizer.from_pretrained(folder, gguf_file=name)
    model = AutoModelForCausalLM.from_pretrained(folder, gguf_file=name, dtype=torch.float32)
    # The weights are now plain float32 tensors; transformers still marks the model as GGUF-quantized
    # (not serializable). Drop that mark: what is saved is the dequantised model, with no quantization.
    model.hf_quantizer = None
    if hasattr(model.config, "quantization_config"):
        del model.config.quantization_config
    for p in model.parameters():
        assert p.dtype == torch.float32, p.dtype
    model.save_pretrained(out, safe_serialization=True)
    tok.save_pretrained(out)
    prov = {
        "source": name,
        "source_sha256": source_sha,
        "transformers": transformers.__version__,
        "gguf": importlib.metadata.version("gguf"),
        "torch": torch.__version__,
        "dtype": "float32",
        "derived_digest": digest_dir(out),
    }
    with open(os.path.join(out, "servegate-provenance.json"), "w") as fh:
        json.dump(prov, fh, indent=1, sort_keys=True)
        fh.write("\n")
    print(prov["derived_digest"])


if __name__ == "__main__":
    main()
