"""`--base-image IMAGE=LOCAL_IMAGE`: a task Dockerfile's unpullable `FROM IMAGE` built on a local image."""

from __future__ import annotations

from typing import Self

from pydantic import Field

from unscaffold.errors import InputError
from unscaffold.specs.base import Spec


class BaseImageSpec(Spec):
    """One substitution: the image a Dockerfile names, and the local image used instead."""

    FLAG = "--base-image"
    image: str = Field(min_length=1)
    local: str = Field(min_length=1)

    @classmethod
    def parse(cls, text: str, *, flag: str | None = None) -> Self:
        image, sep, local = text.partition("=")
        if not sep or not image.strip() or not local.strip():
            raise InputError(flag or cls.FLAG, None, f"{text!r} is not IMAGE=LOCAL_IMAGE")
        return cls(image=image.strip(), local=local.strip())

    def __str__(self) -> str:
        return f"{self.image}={self.local}"
