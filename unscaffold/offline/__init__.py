"""Stand-ins that let every stage run on a machine with no network and no model hub; none is part of a recipe.

- `appworld_lite/`: a self-contained app world (the real AppWorld needs its package and data download).
- `images.py`: builds Docker base images with debootstrap from local packages (no registry to pull from).
- `tiny.py`: tiny models built from a config, so training and inference code paths run without downloaded weights.
- `dockerfile.py`: what a Harbor task's Dockerfile can give the local sandbox (WORKDIR, ENV, COPY), no engine.
- `qwen_bpe.py`: the real Qwen tokenizer rebuilt from a registry package's files (no hub download).
"""
